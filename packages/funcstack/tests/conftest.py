"""funcstack's own tests: the stand-ins through the unmodified SDKs, the Functions host, the
command and the pytest plugin (its tests run pytest on test files of their own).

``shared_cosmos``, ``shared_servicebus``, ``shared_azurite``: one local Cosmos DB endpoint, one
Service Bus endpoint and one Azurite per test process, for every test that uses them without
stopping, restarting, freezing or faulting them (each on databases, containers, queues and
topics of its own); a test that does any of those, or needs a setting of an endpoint's own,
starts one of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings
from servicebus.conftest import Target, start_shared

from funcstack.cosmos import CosmosEndpoint, start_cosmos
from funcstack.services import Azurite, start_azurite

pytest_plugins = ["pytester"]


# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs (or a release check's trial) an example may wait for a core.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


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
def shared_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """The test process's Azurite: never stopped before the session ends."""
    folder = tmp_path_factory.mktemp("shared-azurite")
    azurite = start_azurite(folder / "data", folder / "azurite.log")
    try:
        yield azurite
    finally:
        azurite.stop()
