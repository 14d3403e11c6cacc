"""cosmos-outbox-operators' tests run the operators' routes, console and command line on the
core's test kit (`cosmos_outbox_testing`'s in-memory services), with a small app of their own
(tickets.py, the core's tests' own, on the public API); the bounded routes' tests host them on
funcstack's Functions host against the local Azure stack (`funcstack_services`, funcstack's
pytest plugin, Python 3.13+: the resources of fixtures/funcstack.json)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import azure.functions as func
import pytest
from hypothesis import settings
from recovery_world import ROUTES_BOUND
from tickets import Ticket, ticket_routes

from cosmos_outbox import Outbox
from cosmos_outbox.documents import read_feed
from cosmos_outbox.relay import RelayReport
from cosmos_outbox_operators import Operators
from cosmos_outbox_testing import FunctionClient, InMemory, in_memory, run_sync

if importlib.util.find_spec("funcstack") is not None:  # the sdist's tests run without it too
    from funcstack.cosmos import local_tls

    # funcstack's local authority trusted as its hosts trust it (funcstack's docs/cosmos.md,
    # Certificate): the command line run in a subprocess on a stack's stores verifies its
    # Cosmos DB endpoint unchanged, as the app's code does.
    os.environ.update(local_tls().environment())

if TYPE_CHECKING:
    from azure.cosmos import DatabaseProxy

    from funcstack import LocalStack

#: The database of fixtures/funcstack.json.
DATABASE = "outbox-tests"


# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs (or a release check's trial) an example may wait for a core.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


class TicketWorld:
    """The tickets app, with the operators' routes, on in-memory services (`options`:
    `in_memory`'s)."""

    def __init__(
        self,
        *,
        etag_request_header: bool = False,
        bound_seconds: float = ROUTES_BOUND,
        **options: Any,
    ) -> None:
        self.memory: InMemory = in_memory(**options)
        self.outbox = Outbox(
            [Ticket], services=lambda: self.memory.services, bound_seconds=bound_seconds
        )
        self.app = self.outbox.function_app(
            ticket_routes(self.outbox, etag_request_header=etag_request_header),
            Operators(),
            title="Tickets",
        )
        self.client = FunctionClient(self.app)

    def relay(self, documents: list[dict[str, Any]]) -> RelayReport:
        """The stored documents relayed as the trigger relays them; the report."""
        return run_sync(self.outbox.wiring().relay().relay(read_feed(documents)))


@pytest.fixture
def world() -> TicketWorld:
    return TicketWorld()


def body(response: func.HttpResponse) -> Any:
    """A response's JSON body."""
    return json.loads(response.get_body())


def worked(
    outbox: Outbox, client: FunctionClient, started: func.HttpResponse, *, ticks: int = 20
) -> dict[str, Any]:
    """The bulk operation a route started (answered 202), worked by the relay's worker (its
    ticks, as the relay's hosts run them) until it stops: done, paused or cancelled; its
    answer then."""
    assert started.status_code == 202, started.get_body()
    operation: dict[str, Any] = body(started)
    for _ in range(ticks):
        run_sync(outbox.wiring().operations().bulk.work(budget_seconds=60))
        operation = body(client.request("GET", f"outbox/operations/{operation['id']}"))
        if operation["state"] in ("done", "paused", "cancelled") and not operation["inFlight"]:
            return operation
    raise AssertionError(f"the operation did not stop within {ticks} ticks: {operation}")


def problem(response: func.HttpResponse, status: int) -> dict[str, Any]:
    """A response's problem+json document, checked to be one with `status`."""
    assert response.status_code == status, response.get_body()
    assert response.mimetype == "application/problem+json"
    document: dict[str, Any] = body(response)
    assert document["status"] == status
    return document


# -- the local Azure stack (funcstack's pytest plugin) -------------------------------------------


@pytest.fixture(scope="session")
def funcstack_config() -> Path:
    """The resources `funcstack_services` provisions (one stack for the session)."""
    return Path(__file__).parent / "fixtures" / "funcstack.json"


@pytest.fixture(scope="session")
def admin_database(funcstack_services: LocalStack) -> Iterator[DatabaseProxy]:
    """The stack's database through one SDK client for the session."""
    from azure.cosmos import CosmosClient

    assert funcstack_services.cosmos is not None
    client = CosmosClient.from_connection_string(  # verifying the endpoint's certificate
        funcstack_services.cosmos_connection_string, **funcstack_services.cosmos.client_options()
    )
    try:
        yield client.get_database_client(DATABASE)
    finally:
        client.close()


@pytest.fixture
def fresh(admin_database: DatabaseProxy) -> Iterator[str]:
    """A container of its own for one test (as the outbox's: /partitionKey, per-item TTL on),
    deleted after it."""
    from azure.cosmos import PartitionKey

    name = f"outbox-{uuid.uuid4().hex[:12]}"
    admin_database.create_container(
        id=name, partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1
    )
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):
            admin_database.delete_container(name)


def console_fragment(client: FunctionClient, route: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The console's HTML fragment of `route` (`status`, ...) as a signed-in operator's page gets
    it (App Service Authentication on: the platform sets WEBSITE_AUTH_ENABLED, the deployment
    OUTBOX_CONSOLE_SIGN_IN)."""
    import base64

    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    monkeypatch.setenv("OUTBOX_CONSOLE_SIGN_IN", "app-service-authentication")
    claims = [
        {"typ": "name", "val": "ada"},
        {"typ": "roles", "val": "Outbox.Operator"},
        {"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": "oid"},
    ]
    principal = base64.b64encode(json.dumps({"auth_typ": "aad", "claims": claims}).encode())
    reply = client.request(
        "GET",
        f"outbox/console/{route}",
        headers={"x-ms-client-principal": principal.decode(), "hx-request": "true"},
    )
    assert reply.status_code == 200 and reply.mimetype == "text/html", reply.get_body()
    return reply.get_body().decode()
