"""Sample app of the host parity suite: behaviours where a naive local runner and the real
Functions host + Python worker differ (copied into a temp dir as function_app.py).

Every timer invocation appends {"retry": n} to PARITY_OUT.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


# Annotated as HttpResponse: the worker refuses to index `-> None` or `-> bytes` on an HTTP
# function at all; these return the wrong thing at run time instead.
@app.route(route="returns-none", methods=["GET"])
def returns_none(req: func.HttpRequest) -> func.HttpResponse:
    return None  # type: ignore[return-value]


@app.route(route="returns-bytes", methods=["GET"])
def returns_bytes(req: func.HttpRequest) -> func.HttpResponse:
    return b"raw"  # type: ignore[return-value]


@app.route(route="raises", methods=["GET"])
def raises(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("secret detail")


@app.route(route="echo", methods=["GET", "POST"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    payload = {
        "params": dict(req.params),
        "headers": {k: v for k, v in req.headers.items() if k.startswith("x-")},
        "body": req.get_body().decode("utf-8", "replace"),
    }
    return func.HttpResponse(json.dumps(payload), mimetype="application/json")


@app.route(route="sleep/{seconds:int}", methods=["GET"])
def sleep(req: func.HttpRequest) -> func.HttpResponse:
    time.sleep(int(req.route_params["seconds"]))
    return func.HttpResponse(str(os.getpid()))


@app.route(route="pid", methods=["GET"])
def pid(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(str(os.getpid()))


@app.retry(strategy="fixed_delay", max_retry_count="1", delay_interval="00:00:01")
@app.timer_trigger(arg_name="timer", schedule="*/2 * * * * *")
def ticks_with_a_value(timer: func.TimerRequest, context: func.Context) -> int:
    with Path(os.environ["PARITY_OUT"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps({"retry": context.retry_context.retry_count}) + "\n")
    return 42  # no $return binding: the worker fails the invocation
