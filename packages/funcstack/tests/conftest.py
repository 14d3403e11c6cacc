"""funcstack's own tests: the stand-ins through the unmodified SDKs, the Functions host, the
command and the pytest plugin (its tests run pytest on test files of their own).

``shared_cosmos``, ``shared_servicebus``, ``shared_azurite``: one local Cosmos DB endpoint, one
Service Bus endpoint (the test config's entities, a control channel) and one Azurite for the
run (under pytest-xdist, `make test-funcstack`, started by the controller, Cosmos DB and Azurite
at their first connection, and handed to every worker: `funcstack.handoff`; else the test
process's). For every test that uses them without stopping, restarting, freezing or faulting
them as a whole, each on databases, containers, queues and topics of its own; a test that does
any of those, or needs a setting of an endpoint's own, starts one of its own. Two workers'
modules run at once on them, so what a test changes or reads is its own database's, container's
or entity's, never the endpoint's: a fault it injects names its container
(``inject_fault(database=, container=)``), the query page budget it sets its database
(``_emulators/queries`` with ``database``), the documents it counts its database
(``stats(database=)``); the Service Bus modules' entities have names of their own (a suffix of
the module's or the test's), and the test config's fixed ones are used by one module each (the
queues and the dead-letter queue by test_servicebus.py, through `own` where a test needs them
empty) or by session ids of a test's own (the topic's ``every-message``). Azurite's users (the
blob and queue triggers', the bindings', `test_stack.py`'s storage tests) each use containers
and queues of their own names, and their hosts receipts and locks of their own host ids."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from servicebus.conftest import Target, start_shared

from funcstack.cosmos import CosmosEndpoint, start_cosmos
from funcstack.deadlines import SCALE
from funcstack.handoff import azurite_from, cosmos_from, hand_over, handed, servicebus_from
from funcstack.services import Azurite, start_azurite

pytest_plugins = ["pytester"]


# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs (or a release check's trial) an example may wait for a core.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """pytest-timeout's bound on a test (the ini's ``timeout``) grows with the deadlines the
    test waits under (``TEST_DEADLINE_SCALE``): on a machine slow enough to need a scale, a
    LONG wait is not cut short by it. A bound given on the command line or in PYTEST_TIMEOUT
    is the caller's, left as it is."""
    if SCALE == 1.0 or config.getoption("timeout", None) is not None:
        return
    if os.environ.get("PYTEST_TIMEOUT"):
        return
    try:
        ini = config.getini("timeout")
    except ValueError:  # pytest-timeout not installed
        return
    if ini:
        config.option.timeout = float(ini) * SCALE


#: The key of the endpoints the xdist controller hands its workers (`pytest_configure_node`).
HANDED = "funcstack_shared_endpoints"
#: The key of the shared Service Bus endpoint's log, handed with it (the aio module reads it).
HANDED_SERVICEBUS_LOG = "funcstack_shared_servicebus_log"
_STARTED = pytest.StashKey[dict[str, Any]]()
_SERVICEBUS_LOG = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Under xdist, in the controller: the shared Cosmos DB endpoint and Azurite (listening when
    the first worker starts and started at their first connection) and the shared Service Bus
    endpoint (started now: its control channel needs its process), handed to each worker
    (`funcstack.handoff`): one of each for the run, not one per worker. The controller stops
    them when the run ends (`pytest_unconfigure`)."""
    config: pytest.Config = node.config
    started = config.stash.get(_STARTED, None)
    if started is None:
        started = config.stash[_STARTED] = {}
        # the base folder of the workers' temporary folders (pytest's, set up by then)
        factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
        folder = factory.mktemp("shared-endpoints")
        started["cosmos"] = start_cosmos(log_path=folder / "cosmos.log", lazy=True)
        started["azurite"] = start_azurite(folder / "data", folder / "azurite.log", lazy=True)
        servicebus = start_shared(folder)  # its log: servicebus.log
        assert servicebus.endpoint is not None and servicebus.log_path is not None
        started["servicebus"] = servicebus.endpoint
        config.stash[_SERVICEBUS_LOG] = servicebus.log_path
    hand_over(node.workerinput, HANDED, started)
    node.workerinput[HANDED_SERVICEBUS_LOG] = str(config.stash[_SERVICEBUS_LOG])


def pytest_unconfigure(config: pytest.Config) -> None:
    """The endpoints the controller handed its workers, stopped (`pytest_configure_node`)."""
    for endpoint in config.stash.get(_STARTED, {}).values():
        endpoint.stop()


def _handed(config: pytest.Config, kind: str) -> dict[str, Any] | None:
    """The endpoint of `kind` the xdist controller handed this worker, if it did."""
    return handed(getattr(config, "workerinput", None), HANDED, kind)


@pytest.fixture(scope="session")
def shared_cosmos(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CosmosEndpoint]:
    """The run's Cosmos DB endpoint (the controller's under xdist, else the test process's):
    never stopped before the session ends."""
    handed = _handed(request.config, "cosmos")
    if handed is not None:
        yield cosmos_from(handed)
        return
    endpoint = start_cosmos(log_path=tmp_path_factory.mktemp("shared-cosmos") / "cosmos.log")
    try:
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture(scope="session")
def shared_servicebus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    """The run's Service Bus endpoint (the test config's entities, a control channel to create
    more: ``servicebus.conftest.entities``; the controller's under xdist, else the test
    process's): never stopped before the session ends."""
    handed = _handed(request.config, "servicebus")
    if handed is not None:
        endpoint = servicebus_from(handed)
        log = Path(request.config.workerinput[HANDED_SERVICEBUS_LOG])  # type: ignore[attr-defined]
        yield Target(endpoint.connection_string, endpoint, log)
        return
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
