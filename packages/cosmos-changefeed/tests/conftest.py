"""A local Cosmos DB endpoint for the tests that need one (funcstack's, started once per test
process on a free port, stopped at the end), and containers made for each test: the tests run
against the unmodified azure-cosmos SDK, as the package does in production. funcstack (Python
3.13) is imported by the fixture that starts the endpoint, so that the in-process tests run
without it (from the sdist, on 3.11 and 3.12: the release check); where it is not installed, the
modules that import it (each marked integration) are not collected, and the header says so."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

#: Without funcstack, the test modules that import it (its endpoint's, marked integration).
WITHOUT_FUNCSTACK = (
    sorted(
        p.name
        for p in Path(__file__).parent.glob("test_*.py")
        if "from funcstack" in p.read_text("utf-8")
    )
    if importlib.util.find_spec("funcstack") is None
    else []
)
collect_ignore = WITHOUT_FUNCSTACK


def pytest_report_header() -> str | None:
    if not WITHOUT_FUNCSTACK:
        return None
    return (
        "funcstack is not installed (pip install funcstack, Python 3.13): not collected, the "
        f"modules that start its Cosmos DB endpoint: {', '.join(WITHOUT_FUNCSTACK)}"
    )


@pytest.fixture(scope="session")
def cosmos() -> Iterator[CosmosEndpoint]:
    from funcstack.cosmos import start_cosmos

    with start_cosmos() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def client(cosmos: CosmosEndpoint) -> CosmosClient:
    return CosmosClient(cosmos.endpoint, cosmos.key, connection_verify=False)


@pytest.fixture(scope="session")
def database(client: CosmosClient) -> DatabaseProxy:
    return client.create_database_if_not_exists("changefeed")


#: ``make_container(partitions=1, *, path="/pk", ttl=False)``: a new container.
MakeContainer = Callable[..., ContainerProxy]


@pytest.fixture(scope="session")
def make_container(database: DatabaseProxy) -> MakeContainer:
    def make(partitions: int = 1, *, path: str = "/pk", ttl: bool = False) -> ContainerProxy:
        return new_container(database, partitions, path=path, ttl=ttl)

    return make


def new_container(
    database: DatabaseProxy, partitions: int = 1, *, path: str = "/pk", ttl: bool = False
) -> ContainerProxy:
    """A new container of ``partitions`` physical partitions (funcstack's local-only header)."""
    name = f"c{uuid.uuid4().hex[:10]}"
    return database.create_container(
        name,
        partition_key=PartitionKey(path=path),
        default_ttl=-1 if ttl else None,
        headers={"x-funcstack-physical-partitions": str(partitions)},
    )
