"""CPU cost per relayed event inside the relay function, beside its floor.

The relay's path: parsing the stored documents (`read_feed`), grouping and ordering, mapping
each event to a message with its CloudEvents attributes (binary content mode), packing a real
`ServiceBusMessageBatch`, and recording telemetry; sending is a no-op (no I/O). The events are
what the HTTP API writes: each change of a contact in a request of its own, so each event
carries its own `traceparent` (hence the `traceparent`/`Diagnostic-Id` properties and one span
link per event).

The floor is the SDK alone packing a message with the same properties and body, nothing of
ours: from ready-made inputs (the body bytes and the property mappings, prepared untimed), the
SDK's public message object is constructed and added to a fresh `ServiceBusMessageBatch` of the
same size, 100 per batch as the relay's invocations are. Two public message objects are
measured, `ServiceBusMessage` and `AmqpAnnotatedMessage`; the floor is the cheaper. Each batch is
checked to hold exactly as many bytes as the relay's (`size_in_bytes`), so the floor packs the
same wire bytes. Reported beside it, as a lower bound: messages constructed beforehand too, the
batch's `add_message` alone (inside it the SDK encodes each message twice: once for its size,
once into the batch).

`measure()` runs the relay with telemetry on (the OpenTelemetry SDK with an in-memory metric
reader and a batch span processor, as a configured worker has), with telemetry off (the API's
no-op providers), each as the sync API runs it (its coroutine to its end in this thread) and as
the async API does (awaited on an event loop, over an async publisher: the Contacts app's), and
the floors in alternating rounds in one process, in CPU time (the process's). Each figure is
the best of its rounds (other processes on the same cores only ever add to a round's time, as
`timeit` reasons) and the ratios are of the best figures; the medians of the rounds are kept in
the result too.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus.amqp import AmqpAnnotatedMessage
from opentelemetry import metrics, trace

from cosmos_outbox.documents import aggregate_event_document, read_feed
from cosmos_outbox.ports import AsyncMessagePublisher, MessageBatch, MessagePublisher
from cosmos_outbox.relay import (
    OutboxRecord,
    Quarantine,
    Relay,
    RelayTelemetry,
    Unreadable,
    to_message,
)
from cosmos_outbox.servicebus import ServiceBusBatch, application_properties, to_amqp_message
from cosmos_outbox_testing import InMemoryStore, run_sync
from domain.contact import Contact
from domain.values import Company, Name

BATCH_BYTES = 256 * 1024
#: Events per relay invocation (the trigger's default MAX_ITEMS_PER_INVOCATION).
EVENTS_PER_INVOCATION = 100


class NoSendPublisher(MessagePublisher):
    def __init__(self) -> None:
        self.sent: list[ServiceBusMessageBatch] = []

    def create_batch(self) -> MessageBatch:
        return ServiceBusBatch(ServiceBusMessageBatch(max_size_in_bytes=BATCH_BYTES))

    def send(self, batch: MessageBatch) -> None:
        assert isinstance(batch, ServiceBusBatch)
        self.sent.append(batch.batch)
        del self.sent[:-1]  # the last one, for the size check


class AsyncNoSendPublisher(AsyncMessagePublisher):
    """`NoSendPublisher`, async: the async relay's port (its batch is the SDK's, as the `aio`
    sender makes it)."""

    def __init__(self) -> None:
        self.sent: list[ServiceBusMessageBatch] = []

    async def create_batch(self) -> MessageBatch:
        return ServiceBusBatch(ServiceBusMessageBatch(max_size_in_bytes=BATCH_BYTES))

    async def send(self, batch: MessageBatch) -> None:
        assert isinstance(batch, ServiceBusBatch)
        self.sent.append(batch.batch)
        del self.sent[:-1]


class NoQuarantine(Quarantine):
    """The benchmark's events are all well formed: nothing is ever set aside (the relay only
    puts events in the quarantine; its store is never written)."""

    def __init__(self) -> None:
        super().__init__(InMemoryStore())

    async def put(self, event: OutboxRecord | Unreadable, *, reason: str) -> None:
        raise AssertionError(f"a benchmark event was quarantined: {reason}")


def documents(contacts: int = 20, changes: int = 4) -> list[dict[str, Any]]:
    """Stored event documents as the HTTP API writes them: one request (trace) per change."""
    docs = []
    for i in range(contacts):
        contact = Contact.create(
            name=Name(first_name=f"C{i}", last_name="Bench"),
            email=f"c{i}@example.com",
            company=Company(company_name="B"),
        )
        for u in range(changes):
            contact.describe(f"change {u}")
        for event in contact.collect_events():
            traced = event.model_copy(
                update={"traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"}
            )
            docs.append(aggregate_event_document(traced, source=Contact.source(), ttl_seconds=600))
    return docs


def telemetry_off() -> RelayTelemetry:
    return RelayTelemetry(
        destination="contact-events",
        meter_provider=metrics.NoOpMeterProvider(),
        tracer_provider=trace.NoOpTracerProvider(),
    )


@contextmanager
def telemetry_on() -> Iterator[RelayTelemetry]:
    """The OpenTelemetry SDK as a configured worker has it (in-memory reader and exporter)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    try:
        yield RelayTelemetry(
            destination="contact-events",
            meter_provider=meter_provider,
            tracer_provider=tracer_provider,
        )
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()


def _cpu_us_per_event(fn: Callable[[], object], invocations: int) -> float:
    start = time.process_time()
    for _ in range(invocations):
        fn()
    return (time.process_time() - start) / (invocations * EVENTS_PER_INVOCATION) * 1e6


def measure(rounds: int = 9, invocations: int = 30) -> dict[str, Any]:
    """Relay CPU per event (telemetry on and off) and the SDK's floor, in alternating rounds."""
    logging.getLogger("cosmos_outbox.relay").setLevel(logging.WARNING)
    docs = documents()
    assert len(docs) == EVENTS_PER_INVOCATION
    records = [r for r in read_feed(docs) if isinstance(r, OutboxRecord)]
    outbox = [to_message(r) for r in records]
    # The floors' inputs, ready-made (untimed): the body and the property mappings, as the
    # SDK's public constructors take them.
    sb_inputs: list[tuple[bytes, dict[str, Any]]] = [
        (
            m.body,
            {
                "content_type": m.content_type,
                "subject": m.subject,
                "message_id": m.message_id,
                "session_id": m.session_id,
                "application_properties": application_properties(m),
            },
        )
        for m in outbox
    ]
    amqp_inputs = [
        (
            m.body,
            {
                "message_id": m.message_id,
                "subject": m.subject,
                "content_type": m.content_type,
                "group_id": m.session_id,
            },
            application_properties(m),
        )
        for m in outbox
    ]
    prebuilt = [to_amqp_message(m) for m in outbox]
    floor_batches: list[ServiceBusMessageBatch] = []

    def floor_servicebus_message() -> None:
        batch = ServiceBusMessageBatch(max_size_in_bytes=BATCH_BYTES)
        for body, fields in sb_inputs:
            batch.add_message(ServiceBusMessage(body, **fields))
        floor_batches[:] = [batch]

    def floor_amqp_message() -> None:
        batch = ServiceBusMessageBatch(max_size_in_bytes=BATCH_BYTES)
        for body, properties, app_properties in amqp_inputs:
            batch.add_message(
                AmqpAnnotatedMessage(
                    data_body=body, properties=properties, application_properties=app_properties
                )
            )
        floor_batches[:] = [batch]

    def add_only() -> None:
        batch = ServiceBusMessageBatch(max_size_in_bytes=BATCH_BYTES)
        for message in prebuilt:
            batch.add_message(message)
        floor_batches[:] = [batch]

    loop = asyncio.new_event_loop()
    with telemetry_on() as on:
        publishers: dict[str, NoSendPublisher | AsyncNoSendPublisher] = {
            "relay_on": NoSendPublisher(),
            "relay_off": NoSendPublisher(),
            "relay_async_on": AsyncNoSendPublisher(),
            "relay_async_off": AsyncNoSendPublisher(),
        }
        relays = {
            name: Relay(publisher, NoQuarantine(), on if name.endswith("_on") else telemetry_off())
            for name, publisher in publishers.items()
        }
        variants: dict[str, Callable[[], object]] = {
            # as the sync API runs the relay: its coroutine to its end in this thread
            "relay_on": lambda: run_sync(relays["relay_on"].relay(read_feed(docs))),
            "relay_off": lambda: run_sync(relays["relay_off"].relay(read_feed(docs))),
            # as the async API runs it: awaited on an event loop, over an async publisher
            "relay_async_on": lambda: loop.run_until_complete(
                relays["relay_async_on"].relay(read_feed(docs))
            ),
            "relay_async_off": lambda: loop.run_until_complete(
                relays["relay_async_off"].relay(read_feed(docs))
            ),
            "floor_servicebus_message": floor_servicebus_message,
            "floor_amqp_message": floor_amqp_message,
            "add_only": add_only,
        }
        sizes = {}
        for name, fn in variants.items():  # warm up, and check the bytes are the same
            fn()
            [batch] = publishers[name].sent if name in publishers else floor_batches
            assert len(batch) == EVENTS_PER_INVOCATION, name
            sizes[name] = batch.size_in_bytes
        assert len(set(sizes.values())) == 1, f"the batches differ: {sizes}"
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, fn in variants.items():
                samples[name].append(_cpu_us_per_event(fn, invocations))
    loop.close()
    best = {name: min(values) for name, values in samples.items()}
    medians = {name: statistics.median(values) for name, values in samples.items()}
    floor_kind = min(("floor_servicebus_message", "floor_amqp_message"), key=best.__getitem__)
    floor = best[floor_kind]
    return {
        "cpu_us_per_event_on": best["relay_on"],
        "cpu_us_per_event_off": best["relay_off"],
        "floor_us_per_event": floor,
        "floor_kind": floor_kind,
        "floor_servicebus_message_us": best["floor_servicebus_message"],
        "floor_amqp_message_us": best["floor_amqp_message"],
        "add_only_us": best["add_only"],
        "on_to_floor_ratio": best["relay_on"] / floor,
        "off_to_floor_ratio": best["relay_off"] / floor,
        "on_to_off_ratio": best["relay_on"] / best["relay_off"],
        "cpu_us_per_event_async_on": best["relay_async_on"],
        "cpu_us_per_event_async_off": best["relay_async_off"],
        "async_on_to_floor_ratio": best["relay_async_on"] / floor,
        "async_off_to_floor_ratio": best["relay_async_off"] / floor,
        "medians_us": medians,
        "batch_bytes": sizes["relay_on"],
        "rounds": rounds,
        "events_per_round": invocations * EVENTS_PER_INVOCATION,
    }


if __name__ == "__main__":
    print(measure())
