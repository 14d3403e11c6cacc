"""funcstack's own tests: the stand-ins through the unmodified SDKs, the Functions host, the
command and the pytest plugin (its tests run pytest on test files of their own).

``shared_cosmos``, ``shared_servicebus``: one local Cosmos DB endpoint and one Service Bus
endpoint per test process; ``shared_azurite``: one Azurite for the run (under pytest-xdist, `make
test-funcstack`, started by the controller at its first connection and handed to every worker:
`funcstack.handoff`; else the test process's). For every test that uses them without stopping,
restarting, freezing or faulting them (each on databases, containers, queues and topics of its
own); a test that does any of those, or needs a setting of an endpoint's own, starts one of its
own. The Cosmos DB and Service Bus endpoints stay one per process: a worker's modules run one
after another on them, and two workers' would run at once on one. Tests there change or read
what is the endpoint's, not a database's or an entity's: a fault for the next requests, the
query page budget, the count of every container's documents (Cosmos DB); the test config's
topic, its subscriptions' sessions and its queue (Service Bus). Azurite's users (the blob and
queue triggers', the bindings', `test_stack.py`'s storage tests) each use containers and
queues of their own names, and their hosts receipts and locks of their own host ids."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings
from servicebus.conftest import Target, start_shared

from funcstack.cosmos import CosmosEndpoint, start_cosmos
from funcstack.handoff import azurite_from, hand_over, handed
from funcstack.services import Azurite, start_azurite

pytest_plugins = ["pytester"]


# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs (or a release check's trial) an example may wait for a core.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


#: The key of the endpoints the xdist controller hands its workers (`pytest_configure_node`).
HANDED = "funcstack_shared_endpoints"
_STARTED = pytest.StashKey[dict[str, Azurite]]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Under xdist, in the controller: the shared Azurite (`shared_azurite`), listening when the
    first worker starts and started at its first connection, handed to each worker
    (`funcstack.handoff`): one for the run, not one per worker. The controller stops it when
    the run ends (`pytest_unconfigure`)."""
    config: pytest.Config = node.config
    started = config.stash.get(_STARTED, None)
    if started is None:
        started = config.stash[_STARTED] = {}
        # the base folder of the workers' temporary folders (pytest's, set up by then)
        factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
        folder = factory.mktemp("shared-azurite")
        started["azurite"] = start_azurite(folder / "data", folder / "azurite.log", lazy=True)
    hand_over(node.workerinput, HANDED, started)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The endpoints the controller handed its workers, stopped (`pytest_configure_node`)."""
    for endpoint in config.stash.get(_STARTED, {}).values():
        endpoint.stop()


def _handed(config: pytest.Config, kind: str) -> dict[str, Any] | None:
    """The endpoint of `kind` the xdist controller handed this worker, if it did."""
    return handed(getattr(config, "workerinput", None), HANDED, kind)


@pytest.fixture(scope="session")
def shared_cosmos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CosmosEndpoint]:
    """The test process's Cosmos DB endpoint: never stopped before the session ends."""
    endpoint = start_cosmos(log_path=tmp_path_factory.mktemp("shared-cosmos") / "cosmos.log")
    try:
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture(scope="session")
def shared_servicebus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The test process's Service Bus endpoint (the test config's entities, a control channel
    to create more: ``servicebus.conftest.entities``): never stopped before the session ends."""
    shared = start_shared(tmp_path_factory.mktemp("shared-servicebus"))
    assert shared.endpoint is not None
    try:
        yield shared
    finally:
        shared.endpoint.stop()


@pytest.fixture(scope="session")
def shared_azurite(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Azurite]:
    """The run's Azurite (the controller's under xdist, else the test process's): never stopped
    before the session ends."""
    handed = _handed(request.config, "azurite")
    if handed is not None:
        yield azurite_from(handed)
        return
    folder = tmp_path_factory.mktemp("shared-azurite")
    azurite = start_azurite(folder / "data", folder / "azurite.log")
    try:
        yield azurite
    finally:
        azurite.stop()
