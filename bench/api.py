"""POST /api/contacts through the local Functions host vs the bare SDK batch of the same two
documents, and the host's own overhead per HTTP call (HTTP through the host minus the same
function called in-process), measured in one run against one local stack."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import azure.functions as func
from azure.cosmos import CosmosClient

from bench.stats import timed
from cosmos_outbox.documents import aggregate_document, event_documents
from cosmos_outbox.testing import InvocationContext
from domain.contact import Contact
from domain.values import Company, Name
from tools.httpclient import Client
from tools.stack import Stack

BODY = {"firstName": "Ada", "lastName": "Lovelace", "email": "ada@example.com",
        "companyName": "Engines"}


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


def run(stack: Stack, n: int = 500) -> dict[str, Any]:
    values = stack.settings()
    assert stack.cosmos is not None
    cosmos = CosmosClient.from_connection_string(stack.cosmos.connection_string,
                                                 connection_verify=stack.cosmos.verify_tls)
    container = cosmos.get_database_client(values["COSMOS_DATABASE"]).get_container_client(
        values["COSMOS_CONTAINER"])

    def sdk_batch() -> None:
        contact = Contact.create(name=Name(first_name="Ada", last_name="Lovelace"),
                                 email="ada@example.com", company=Company(company_name="E"))
        [event] = event_documents(contact, ttl_seconds=864000)
        container.execute_item_batch(
            batch_operations=[("create", (aggregate_document(contact),)),
                              ("create", (event,))],
            partition_key=contact.id)

    client = Client(stack.api_url)

    def http_post() -> None:
        reply = client.request("POST", "/contacts", json_body=BODY)
        assert reply.status == 201

    created = client.request("POST", "/contacts", json_body=BODY).json()["id"]

    def http_get() -> None:
        assert client.request("GET", f"/contacts/{created}").status == 200

    # The same functions in this process, with the same settings: no HTTP, no host.
    saved = dict(os.environ)
    os.environ.update(values)
    from entrypoints.bootstrap import bootstrap

    functions = {f.get_function_name(): f.get_user_function()
                 for f in bootstrap().get_functions()}
    body = json.dumps(BODY).encode()

    def direct_post() -> None:
        req = func.HttpRequest("POST", "http://localhost/api/contacts",
                               headers={"content-type": "application/json"}, body=body)
        context = InvocationContext("create_contact")
        assert functions["create_contact"](req, context).status_code == 201

    def direct_get() -> None:
        req = func.HttpRequest("GET", f"http://localhost/api/contacts/{created}", body=b"",
                               route_params={"id": created})
        assert functions["get_contact"](req, InvocationContext("get_contact")).status_code == 200

    rows = {
        "SDK execute_item_batch (contact + event)": timed(sdk_batch, n),
        "POST /api/contacts via local host (HTTP)": timed(http_post, n),
        "create_contact called in-process": timed(direct_post, n),
        "GET /api/contacts/{id} via local host (HTTP)": timed(http_get, n),
        "get_contact called in-process": timed(direct_get, n),
    }
    client.close()
    os.environ.clear()
    os.environ.update(saved)
    post, batch = rows["POST /api/contacts via local host (HTTP)"], rows[
        "SDK execute_item_batch (contact + event)"]
    return {
        "rows": rows,
        "post_to_sdk_batch_ratio": post["median_ms"] / batch["median_ms"],
        "host_overhead_ms_post": post["median_ms"]
        - rows["create_contact called in-process"]["median_ms"],
        "host_overhead_ms_get": rows["GET /api/contacts/{id} via local host (HTTP)"]["median_ms"]
        - rows["get_contact called in-process"]["median_ms"],
    }
