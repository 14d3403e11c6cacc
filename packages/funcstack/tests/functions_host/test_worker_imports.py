"""The language worker starts without the OpenTelemetry SDK unless ``FUNCTIONS_HOST_OTEL_DIR``
asks for the local telemetry files: a worker starts for every host, and the SDK with its OTLP
encoders is most of what it would import besides the library. The fork server imports
azure-functions for its workers: each worker's init loads it (the library's binding registry)."""

from __future__ import annotations

import subprocess
import sys

SDK_LOADED = (
    "import sys, funcstack.functions_host._worker; "
    "print(any(m.startswith('opentelemetry.sdk') for m in sys.modules))"
)
SERVER_PRELOAD = (
    "import sys; from funcstack.functions_host._forkserver_server import _preload_worker; "
    "_preload_worker(); print('azure.functions' in sys.modules)"
)


def test_the_worker_module_does_not_import_the_opentelemetry_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SDK_LOADED], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False", done.stderr


def test_the_fork_server_imports_azure_functions_for_the_workers_it_forks() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVER_PRELOAD], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "True", done.stderr
