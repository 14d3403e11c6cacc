"""Every feed source held to the contract suite the package ships
(``cosmos_changefeed.testing.FeedSourceContract``): the in-memory feed, sync and aio, in-process;
the model the in-memory lease store keeps its documents in; the Cosmos DB adapter, sync and aio,
against funcstack's endpoint through azure-cosmos (marked
integration: what only a server proves -- the SDK's requests, its routing map, a live split)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import ContainerProxy, DatabaseProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from cosmos_changefeed import CosmosFeedSource
from cosmos_changefeed._store import lease_container
from cosmos_changefeed.aio import CosmosFeedSource as AsyncCosmosFeedSource
from cosmos_changefeed.testing import (
    AsyncInMemoryFeedSource,
    FeedHarness,
    FeedSourceContract,
    InMemoryFeed,
    InMemoryFeedSource,
)

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

MakeContainer = Callable[..., ContainerProxy]


def _run(awaitable: Awaitable[Any]) -> Any:
    async def wait() -> Any:
        return await awaitable

    return asyncio.run(wait())


class MemoryHarness(FeedHarness):
    """An in-memory feed, through the sync or the aio source."""

    def __init__(self, partitions: int, *, aio: bool) -> None:
        self.feed = InMemoryFeed(partitions)
        if aio:
            self.source = AsyncInMemoryFeedSource(self.feed)
            self.run = _run
        else:
            self.source = InMemoryFeedSource(self.feed)

    def upsert(self, document: dict[str, Any]) -> None:
        self.feed.upsert(document)

    def delete(self, item_id: str, partition_key: Any) -> None:
        self.feed.delete(item_id, partition_key)

    def split(self, range_id: str) -> tuple[str, ...]:
        return self.feed.split(range_id)

    def merge(self, first_id: str, second_id: str) -> str:
        return self.feed.merge(first_id, second_id)


class TestInMemoryFeed(FeedSourceContract):
    @pytest.fixture
    def make_feed(self) -> Callable[[int], FeedHarness]:
        return lambda partitions: MemoryHarness(partitions, aio=False)


class TestAsyncInMemoryFeed(FeedSourceContract):
    @pytest.fixture
    def make_feed(self) -> Callable[[int], FeedHarness]:
        return lambda partitions: MemoryHarness(partitions, aio=True)


class LeaseContainerHarness(MemoryHarness):
    """The model of a lease container ``InMemoryDocuments`` keeps its documents in
    (``_store.lease_container``), partitioned on ``/id``: the same container model as the
    monitored feed's, its latest versions only."""

    partition_key_path = "/id"

    def __init__(self, partitions: int) -> None:
        self.feed = lease_container("/id", partitions)
        self.source = InMemoryFeedSource(self.feed)

    def delete(self, item_id: str, partition_key: Any) -> None:
        self.feed.delete(item_id, item_id)  # on /id, a document's id is its partition key


class TestTheLeaseContainersModel(FeedSourceContract):
    supports_all_versions_and_deletes = False

    @pytest.fixture
    def make_feed(self) -> Callable[[int], FeedHarness]:
        return LeaseContainerHarness


class CosmosHarness(FeedHarness):
    """A container on funcstack's endpoint, through the sync or the aio adapter."""

    def __init__(
        self,
        cosmos: CosmosEndpoint,
        container: ContainerProxy,
        aio: tuple[asyncio.AbstractEventLoop, AsyncCosmosClient] | None,
    ) -> None:
        self.cosmos, self.container = cosmos, container
        self.database = container.container_link.split("/")[1]
        if aio is None:
            self.source = CosmosFeedSource(container)
            return
        loop, client = aio
        database = client.get_database_client(self.database)
        self.source = AsyncCosmosFeedSource(database.get_container_client(container.id))
        self.run = loop.run_until_complete

    def upsert(self, document: dict[str, Any]) -> None:
        self.container.upsert_item(document)

    def delete(self, item_id: str, partition_key: Any) -> None:
        self.container.delete_item(item_id, partition_key=partition_key)

    def split(self, range_id: str) -> tuple[str, ...]:
        return tuple(self.cosmos.split(self.database, self.container.id, range_id))

    def merge(self, first_id: str, second_id: str) -> str:
        return self.cosmos.merge(self.database, self.container.id, [first_id, second_id])


@pytest.mark.integration
class TestCosmosFeedSource(FeedSourceContract):
    # funcstack's endpoint keeps an LSN per physical partition, merges partitions and serves
    # the all-versions-and-deletes feed, as Azure does: the whole contract holds

    @pytest.fixture
    def make_feed(
        self, cosmos: CosmosEndpoint, make_container: MakeContainer
    ) -> Callable[[int], FeedHarness]:
        return lambda partitions: CosmosHarness(cosmos, make_container(partitions), None)


@pytest.mark.integration
class TestAsyncCosmosFeedSource(TestCosmosFeedSource):
    @pytest.fixture
    def make_feed(
        self, cosmos: CosmosEndpoint, make_container: MakeContainer, database: DatabaseProxy
    ) -> Iterator[Callable[[int], FeedHarness]]:
        loop = asyncio.new_event_loop()
        client = AsyncCosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())
        try:
            yield lambda partitions: CosmosHarness(
                cosmos, make_container(partitions), (loop, client)
            )
        finally:
            loop.run_until_complete(client.close())
            loop.close()
