"""POST /api/contacts through the local Functions host vs the bare SDK batch of the same two
documents (the SDK's aio client, as the app runs it), the host's own overhead per HTTP call
(HTTP through the host minus the same function called in-process, on an event loop of this
thread), and POST and PATCH with an Idempotency-Key vs without (calls alternated, so both see
the same machine), measured in one run against one local stack."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import azure.functions as func
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from bench.stats import percentile, timed
from cosmos_outbox import Services
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.cosmos.aio import cosmos_client as async_cosmos_client
from cosmos_outbox.documents import aggregate_document, event_documents
from cosmos_outbox.ports import MessagePublisher
from cosmos_outbox_testing import InvocationContext
from domain.contact import Contact
from domain.values import Company, Name
from tools.httpclient import Client
from tools.stack import Stack

BODY = {
    "firstName": "Ada",
    "lastName": "Lovelace",
    "email": "ada@example.com",
    "companyName": "Engines",
}
_NEXT = itertools.count()


def new_body() -> dict[str, str]:
    """`BODY` with an address of its own (the app keeps the addresses it last checked)."""
    return {**BODY, "email": f"ada.{next(_NEXT)}@example.com"}


def until_healthy(stack: Stack, timeout: float = 60.0) -> float:
    """perf_counter() at the first 200 from /health."""
    client = Client(stack.api_url)
    deadline = time.perf_counter() + timeout
    try:
        while time.perf_counter() < deadline:
            if client.request("GET", "/health").status == 200:
                return time.perf_counter()
            time.sleep(0.05)
    finally:
        client.close()
    raise TimeoutError("/health did not answer 200")


def alternated(
    plain: Callable[[], None], keyed: Callable[[], None], n: int, warmup: int = 20
) -> tuple[dict[str, float], dict[str, float]]:
    """Median and p99 (ms) of `plain` and of `keyed`, n calls each, one of each in turn."""
    for _ in range(warmup):
        plain()
        keyed()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(n):
        for fn, out in ((plain, samples[0]), (keyed, samples[1])):
            start = time.perf_counter()
            fn()
            out.append((time.perf_counter() - start) * 1000)
    plain_row, keyed_row = (
        {"n": n, "median_ms": statistics.median(s), "p99_ms": percentile(s, 99)} for s in samples
    )
    return plain_row, keyed_row


def idempotency(client: Client, n: int) -> dict[str, Any]:
    """POST and PATCH (one event each: a new description every call) without and with an
    Idempotency-Key (a new key every call: the success path, the record in the same batch)."""

    def post(headers: dict[str, str]) -> None:
        assert (
            client.request("POST", "/contacts", json_body=new_body(), headers=headers).status == 201
        )

    target = client.request("POST", "/contacts", json_body=BODY).json()["id"]

    def patch(headers: dict[str, str]) -> None:
        reply = client.request(
            "PATCH",
            f"/contacts/{target}",
            headers=headers,
            json_body={"description": uuid.uuid4().hex},
        )
        assert reply.status == 200

    def key() -> dict[str, str]:
        return {"Idempotency-Key": f'"{uuid.uuid4()}"'}

    post_plain, post_keyed = alternated(lambda: post({}), lambda: post(key()), n)
    patch_plain, patch_keyed = alternated(lambda: patch({}), lambda: patch(key()), n)
    return {
        "rows": {
            "POST /api/contacts, no key": post_plain,
            "POST /api/contacts, Idempotency-Key": post_keyed,
            "PATCH /api/contacts/{id}, no key": patch_plain,
            "PATCH /api/contacts/{id}, Idempotency-Key": patch_keyed,
        },
        "post_keyed_to_plain_ratio": post_keyed["median_ms"] / post_plain["median_ms"],
        "patch_keyed_to_plain_ratio": patch_keyed["median_ms"] / patch_plain["median_ms"],
    }


def run(stack: Stack, n: int = 500) -> dict[str, Any]:
    values = stack.settings()
    assert stack.cosmos is not None
    # One event loop in this thread for every async call here: the SDK's aio client (the floor)
    # and the app's async functions called in-process, each on its own client, as the app has.
    loop = asyncio.new_event_loop()
    cosmos = loop.run_until_complete(_aio_client(stack.cosmos.connection_string))
    container = cosmos.get_database_client(values["COSMOS_DATABASE"]).get_container_client(
        values["COSMOS_CONTAINER"]
    )

    def sdk_batch() -> None:
        contact = Contact.create(
            name=Name(first_name="Ada", last_name="Lovelace"),
            email="ada@example.com",
            company=Company(company_name="E"),
        )
        [event] = event_documents(contact, ttl_seconds=864000)
        loop.run_until_complete(
            container.execute_item_batch(
                batch_operations=[("create", (aggregate_document(contact),)), ("create", (event,))],
                partition_key=contact.id,
            )
        )

    client = Client(stack.api_url)

    def http_post() -> None:
        reply = client.request("POST", "/contacts", json_body=new_body())
        assert reply.status == 201

    created = client.request("POST", "/contacts", json_body=BODY).json()["id"]

    def http_get() -> None:
        assert client.request("GET", f"/contacts/{created}").status == 200

    # The same functions in this process, with the same settings: no HTTP, no host; the app's
    # store on this process's aio client (the floor's: the app has one per process too).
    saved = dict(os.environ)
    os.environ.update(values)
    from entrypoints.bootstrap import bootstrap

    services = Services(
        store=AsyncCosmosDocumentStore(container),
        publisher=_no_publisher,
        token_secret=secrets.token_hex(16),
    )
    functions = {
        f.get_function_name(): f.get_user_function()
        for f in bootstrap(lambda: services).get_functions()
    }

    def direct_post() -> None:
        req = func.HttpRequest(
            "POST",
            "http://localhost/api/contacts",
            headers={"content-type": "application/json"},
            body=json.dumps(new_body()).encode(),
        )
        context = InvocationContext("create_contact")
        answer = loop.run_until_complete(functions["create_contact"](req, context))
        assert answer.status_code == 201

    def direct_get() -> None:
        req = func.HttpRequest(
            "GET",
            f"http://localhost/api/contacts/{created}",
            body=b"",
            route_params={"id": created},
        )
        answer = loop.run_until_complete(
            functions["get_contact"](req, InvocationContext("get_contact"))
        )
        assert answer.status_code == 200

    rows = {
        "SDK execute_item_batch (contact + event)": timed(sdk_batch, n),
        "POST /api/contacts via local host (HTTP)": timed(http_post, n),
        "create_contact called in-process": timed(direct_post, n),
        "GET /api/contacts/{id} via local host (HTTP)": timed(http_get, n),
        "get_contact called in-process": timed(direct_get, n),
    }
    keys = idempotency(client, n)
    client.close()
    loop.run_until_complete(cosmos.close())
    loop.close()
    os.environ.clear()
    os.environ.update(saved)
    post, batch = (
        rows["POST /api/contacts via local host (HTTP)"],
        rows["SDK execute_item_batch (contact + event)"],
    )
    return {
        "rows": rows,
        "idempotency": keys,
        "post_to_sdk_batch_ratio": post["median_ms"] / batch["median_ms"],
        "host_overhead_ms_post": post["median_ms"]
        - rows["create_contact called in-process"]["median_ms"],
        "host_overhead_ms_get": rows["GET /api/contacts/{id} via local host (HTTP)"]["median_ms"]
        - rows["get_contact called in-process"]["median_ms"],
    }


def _no_publisher() -> MessagePublisher:
    raise AssertionError("the API's benchmark relays nothing in this process")


async def _aio_client(connection: str) -> AsyncCosmosClient:
    """The SDK's aio client, as the app builds its own (the same options)."""
    return async_cosmos_client(connection_string=connection)
