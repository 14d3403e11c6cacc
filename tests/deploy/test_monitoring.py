"""Telemetry in Azure: host and worker export OpenTelemetry to Application Insights, and the
alert rules and the workbook reference the metric names the code emits."""

from __future__ import annotations

import json

from cosmos_outbox import telemetry
from tests.deploy import templates as t
from tests.deploy.templates import DEPLOY, ROOT

MONITORING = DEPLOY / "modules" / "monitoring.bicep"


def test_the_bicep_metric_names_are_the_codes() -> None:
    names = json.loads((DEPLOY / "modules" / "metric-names.json").read_text())
    assert names == telemetry.BICEP_NAMES
    assert set(telemetry.BICEP_NAMES.values()) >= {m.name for m in telemetry.METRICS}


def test_host_and_worker_export_opentelemetry_to_application_insights() -> None:
    host = json.loads((ROOT / "host.json").read_text())
    assert host["telemetryMode"] == "OpenTelemetry"
    app = (DEPLOY / "modules" / "functionapp.bicep").read_text()
    assert "'PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY'" in app
    requirements = (ROOT / "requirements.txt").read_text()
    assert "azure-monitor-opentelemetry" in requirements  # the worker imports it
    assert "opentelemetry-sdk" not in requirements  # the app never configures the SDK


def test_five_alert_rules_on_the_outbox_metrics_notify_the_action_group() -> None:
    rules = [
        r for r in t.resources("Microsoft.Insights/scheduledQueryRules") if r.file == MONITORING
    ]
    assert len(rules) == 5
    text = MONITORING.read_text()
    for key in (
        "oldestPendingAge",
        "quarantined",
        "relayFailures",
        "relayStalled",
        "vanishedDeadLetters",
    ):
        assert f"metricNames.{key}" in text
    assert "loadJsonContent('metric-names.json')" in text
    assert "param actionGroupId string" in text
    assert "param oldestPendingAgeThresholdSeconds int = 300" in text
    # failures sustained for 5 minutes: five failing one-minute periods out of five
    assert "numberOfEvaluationPeriods: 5" in text and "minFailingPeriodsToAlert: 5" in text


def test_the_relay_stalled_alert_fires_on_one_stalled_reading_and_names_what_to_read() -> None:
    """Healthy means moving: the backlog timer's `outbox.relay.stalled` (1 while pending events
    do not leave within the poll delay and the bound) alerts at its first reading, severity 1,
    evaluated every minute."""
    text = MONITORING.read_text()
    start = text.index("resource relayStalled ")
    rule = text[start : text.index("\nresource ", start + 1)]
    assert 'name == "${metricNames.relayStalled}"' in rule
    assert "operator: 'GreaterThan'" in rule and "threshold: 0" in rule
    assert "severity: 1" in rule and "evaluationFrequency: 'PT1M'" in rule
    assert "minFailingPeriodsToAlert: 1" in rule
    assert "relayStalled.id" in text and "vanishedDeadLetters.id" in text


def test_a_workbook_plots_lag_throughput_backlog_and_quarantines() -> None:
    [workbook] = [r for r in t.resources("Microsoft.Insights/workbooks") if r.file == MONITORING]
    assert workbook.config["kind"] == "shared"
    text = MONITORING.read_text()
    for key in ("relayLag", "sentMessages", "pending", "oldestPendingAge", "quarantined"):
        assert f"metricNames.{key}" in text


def test_main_deploys_the_monitoring_module() -> None:
    text = t.MAIN.read_text()
    assert "module monitoring 'modules/monitoring.bicep'" in text
    assert "alertActionGroupId" in text
