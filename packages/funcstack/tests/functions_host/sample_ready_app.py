"""Sample v2 app with one function per trigger type the host serves (copied into a temp dir as
function_app.py): each invocation appends a line ``{"trigger", "id", "instance"}`` to the file
named by READY_OUT. Its Cosmos DB trigger starts from now (the default), as most apps'."""

from __future__ import annotations

import json
import os
from pathlib import Path

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def record(trigger: str, ident: str) -> None:
    line = {"trigger": trigger, "id": ident, "instance": os.environ.get("WEBSITE_INSTANCE_ID")}
    with Path(os.environ["READY_OUT"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


@app.route(route="ping")
def pinged(req: func.HttpRequest) -> func.HttpResponse:
    record("http", req.params.get("id", ""))
    return func.HttpResponse("pong")


@app.timer_trigger(schedule="*/1 * * * * *", arg_name="timer")
def ticked(timer: func.TimerRequest) -> None:
    record("timer", "")


@app.queue_trigger(arg_name="msg", queue_name="ready-jobs", connection="AzureWebJobsStorage")
def queued(msg: func.QueueMessage) -> None:
    record("queue", msg.get_body().decode("utf-8"))


@app.blob_trigger(arg_name="blob", path="ready-blobs/{name}", connection="AzureWebJobsStorage")
def uploaded(blob: func.InputStream) -> None:
    record("blob", blob.read().decode("utf-8"))


@app.service_bus_queue_trigger(
    arg_name="msg", queue_name="ready-jobs", connection="ServiceBusConnection"
)
def sent(msg: func.ServiceBusMessage) -> None:
    record("servicebus", msg.get_body().decode("utf-8"))


@app.cosmos_db_trigger(
    arg_name="docs",
    database_name="ready",
    container_name="items",
    connection="CosmosConnection",
    lease_container_name="leases",
    create_lease_container_if_not_exists=True,
)
def changed(docs: func.DocumentList) -> None:
    for doc in docs:
        record("cosmos", str(doc["id"]))
