"""Sample v2 app for the scale-out tests (copied into a temp dir as function_app.py).

``GET /api/whoami``: the instance that served it (``WEBSITE_INSTANCE_ID``) and its pid.
``POST /api/remember?value=X``: kept in this process's memory; ``GET /api/recall``: what this
process remembers. ``tick`` (a timer, every second) appends one JSON line to SAMPLE_OUT: its
instance, pid and what its process remembers -- in an instance of its own (Flex Consumption's
per-function scaling) it remembers nothing the HTTP functions were told. While the file
SAMPLE_BROKEN names exists, the app fails to load (its host does not start).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import azure.functions as func

if os.environ.get("SAMPLE_BROKEN") and Path(os.environ["SAMPLE_BROKEN"]).exists():
    raise RuntimeError("broken on purpose (SAMPLE_BROKEN)")

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

_remembered: list[str] = []


def _me() -> dict[str, object]:
    return {"instance": os.environ.get("WEBSITE_INSTANCE_ID", ""), "pid": os.getpid()}


@app.route(route="whoami", methods=["GET"])
def whoami(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(_me()), mimetype="application/json")


@app.route(route="remember", methods=["POST"])
def remember(req: func.HttpRequest) -> func.HttpResponse:
    _remembered.append(req.params.get("value", ""))
    return func.HttpResponse(json.dumps(_me()), mimetype="application/json")


@app.route(route="recall", methods=["GET"])
def recall(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps({**_me(), "remembered": _remembered}), mimetype="application/json"
    )


@app.timer_trigger(
    arg_name="timer", schedule="* * * * * *", run_on_startup=False, use_monitor=False
)
def tick(timer: func.TimerRequest) -> None:
    with Path(os.environ["SAMPLE_OUT"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps({**_me(), "remembered": _remembered}) + "\n")
