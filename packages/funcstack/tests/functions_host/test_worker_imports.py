"""The language worker starts without the OpenTelemetry SDK unless ``FUNCTIONS_HOST_OTEL_DIR``
asks for the local telemetry files: a worker starts for every host, and the SDK with its OTLP
encoders is most of what it would import besides the library."""

from __future__ import annotations

import subprocess
import sys

SDK_LOADED = (
    "import sys, funcstack.functions_host._worker; "
    "print(any(m.startswith('opentelemetry.sdk') for m in sys.modules))"
)


def test_the_worker_module_does_not_import_the_opentelemetry_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SDK_LOADED], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False", done.stderr
