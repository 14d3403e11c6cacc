"""The in-memory feed as an aio feed source: a thin shell over the same ``InMemoryFeed`` as the
sync ``InMemoryFeedSource`` (``cosmos_changefeed._memory_feed``, which says what it keeps)."""

from __future__ import annotations

from cosmos_changefeed._continuation import LATEST_VERSION
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._memory_feed import InMemoryFeed
from cosmos_changefeed._ranges import PartitionKeyRange
from cosmos_changefeed._reading import Page, Start
from cosmos_changefeed.aio._feed_async import FeedSource


class InMemoryFeedSource(FeedSource):
    """``feed`` as an aio feed source. See ``cosmos_changefeed.testing.InMemoryFeedSource``."""

    def __init__(self, feed: InMemoryFeed | None = None) -> None:
        self.feed = feed or InMemoryFeed()
        self._seen: list[PartitionKeyRange] | None = None

    @property
    def account_endpoint(self) -> str:
        return self.feed.account_endpoint

    async def container_rid(self) -> str:
        return self.feed.container_rid

    def partition_key_paths(self) -> list[str]:
        return [self.feed.partition_key_path]

    async def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        if self._seen is None or force_refresh:
            self._seen = self.feed.ranges()
        return list(self._seen)

    async def read(
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = LATEST_VERSION,
        max_items: int | None = None,
    ) -> Page:
        return self.feed.read(lease, position, start, mode=mode, max_items=max_items)
