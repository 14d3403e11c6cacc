"""The listings of the lease container a start sends before its first lease is taken, sync
and aio: a start that initialises the store (it found no lease and created them all) goes on
from the leases it created, which a listing right after would answer -- the first balancing
round does not list them again; a start on a store already initialised lists them in that
round, as before."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from running import FAST, wait

from cosmos_changefeed import ChangeFeedProcessor, InMemoryDocuments, InMemoryLeaseStore
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor
from cosmos_changefeed.aio import InMemoryLeaseStore as AsyncInMemoryLeaseStore
from cosmos_changefeed.testing import AsyncInMemoryFeedSource, InMemoryFeed, InMemoryFeedSource

PARTITIONS = 3


class Counting(InMemoryLeaseStore):
    """Counts the listings."""

    listed = 0

    def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        self.listed += 1
        return super().list_documents(prefix)


class AsyncCounting(AsyncInMemoryLeaseStore):
    """Counts the listings (aio)."""

    listed = 0

    async def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        self.listed += 1
        return await super().list_documents(prefix)


def listed_before_acquiring(feed: InMemoryFeed, documents: InMemoryDocuments) -> int:
    """The listings one sync processor's start sent before it took its first lease; it takes
    them all."""
    store = Counting(documents=documents)
    at_first: list[int] = []
    processor = ChangeFeedProcessor(
        InMemoryFeedSource(feed),
        store,
        processor_name="p",
        instance_name="one",
        handler=lambda _context, _changes: None,
        on_lease_acquired=lambda _token: at_first.append(store.listed),
        **FAST,
    )
    with processor:
        wait(lambda: len(processor.owned_leases) == PARTITIONS)
    return at_first[0]


async def listed_before_acquiring_aio(feed: InMemoryFeed, documents: InMemoryDocuments) -> int:
    """``listed_before_acquiring`` with the aio processor."""
    store = AsyncCounting(documents=documents)
    at_first: list[int] = []

    async def nothing(_context: Any, _changes: list[dict[str, Any]]) -> None:
        pass

    processor = AsyncChangeFeedProcessor(
        AsyncInMemoryFeedSource(feed),
        store,
        processor_name="p",
        instance_name="one",
        handler=nothing,
        on_lease_acquired=lambda _token: at_first.append(store.listed),
        **FAST,
    )
    async with processor:
        for _ in range(1000):
            if len(processor.owned_leases) == PARTITIONS:
                break
            await asyncio.sleep(0.005)
    assert len(processor.owned_leases) == 0  # released at the stop
    return at_first[0]


def test_a_start_that_creates_the_leases_takes_them_without_listing_them_again() -> None:
    feed, documents = InMemoryFeed(PARTITIONS), InMemoryDocuments()
    # the start's check of the leases' mode, the listing under the initialisation lock
    assert listed_before_acquiring(feed, documents) == 2
    # initialised: the start's check, then the first round's listing
    assert listed_before_acquiring(feed, documents) == 2


@pytest.mark.asyncio
async def test_aio_a_start_that_creates_the_leases_takes_them_without_listing_them_again() -> None:
    feed, documents = InMemoryFeed(PARTITIONS), InMemoryDocuments()
    assert await listed_before_acquiring_aio(feed, documents) == 2
    assert await listed_before_acquiring_aio(feed, documents) == 2
