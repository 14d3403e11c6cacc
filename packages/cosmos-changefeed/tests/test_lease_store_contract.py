"""Both lease stores, sync and aio, held to the contract suite the package ships
(``cosmos_changefeed.testing``): the in-memory one in-process, and the Cosmos DB one on a
container partitioned on /id and on one on /partitionKey (funcstack's endpoint, through
azure-cosmos: marked integration)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio
from azure.cosmos import ContainerProxy, DatabaseProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from cosmos_changefeed import CosmosLeaseStore, InMemoryLeaseStore, LeaseStore
from cosmos_changefeed.aio import CosmosLeaseStore as AsyncCosmosLeaseStore
from cosmos_changefeed.aio import InMemoryLeaseStore as AsyncInMemoryLeaseStore
from cosmos_changefeed.aio import LeaseStore as AsyncLeaseStore
from cosmos_changefeed.testing import AsyncLeaseStoreContract, LeaseStoreContract

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

MakeContainer = Callable[..., ContainerProxy]


class TestInMemoryLeaseStore(LeaseStoreContract):
    @pytest.fixture
    def store(self) -> LeaseStore:
        return InMemoryLeaseStore("/id")


@pytest.mark.integration
class TestCosmosLeaseStore(LeaseStoreContract):
    @pytest.fixture(params=["/id", "/partitionKey"])
    def store(self, request: pytest.FixtureRequest, make_container: MakeContainer) -> LeaseStore:
        return CosmosLeaseStore(make_container(2, path=request.param, ttl=True))


@pytest.mark.integration
def test_a_lease_container_on_another_path_is_refused_as_dotnet_refuses_it(
    make_container: MakeContainer,
) -> None:
    store = CosmosLeaseStore(make_container(path="/pk"))
    with pytest.raises(ValueError, match="must have partition key equal to /id or /partitionKey"):
        store.partition_key_path()


class TestAsyncInMemoryLeaseStore(AsyncLeaseStoreContract):
    @pytest.fixture
    def store(self) -> AsyncLeaseStore:
        return AsyncInMemoryLeaseStore("/partitionKey")


@pytest.mark.integration
class TestAsyncCosmosLeaseStore(AsyncLeaseStoreContract):
    @pytest_asyncio.fixture
    async def store(  # type: ignore[override]
        self, cosmos: CosmosEndpoint, database: DatabaseProxy, make_container: MakeContainer
    ) -> AsyncIterator[AsyncLeaseStore]:
        leases = make_container(path="/id")
        async with AsyncCosmosClient(
            cosmos.endpoint, cosmos.key, **cosmos.client_options()
        ) as client:
            container = client.get_database_client(database.id).get_container_client(leases.id)
            yield AsyncCosmosLeaseStore(container)
