"""Sample v2 app with a Cosmos DB trigger (copied into a temp dir as function_app.py).

Every invocation appends one JSON line to SAMPLE_OUT: {"pid", "ok", "ids", "pks"} (and
"documents", as the function received them, with SAMPLE_RECORD_DOCUMENTS=true).
While the file SAMPLE_FAIL_FLAG exists, invocations fail (after recording the attempt); so do
batches holding a document of partition key SAMPLE_FAIL_PK.
SAMPLE_SLEEP_SECONDS: a successful invocation sleeps after recording its batch, so a runner
killed meanwhile has delivered the batch but not checkpointed it.
SAMPLE_LEASE_INTERVALS_MS: "<acquire>,<renew>,<expiration>" in the binding (default
"1000,1000,10000": a killed host's leases are free again within seconds; "" for Azure's
defaults). SAMPLE_SECOND_TRIGGER=true adds a second trigger, `audit`, on the same container and
lease container (SAMPLE_SECOND_PREFIX: its lease_container_prefix); it records with "fn".
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import azure.functions as func
from azure.functions.decorators.function_app import FunctionBuilder

app = func.FunctionApp()

# SAMPLE_MAX_RETRY: max_retry_count of the fixed-delay policy ("-1" = forever, the default);
# "none" declares no retry policy at all.
_MAX_RETRY = os.environ.get("SAMPLE_MAX_RETRY", "-1")
# SAMPLE_FROM_BEGINNING: "false" leaves the host's default, a new lease starts from "now".
_FROM_BEGINNING = os.environ.get("SAMPLE_FROM_BEGINNING", "true") == "true"


_INTERVALS = [
    int(ms)
    for ms in os.environ.get("SAMPLE_LEASE_INTERVALS_MS", "1000,1000,10000").split(",")
    if ms
]
_ACQUIRE, _RENEW, _EXPIRATION = _INTERVALS if _INTERVALS else (None, None, None)


def _record(docs: func.DocumentList, ok: bool, fn: str = "relay") -> None:
    line: dict[str, object] = {
        "fn": fn,
        "pid": os.getpid(),
        "instance": os.environ.get("WEBSITE_INSTANCE_ID", ""),
        "ok": ok,
        "ids": [doc["id"] for doc in docs],
        "pks": [doc["partitionKey"] for doc in docs],
    }
    if os.environ.get("SAMPLE_RECORD_DOCUMENTS") == "true":
        line["documents"] = [json.loads(doc.to_json()) for doc in docs]
    with Path(os.environ["SAMPLE_OUT"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _retry(builder: FunctionBuilder) -> FunctionBuilder:
    if _MAX_RETRY == "none":
        return builder
    # whole seconds: the worker cannot parse fractional intervals (it fails indexing)
    decorate = app.retry(
        strategy="fixed_delay", max_retry_count=_MAX_RETRY, delay_interval="00:00:01"
    )
    result: FunctionBuilder = decorate(builder)
    return result


@_retry
@app.cosmos_db_trigger(
    arg_name="docs",
    connection="CosmosDBConnection",
    database_name="%COSMOS_DATABASE%",
    container_name="%COSMOS_CONTAINER%",
    lease_container_name="%COSMOS_LEASE_CONTAINER%",
    create_lease_container_if_not_exists=True,
    feed_poll_delay=100,
    max_items_per_invocation=5,
    start_from_beginning=True if _FROM_BEGINNING else None,  # type: ignore[arg-type]
    lease_acquire_interval=_ACQUIRE,
    lease_renew_interval=_RENEW,
    lease_expiration_interval=_EXPIRATION,
)
def relay(docs: func.DocumentList) -> None:
    stuck = os.environ.get("SAMPLE_FAIL_PK")
    if Path(os.environ["SAMPLE_FAIL_FLAG"]).exists() or any(
        doc["partitionKey"] == stuck for doc in docs
    ):
        _record(docs, ok=False)
        raise RuntimeError("injected failure")
    _record(docs, ok=True)
    time.sleep(float(os.environ.get("SAMPLE_SLEEP_SECONDS", "0")))


if os.environ.get("SAMPLE_SECOND_TRIGGER") == "true":

    @app.cosmos_db_trigger(
        arg_name="docs",
        connection="CosmosDBConnection",
        database_name="%COSMOS_DATABASE%",
        container_name="%COSMOS_CONTAINER%",
        lease_container_name="%COSMOS_LEASE_CONTAINER%",
        lease_container_prefix=os.environ.get("SAMPLE_SECOND_PREFIX") or None,
        create_lease_container_if_not_exists=True,
        feed_poll_delay=100,
        max_items_per_invocation=5,
        start_from_beginning=True,  # type: ignore[arg-type]
        lease_acquire_interval=_ACQUIRE,
        lease_renew_interval=_RENEW,
        lease_expiration_interval=_EXPIRATION,
    )
    def audit(docs: func.DocumentList) -> None:
        _record(docs, ok=True, fn="audit")
