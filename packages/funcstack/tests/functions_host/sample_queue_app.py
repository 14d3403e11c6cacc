"""Sample v2 app with Storage queue triggers (copied into a temp dir as function_app.py): each
invocation appends what the function saw to the file named by QUEUE_OUT; a body starting
with "fail" raises."""

from __future__ import annotations

import json
import os
from pathlib import Path

import azure.functions as func

app = func.FunctionApp()


def record(function: str, msg: func.QueueMessage) -> None:
    seen = {
        "function": function,
        "id": msg.id,
        "body": msg.get_body().decode("utf-8"),
        "dequeue_count": msg.dequeue_count,
        "insertion_time": msg.insertion_time.isoformat() if msg.insertion_time else None,
        "expiration_time": msg.expiration_time.isoformat() if msg.expiration_time else None,
        "time_next_visible": msg.time_next_visible.isoformat() if msg.time_next_visible else None,
        "pop_receipt": msg.pop_receipt,
    }
    with Path(os.environ["QUEUE_OUT"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(seen) + "\n")


@app.queue_trigger(arg_name="msg", queue_name="%JOBS_QUEUE%", connection="JobsStorage")
def jobs(msg: func.QueueMessage) -> None:
    record("jobs", msg)
    if msg.get_body().startswith(b"fail"):
        raise RuntimeError("failing as asked")


# "Storage": no such setting, so the host reads AzureWebJobsStorage (its AzureWebJobs prefix)
@app.queue_trigger(arg_name="msg", queue_name="plain-%JOBS_QUEUE%", connection="Storage")
def plain(msg: func.QueueMessage) -> None:
    record("plain", msg)
