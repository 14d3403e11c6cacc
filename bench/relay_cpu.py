"""CPU cost per relayed event inside the relay function: mapping + grouping + real
ServiceBusMessageBatch packing, with sending replaced by a no-op (no I/O)."""

from __future__ import annotations

import time
from typing import Any

from azure.servicebus import ServiceBusMessageBatch

from application.ports import MessageBatch, MessagePublisher
from application.relay import Relay
from domain.contact import Contact
from domain.values import Company, Name
from infra.cosmos.documents import event_document, read_feed
from infra.servicebus.publisher import ServiceBusBatch
from tests.fakes import InMemoryQuarantine


class NoSendPublisher(MessagePublisher):
    def __init__(self) -> None:
        self.sends = 0

    def create_batch(self) -> MessageBatch:
        return ServiceBusBatch(ServiceBusMessageBatch(max_size_in_bytes=256 * 1024))

    def send(self, batch: MessageBatch) -> None:
        self.sends += 1


def documents(contacts: int, changes: int) -> list[dict[str, Any]]:
    docs = []
    for i in range(contacts):
        contact = Contact.create(name=Name(first_name=f"C{i}", last_name="Bench"),
                                 email=f"c{i}@example.com", company=Company(company_name="B"))
        for u in range(changes):
            contact.describe(f"change {u}")
        docs += [event_document(e, ttl_seconds=600) for e in contact.collect_events()]
    return docs


def run(invocations: int = 50) -> dict[str, float]:
    docs = documents(contacts=20, changes=4)  # 100 events = one default invocation
    publisher = NoSendPublisher()
    relay = Relay(publisher, InMemoryQuarantine())
    relay.relay(read_feed(docs))
    start_cpu, start = time.process_time(), time.perf_counter()
    for _ in range(invocations):
        relay.relay(read_feed(docs))  # parsing is part of the relay's cost
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start
    events = invocations * len(docs)
    return {"events": events, "cpu_us_per_event": cpu / events * 1e6,
            "wall_us_per_event": wall / events * 1e6,
            "batches_per_invocation": publisher.sends / (invocations + 1)}


if __name__ == "__main__":
    print(run())
