"""A local Cosmos DB endpoint for the tests that need one (marked integration: funcstack's,
started once per test process on a free port, the first time a test asks for it, stopped at the
end), and containers made for each test: those tests run against the unmodified azure-cosmos
SDK, as the package does in production. funcstack is imported only then: the other tests run
where only ``cosmos-changefeed[aio,testing]`` is installed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint


@pytest.fixture(scope="session")
def cosmos() -> Iterator[CosmosEndpoint]:
    from funcstack.cosmos import start_cosmos

    with start_cosmos() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def client(cosmos: CosmosEndpoint) -> CosmosClient:
    return CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())


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
