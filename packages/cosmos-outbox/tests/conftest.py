"""The package's tests run on the in-memory services of its test kit (`cosmos_outbox_testing`),
with a small app of their own (tickets.py) built on the public API. The integration modules
(marked `integration`: the adapters through the SDKs) share one local Azure stack for the
session, `funcstack_services`, with the resources of fixtures/funcstack.json; azure_stack.py
holds what they share besides.

`funcstack_services` is funcstack's pytest plugin's where funcstack is installed (Python 3.13+).
On Python 3.11 and 3.12, where it cannot be, it is the services of a `funcstack up --json` run
from a 3.13 environment named by `FUNCSTACK` (funcstack_external.py, funcstack's own
`funcstack.external` copied, as its docs/other-pythons.md tells an app on those versions to):
the adapter suites run there through the SDKs of this interpreter; the modules that host an app
or stop a service in-process need funcstack here and are skipped. Neither: the integration
modules are skipped, saying what to install."""

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
from azure_stack import DATABASE, TARGET_RULES_TOPICS, ExternalStack, verified
from funcstack_external import FUNCSTACK_VARIABLE, external_services
from hypothesis import settings
from tickets import Ticket, ticket_routes

from cosmos_outbox import Outbox
from cosmos_outbox._mapper import read_feed
from cosmos_outbox._relay.forwarding import RelayReport
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox_testing import FunctionClient, InMemory, in_memory
from cosmos_outbox_testing.contracts import EventLoop

if TYPE_CHECKING:
    from azure.cosmos import DatabaseProxy

    from funcstack import LocalStack

if importlib.util.find_spec("funcstack") is not None:
    from funcstack.cosmos import local_tls

    # funcstack's local authority trusted as its hosts trust it (SSL_CERT_FILE,
    # REQUESTS_CA_BUNDLE; funcstack's docs/cosmos.md, Certificate): the app's code composed in
    # a test (its settings, its own clients) verifies the local Cosmos DB endpoint unchanged.
    # (aiohttp read the trust store when imported above: its clients here are given it,
    # azure_stack.verified; a repository-wide run sets it first, tests/conftest.py.)
    os.environ.update(local_tls().environment())


# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs (or a release check's trial) an example may wait for a core.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The `chaos` runs (minutes each: `make chaos`) are deselected unless the `-m` expression
    names them (`-m chaos`): `make test` and a bare `pytest` leave them out."""
    if "chaos" in (config.option.markexpr or ""):
        return
    chaos = [item for item in items if item.get_closest_marker("chaos") is not None]
    if chaos:
        config.hook.pytest_deselected(items=chaos)
        items[:] = [item for item in items if item.get_closest_marker("chaos") is None]


class TicketWorld:
    """The tickets app on in-memory services (`options`: `in_memory`'s)."""

    def __init__(self, *, etag_request_header: bool = False, **options: Any) -> None:
        self.memory: InMemory = in_memory(**options)
        self.outbox = Outbox([Ticket], services=lambda: self.memory.services)
        self.app = self.outbox.function_app(
            ticket_routes(self.outbox, etag_request_header=etag_request_header),
            title="Tickets",
            operators=False,  # the operators' routes are cosmos-outbox-operators' (its tests)
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


def problem(response: func.HttpResponse, status: int) -> dict[str, Any]:
    """A response's problem+json document, checked to be one with `status`."""
    assert response.status_code == status, response.get_body()
    assert response.mimetype == "application/problem+json"
    document: dict[str, Any] = body(response)
    assert document["status"] == status
    return document


# -- the local Azure stack (funcstack's pytest plugin) -------------------------------------------


@pytest.fixture(scope="session")
def funcstack_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The resources `funcstack_services` provisions (one stack for the session: every
    integration module shares it): fixtures/funcstack.json's, and on its Service Bus namespace
    the target-rules module's topics (azure_stack.py, `TARGET_RULES_TOPICS`: a topic per test
    whose rules it reads and changes, beside the session's topic, not a namespace of its own)."""
    declared = json.loads((Path(__file__).parent / "fixtures" / "funcstack.json").read_text())
    [namespace] = declared["UserConfig"]["Namespaces"]
    namespace["Topics"] += TARGET_RULES_TOPICS
    path = tmp_path_factory.mktemp("funcstack-config") / "funcstack.json"
    path.write_text(json.dumps(declared))
    return path


if importlib.util.find_spec("funcstack") is None:

    @pytest.fixture(scope="session")
    def funcstack_services(funcstack_config: Path) -> Iterator[ExternalStack]:
        """The services of a funcstack run by a Python 3.13 environment (`FUNCSTACK`)."""
        if not os.environ.get(FUNCSTACK_VARIABLE, "").strip():
            pytest.skip(
                "the local Azure stack: pip install funcstack (Python 3.13+), or set "
                f"{FUNCSTACK_VARIABLE} to the funcstack command of a 3.13 environment"
            )
        with external_services(config=funcstack_config) as services:
            yield ExternalStack(services)


@pytest.fixture(scope="session")
def admin_database(funcstack_services: LocalStack) -> Iterator[DatabaseProxy]:
    """The stack's database through one SDK client for the session: it creates and deletes the
    tests' own containers (a client made per test opened a TLS pool and read the account each
    time)."""
    from azure.cosmos import CosmosClient

    client = CosmosClient.from_connection_string(
        funcstack_services.cosmos_connection_string, **verified(funcstack_services)
    )
    try:
        yield client.get_database_client(DATABASE)
    finally:
        client.close()


@pytest.fixture
def fresh(admin_database: DatabaseProxy) -> Iterator[str]:
    """A container of its own for one test (as the outbox's: /partitionKey, per-item TTL on),
    deleted after it: the suites count what a store holds."""
    with _container(admin_database, "/partitionKey") as name:
        yield name


@pytest.fixture
def leases(admin_database: DatabaseProxy) -> Iterator[str]:
    """A lease container of its own for one test (/id, as the trigger's), deleted after it."""
    from azure.cosmos import PartitionKey

    name = f"leases-{uuid.uuid4().hex[:12]}"
    admin_database.create_container(id=name, partition_key=PartitionKey(path="/id"))
    try:
        yield name
    finally:
        admin_database.delete_container(name)


#: An app's own container's partition key path: another than the outbox's, nested.
APPS_OWN_KEY_PATH = "/tenant/id"


@pytest.fixture
def fresh_on_apps_own_key(admin_database: DatabaseProxy) -> Iterator[str]:
    """`fresh`, partitioned by an app's own path (`APPS_OWN_KEY_PATH`), not `/partitionKey`."""
    with _container(admin_database, APPS_OWN_KEY_PATH) as name:
        yield name


@contextlib.contextmanager
def _container(database: DatabaseProxy, path: str) -> Iterator[str]:
    from azure.cosmos import PartitionKey

    name = f"outbox-{uuid.uuid4().hex[:12]}"
    database.create_container(id=name, partition_key=PartitionKey(path=path), default_ttl=-1)
    try:
        yield name
    finally:
        database.delete_container(name)


@pytest.fixture(scope="module")
def loop() -> Iterator[EventLoop]:
    """An event loop on a thread of its own, for the `aio` adapters of one module."""
    running = EventLoop()
    try:
        yield running
    finally:
        running.close()
