"""Sample v2 app for the stop tests (copied into a temp dir as function_app.py): an app slow to
stop. Its worker ignores SIGTERM, and ``GET /api/hang`` writes the worker's pid to the file
SAMPLE_HANGING names, then blocks for good: a host asked to stop waits for the invocation in
vain, past the grace its stop gives it, and is killed while its worker still runs."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import azure.functions as func

signal.signal(signal.SIGTERM, signal.SIG_IGN)

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="hang", methods=["GET"])
def hang(req: func.HttpRequest) -> func.HttpResponse:
    Path(os.environ["SAMPLE_HANGING"]).write_text(str(os.getpid()))
    threading.Event().wait()
    return func.HttpResponse("never")
