"""The local stack's OTLP/JSON-lines exporters and `make status` reading what they wrote."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from application.outbox import telemetry as names
from application.outbox.relay import Relay
from application.outbox.telemetry import RelayTelemetry
from emulators.otel import JsonLinesMetricExporter, JsonLinesSpanExporter
from infra.cosmos.documents import read_feed
from tests.fakes import FakePublisher, InMemoryQuarantine
from tests.unit.test_relay import TRACE, history
from tools.status import render, summarise


def test_relay_telemetry_lands_in_otlp_json_lines_and_status_sums_it_up(tmp_path: Path) -> None:
    reader = PeriodicExportingMetricReader(
        JsonLinesMetricExporter(tmp_path / "metrics.jsonl"), export_interval_millis=3_600_000)
    meter_provider = MeterProvider(metric_readers=[reader])
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(JsonLinesSpanExporter(tmp_path / "traces.jsonl")))
    recorder = RelayTelemetry(destination="contact-events", meter_provider=meter_provider,
                              tracer_provider=tracer_provider)
    docs = history(9)
    docs[3]["data"].pop("action")  # one poison event
    Relay(FakePublisher(), InMemoryQuarantine(), recorder).relay(read_feed(docs))
    recorder.backlog([("-FF", 4, 30.0)])
    meter_provider.shutdown()  # final export
    tracer_provider.shutdown()

    [span_line] = (tmp_path / "traces.jsonl").read_text().splitlines()
    [span] = json.loads(span_line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert span["name"] == "send contact-events"
    assert span["kind"] == 4  # SPAN_KIND_PRODUCER, as an integer (OTLP/JSON)
    assert span["links"][0]["traceId"] == TRACE.split("-")[1]  # hex, not base64
    assert len(span["spanId"]) == 16

    summary = summarise((tmp_path / "metrics.jsonl").read_text().splitlines())
    assert summary.sums[names.SENT_MESSAGES] == 10  # 9 events and the quarantine notice
    assert summary.sums[names.QUARANTINED] == 1
    assert summary.lag.count == 9
    assert summary.gauges[(names.PENDING, names.ALL_LEASES)] == 4
    screen = render(summary)
    assert "messages sent" in screen and "quarantined events" in screen
    assert "4  (timer estimate, 1 lease(s))" in screen
    assert "30.0 s" in screen
