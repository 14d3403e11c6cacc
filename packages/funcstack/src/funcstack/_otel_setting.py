"""The local host's telemetry setting, kept apart from ``otel.py``'s OpenTelemetry SDK imports.

A worker reads it on start and imports ``funcstack.otel`` (the SDK and OTLP encoders, about
0.17 s of CPU) only when it is set; most workers never need them.
"""

from __future__ import annotations

ENV_VAR = "FUNCTIONS_HOST_OTEL_DIR"
