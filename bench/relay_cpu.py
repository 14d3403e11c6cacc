"""CPU cost per relayed event inside the relay function: mapping + grouping + real
ServiceBusMessageBatch packing, with sending replaced by a no-op (no I/O).

`overhead()` measures it with telemetry off (the API's no-op providers) and on (the SDK with
in-memory metric reader and a batch span processor, as a configured worker has), interleaved in
one run, and reports the ratio."""

from __future__ import annotations

import time
from typing import Any

from azure.servicebus import ServiceBusMessageBatch

from application.outbox.ports import (
    MessageBatch,
    MessagePublisher,
    Quarantine,
    QuarantinedEvent,
)
from application.outbox.records import OutboxRecord, Unreadable
from application.outbox.relay import Relay
from application.outbox.telemetry import RelayTelemetry
from application.ports import Page
from domain.contact import Contact
from domain.values import Company, Name
from infra.cosmos.documents import event_documents, read_feed
from infra.servicebus.publisher import ServiceBusBatch


class NoSendPublisher(MessagePublisher):
    def __init__(self) -> None:
        self.sends = 0

    def create_batch(self) -> MessageBatch:
        return ServiceBusBatch(ServiceBusMessageBatch(max_size_in_bytes=256 * 1024))

    def send(self, batch: MessageBatch) -> None:
        self.sends += 1


class NoQuarantine(Quarantine):
    """The benchmark's events are all well formed: nothing is ever set aside."""

    def put(self, event: OutboxRecord | Unreadable, *, reason: str) -> None:
        raise AssertionError(f"a benchmark event was quarantined: {reason}")

    def get(self, event_id: str) -> QuarantinedEvent:
        raise NotImplementedError

    def list_page(self, *, page_size: int,
                  continuation: str | None) -> Page[QuarantinedEvent]:
        raise NotImplementedError

    def count(self) -> int:
        return 0

    def replayed(self, entry: QuarantinedEvent, *, resolved: bool, reason: str,
                 ttl_seconds: int) -> QuarantinedEvent:
        raise NotImplementedError

    def discard(self, entry: QuarantinedEvent) -> None:
        raise NotImplementedError


def documents(contacts: int, changes: int) -> list[dict[str, Any]]:
    docs = []
    for i in range(contacts):
        contact = Contact.create(name=Name(first_name=f"C{i}", last_name="Bench"),
                                 email=f"c{i}@example.com", company=Company(company_name="B"))
        for u in range(changes):
            contact.describe(f"change {u}")
        docs += event_documents(contact, ttl_seconds=600)
    return docs


def run(invocations: int = 50, telemetry: RelayTelemetry | None = None) -> dict[str, float]:
    docs = documents(contacts=20, changes=4)  # 100 events = one default invocation
    publisher = NoSendPublisher()
    relay = Relay(publisher, NoQuarantine(), telemetry)
    relay.relay(read_feed(docs))
    start_cpu, start = time.process_time(), time.perf_counter()
    for _ in range(invocations):
        relay.relay(read_feed(docs))  # parsing is part of the relay's cost
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start
    events = invocations * len(docs)
    return {"events": events, "cpu_us_per_event": cpu / events * 1e6,
            "wall_us_per_event": wall / events * 1e6,
            "batches_per_invocation": publisher.sends / (invocations + 1)}


def overhead(rounds: int = 7, invocations: int = 40) -> dict[str, float]:
    """Relay CPU per event, telemetry off vs on, alternating rounds; medians and their ratio."""
    import logging
    import statistics

    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    logging.getLogger("application.relay").setLevel(logging.WARNING)
    off = RelayTelemetry(destination="contact-events",
                         meter_provider=metrics.NoOpMeterProvider(),
                         tracer_provider=trace.NoOpTracerProvider())
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    on = RelayTelemetry(destination="contact-events", meter_provider=meter_provider,
                        tracer_provider=tracer_provider)
    cpu_off, cpu_on = [], []
    for _ in range(rounds):
        cpu_off.append(run(invocations, off)["cpu_us_per_event"])
        cpu_on.append(run(invocations, on)["cpu_us_per_event"])
    tracer_provider.shutdown()
    meter_provider.shutdown()
    median_off, median_on = statistics.median(cpu_off), statistics.median(cpu_on)
    return {"cpu_us_per_event_off": median_off, "cpu_us_per_event_on": median_on,
            "on_to_off_ratio": median_on / median_off, "rounds": rounds,
            "events_per_round": invocations * 100}


if __name__ == "__main__":
    print(run())
    print(overhead())
