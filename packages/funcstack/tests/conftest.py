"""funcstack's own tests: the stand-ins through the unmodified SDKs, the Functions host, the
command and the pytest plugin (its tests run pytest on test files of their own).

``shared_cosmos``: one local Cosmos DB endpoint per test process, for every test that uses an
endpoint without stopping, restarting, freezing or faulting it (each on databases of its own,
with names of its own); a test that does any of those starts an endpoint of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from funcstack.cosmos import CosmosEndpoint, start_cosmos

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def shared_cosmos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CosmosEndpoint]:
    """The test process's Cosmos DB endpoint: never stopped before the session ends."""
    endpoint = start_cosmos(log_path=tmp_path_factory.mktemp("shared-cosmos") / "cosmos.log")
    try:
        yield endpoint
    finally:
        endpoint.stop()
