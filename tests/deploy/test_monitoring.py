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


def test_three_alert_rules_on_the_outbox_metrics_notify_the_action_group() -> None:
    rules = [
        r for r in t.resources("Microsoft.Insights/scheduledQueryRules") if r.file == MONITORING
    ]
    assert len(rules) == 3
    text = MONITORING.read_text()
    for key in ("oldestPendingAge", "quarantined", "relayFailures"):
        assert f"metricNames.{key}" in text
    assert "loadJsonContent('metric-names.json')" in text
    assert "param actionGroupId string" in text
    assert "param oldestPendingAgeThresholdSeconds int = 300" in text
    # failures sustained for 5 minutes: five failing one-minute periods out of five
    assert "numberOfEvaluationPeriods: 5" in text and "minFailingPeriodsToAlert: 5" in text


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
