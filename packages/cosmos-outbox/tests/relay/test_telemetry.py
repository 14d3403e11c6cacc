"""Relay telemetry read back through the OpenTelemetry SDK's in-memory reader and exporter."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from cosmos_outbox import telemetry as names
from cosmos_outbox._mapper import read_feed
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._relay.forwarding import Relay
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.telemetry import RelayTelemetry
from cosmos_outbox_testing import FakePublisher, InMemoryStore
from relay.test_relay import TRACE, history

TOPIC = "ticket-events"


@dataclass
class Telemetry:
    reader: InMemoryMetricReader
    spans: InMemorySpanExporter
    recorder: RelayTelemetry

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found

    def total(self, name: str) -> float:
        return float(sum(p.value for p in self.points(name)))


def relaying(publisher: FakePublisher, otel: Telemetry) -> Relay:
    """The relay on `publisher`, with a quarantine of its own, recording into `otel`."""
    return Relay(publisher, Quarantine(InMemoryStore()), otel.recorder)


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    reader = InMemoryMetricReader()
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(
        reader,
        spans,
        RelayTelemetry(
            destination=TOPIC, meter_provider=meter_provider, tracer_provider=tracer_provider
        ),
    )
    meter_provider.shutdown()
    tracer_provider.shutdown()


def test_a_known_batch_gives_exact_counts_and_one_lag_value_per_event(otel: Telemetry) -> None:
    docs = history(29)  # 30 events of one ticket
    publisher = FakePublisher(max_batch_bytes=2000)
    run_sync(relaying(publisher, otel).relay(read_feed(docs)))
    batches = len(publisher.sent)
    assert batches > 1
    [sent] = otel.points(names.SENT_MESSAGES)
    assert sent.value == 30
    assert dict(sent.attributes) == {
        "messaging.system": "servicebus",
        "messaging.destination.name": TOPIC,
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
    }
    [duration] = otel.points(names.OPERATION_DURATION)
    assert duration.count == batches
    [lag] = otel.points(names.RELAY_LAG)
    assert lag.count == 30
    assert lag.min >= 0
    assert otel.points(names.RELAY_FAILURES) == []
    assert otel.points(names.QUARANTINED) == []


def test_each_batch_is_a_producer_span_linked_to_the_events_context(otel: Telemetry) -> None:
    docs = history(29)
    publisher = FakePublisher(max_batch_bytes=2000)
    run_sync(relaying(publisher, otel).relay(read_feed(docs)))
    spans = otel.spans.get_finished_spans()
    assert len(spans) == len(publisher.sent)
    for span, batch in zip(spans, publisher.sent, strict=True):
        assert span.name == f"send {TOPIC}"
        assert span.kind is SpanKind.PRODUCER
        assert span.attributes is not None
        assert span.attributes["messaging.batch.message_count"] == len(batch)
        assert span.attributes["messaging.destination.name"] == TOPIC
        assert span.attributes["messaging.system"] == "servicebus"
        # the events of one request share its context: one link to it
        [link] = span.links
        assert f"{link.context.trace_id:032x}" == TRACE.split("-")[1]
        assert f"{link.context.span_id:016x}" == TRACE.split("-")[2]


def test_a_batch_links_each_valid_context_once_in_order_of_its_events(otel: Telemetry) -> None:
    """One link per distinct (trace id, span id), first seen first, whatever its flags; no link
    for a traceparent that is not a valid W3C one (uppercase, another version, zero ids)."""
    trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    parents = [
        f"00-{trace.upper()}-{span}-01",
        f"01-{trace}-{span}-01",
        f"00-{'0' * 32}-{span}-01",
        f"00-{trace}-{'0' * 16}-01",
        f"00-{trace}-{span}-1",
        f"00-{trace}-{span}-01x",
        None,
        f"00-{trace}-{span}-00",
        other,
        f"00-{trace}-{span}-01",
        other,
    ]
    docs = history(len(parents) - 1)
    for doc, parent in zip(docs, parents, strict=True):
        doc["traceparent"] = parent
    run_sync(relaying(FakePublisher(), otel).relay(read_feed(docs)))
    [sent] = otel.spans.get_finished_spans()
    assert [
        (
            f"{link.context.trace_id:032x}",
            f"{link.context.span_id:016x}",
            int(link.context.trace_flags),
        )
        for link in sent.links
    ] == [(trace, span, 0), ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 0)]
    assert all(link.context.is_remote for link in sent.links)


def test_a_send_failure_counts_a_failure_sends_nothing_and_logs_the_lag(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    docs = history(3)
    publisher = FakePublisher(fail_on_send=1)
    relay = Relay(publisher, Quarantine(InMemoryStore()), otel.recorder)
    with (
        caplog.at_level(logging.INFO, logger="cosmos_outbox.relay"),
        pytest.raises(ConnectionError),
    ):
        run_sync(relay.relay(read_feed(docs)))
    [failure] = otel.points(names.RELAY_FAILURES)
    assert failure.value == 1
    assert failure.attributes["error.type"] == "ConnectionError"
    assert otel.points(names.SENT_MESSAGES) == []
    assert otel.points(names.RELAY_LAG) == []
    [record] = [r for r in caplog.records if r.getMessage().startswith("relay invocation")]
    assert record.levelno == logging.ERROR
    fields = record.__dict__
    assert fields["outbox.outcome"] == "failed"
    assert fields["outbox.received"] == 4 and fields["outbox.sent"] == 0
    assert fields["error.type"] == "ConnectionError"
    assert isinstance(fields["outbox.max_lag_ms"], int) and fields["outbox.max_lag_ms"] >= 0
    [span] = otel.spans.get_finished_spans()
    assert span.attributes is not None and span.attributes["error.type"] == "ConnectionError"
    assert not span.status.is_ok


def test_a_quarantined_event_increments_its_counter(otel: Telemetry) -> None:
    docs = history(2)
    docs[1].pop("action")
    run_sync(relaying(FakePublisher(), otel).relay(read_feed(docs)))
    [quarantined] = otel.points(names.QUARANTINED)
    assert quarantined.value == 1
    assert otel.total(names.SENT_MESSAGES) == 3  # two events and the quarantine notice


def test_a_successful_invocation_logs_its_fields(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="cosmos_outbox.relay"):
        run_sync(relaying(FakePublisher(), otel).relay(read_feed(history(1))))
    [record] = [r for r in caplog.records if r.getMessage().startswith("relay invocation")]
    assert record.levelno == logging.INFO
    assert record.__dict__["outbox.outcome"] == "ok"
    assert record.__dict__["outbox.sent"] == 2


def test_backlog_gauges_per_lease_and_in_total(otel: Telemetry) -> None:
    otel.recorder.backlog([("0-7F", 3, 12.5), ("7F-FF", 2, 40.0)])
    pending = {p.attributes["outbox.lease"]: p.value for p in otel.points(names.PENDING)}
    oldest = {p.attributes["outbox.lease"]: p.value for p in otel.points(names.OLDEST_PENDING_AGE)}
    assert pending == {"0-7F": 3, "7F-FF": 2, "all": 5}
    assert oldest == {"0-7F": 12.5, "7F-FF": 40.0, "all": 40.0}


def test_the_stalled_gauge_is_one_series_that_returns_to_0_when_the_relay_moves(
    otel: Telemetry,
) -> None:
    """Issue 66, item 1: the alert on `outbox.relay.stalled` (its maximum) resolves once the relay
    moves again: no series left at 1 under another attribute set."""
    otel.recorder.relay_state("stalled")
    assert [p.value for p in otel.points(names.RELAY_STALLED)] == [1]
    otel.recorder.relay_state("healthy")
    assert [p.value for p in otel.points(names.RELAY_STALLED)] == [0]
    otel.recorder.relay_state("not ready")
    assert [p.value for p in otel.points(names.RELAY_STALLED)] == [1]
