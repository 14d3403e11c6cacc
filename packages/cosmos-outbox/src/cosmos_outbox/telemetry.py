"""The names of the relay's telemetry (OpenTelemetry: the messaging semantic conventions' where
they exist, the outbox's own beside them), its metrics' specifications and the names the Bicep
alert rules and workbook read (`BICEP_NAMES`), and `RelayTelemetry`, which records them. For
dashboards, alerts and tests that read what the relay reports."""

from __future__ import annotations

from cosmos_outbox._relay.telemetry import (
    ALL_LEASES,
    BICEP_NAMES,
    INSTRUMENTATION_SCOPE,
    MESSAGING_SYSTEM,
    METRICS,
    OFFLOADED,
    OFFLOADED_BYTES,
    OLDEST_PENDING_AGE,
    OPERATION_DURATION,
    PENDING,
    QUARANTINED,
    RELAY_FAILURES,
    RELAY_LAG,
    SENT_MESSAGES,
    MetricSpec,
    RelayTelemetry,
)

__all__ = [
    "ALL_LEASES",
    "BICEP_NAMES",
    "INSTRUMENTATION_SCOPE",
    "MESSAGING_SYSTEM",
    "METRICS",
    "OFFLOADED",
    "OFFLOADED_BYTES",
    "OLDEST_PENDING_AGE",
    "OPERATION_DURATION",
    "PENDING",
    "QUARANTINED",
    "RELAY_FAILURES",
    "RELAY_LAG",
    "SENT_MESSAGES",
    "MetricSpec",
    "RelayTelemetry",
]
