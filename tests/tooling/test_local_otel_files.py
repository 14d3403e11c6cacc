"""The local stack's OTLP/JSON-lines exporters and `make status` reading what they wrote."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from cosmos_outbox import telemetry as names
from cosmos_outbox.documents import aggregate_event_document, read_feed
from cosmos_outbox.relay import Quarantine, Relay, RelayTelemetry
from cosmos_outbox_testing import FakePublisher, InMemoryStore, run_sync
from domain.contact import Contact
from domain.values import Company, Name
from funcstack.deadlines import LONG
from funcstack.otel import JsonLinesMetricExporter, JsonLinesSpanExporter
from tools import status
from tools.stack import ROOT
from tools.status import Context, Summary, exported_at, render, summarise

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def history(n_changes: int) -> list[dict[str, Any]]:
    """The stored events of a contact created, then described `n_changes` times."""
    contact = Contact.create(
        name=Name(first_name="Ada", last_name="L"),
        email="a@example.com",
        company=Company(company_name="E"),
    )
    for i in range(n_changes):
        contact.describe(f"change {i}")
    return [
        aggregate_event_document(
            e.model_copy(update={"traceparent": TRACE}), source=Contact.source(), ttl_seconds=60
        )
        for e in contact.collect_events()
    ]


def test_relay_telemetry_lands_in_otlp_json_lines_and_status_sums_it_up(tmp_path: Path) -> None:
    reader = PeriodicExportingMetricReader(
        JsonLinesMetricExporter(tmp_path / "metrics.jsonl"), export_interval_millis=3_600_000
    )
    meter_provider = MeterProvider(metric_readers=[reader])
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(JsonLinesSpanExporter(tmp_path / "traces.jsonl"))
    )
    recorder = RelayTelemetry(
        destination="contact-events", meter_provider=meter_provider, tracer_provider=tracer_provider
    )
    docs = history(9)
    docs[3].pop("action")  # one poison event
    relay = Relay(FakePublisher(), Quarantine(InMemoryStore()), recorder)
    run_sync(relay.relay(read_feed(docs)))
    recorder.backlog([("-FF", 4, 30.0)])
    before = time.time()
    meter_provider.shutdown()  # final export
    after = time.time()
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
    assert "messages sent" in screen and "quarantine actions" in screen
    assert "4  (timer estimate at the export, 1 lease(s))" in screen
    assert "30.0 s" in screen
    exported = exported_at((tmp_path / "metrics.jsonl").read_text().splitlines())
    # the export's own time (its points' collection, at the final export), not a fixed one
    assert exported is not None and before - 0.001 <= exported <= after + 0.001


def line(screen: str, label: str) -> str:
    [found] = [row for row in screen.splitlines() if row.strip().startswith(label)]
    return found.strip()[len(label) :].strip()


def test_status_says_when_no_stack_runs_and_how_old_its_figures_are() -> None:
    summary = Summary(sums={names.QUARANTINED: 7.0})
    screen = render(
        summary, context=Context(running=False, exported_at=1_000_000.0, now=1_000_000.0 + 3 * 3600)
    )
    first, second = screen.splitlines()[:2]
    assert first.startswith("NO LOCAL STACK IS RUNNING")
    assert "not current" in second and "(3.0 h ago)" in second
    assert line(screen, "quarantined events now") == "-  (no stack running)"
    assert line(screen, "quarantine actions").startswith("7  (events the relay set aside")


def test_status_takes_the_quarantined_records_and_the_backlog_from_the_api() -> None:
    summary = Summary(
        sums={names.QUARANTINED: 7.0}, gauges={(names.PENDING, names.ALL_LEASES): 40.0}
    )
    api = {
        "pending": 2,
        "oldestPendingAgeSeconds": 1.5,
        "quarantined": 1,
        "leases": [{"lease": "0"}],
    }
    screen = render(summary, context=Context(running=True, exported_at=time.time(), api=api))
    assert screen.splitlines()[0].startswith(
        "outbox status: local stack running; figures exported at "
    )
    assert line(screen, "quarantined events now") == (
        "1  (records not resolved, now, from the API)"
    )
    assert line(screen, "quarantine actions").startswith("7  ")
    assert line(screen, "backlog (pending changes)") == "2  (now, from the API, 1 lease(s))"
    failing = render(summary, context=Context(running=True, api_error="503 the store ..."))
    assert line(failing, "quarantined events now") == (
        "-  (the API did not answer: 503 the store ...)"
    )


def test_make_status_exits_1_when_no_stack_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(status, "PIDFILE", tmp_path / "pids.json")
    assert status.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "NO LOCAL STACK IS RUNNING" in out and "no figures exported yet" in out


def test_python_m_tools_status_as_make_status_runs_it(tmp_path: Path) -> None:
    """The command `make status` runs, as a process: it prints the screen and exits with it
    (an empty directory of figures, so no stack's figures are read)."""
    done = subprocess.run(
        [sys.executable, "-m", "tools.status", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=LONG,  # a hang guard: an interpreter printing one screen
        check=False,
    )
    assert "quarantine actions" in done.stdout, done.stderr
    assert done.returncode in (0, 1)
