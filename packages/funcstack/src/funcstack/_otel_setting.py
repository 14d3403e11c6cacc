"""The local host's telemetry setting, kept apart from ``otel.py``'s OpenTelemetry SDK imports.

A worker reads it on start and imports ``funcstack.otel`` (the SDK and its OTLP encoders) only
when it is set; most workers never need them (a hello app's worker: 0.35 s of CPU to ready
with them, 0.31 s without; ``tests/functions_host/test_worker_imports.py``).
"""

from __future__ import annotations

ENV_VAR = "FUNCTIONS_HOST_OTEL_DIR"
