"""The monitored container as the aio processor reads it (azure-cosmos ``aio.ContainerProxy``).
See ``cosmos_changefeed._feed``: the same requests, awaited."""

from __future__ import annotations

import asyncio
from typing import Any

from azure.cosmos.aio import ContainerProxy

from cosmos_changefeed._leases import Lease
from cosmos_changefeed._ranges import EpkRange, PartitionKeyRange
from cosmos_changefeed._reading import (
    Page,
    RangeIdCapture,
    Reader,
    ResponseCapture,
    Start,
    is_gone,
    merge_ranges,
    range_of,
)
from cosmos_changefeed.aio._resources_async import read_properties


class FeedReader(Reader[ContainerProxy]):
    """Reads the change feed of ``container`` lease by lease."""

    def __init__(self, container: ContainerProxy, *, mode: str, max_items: int | None) -> None:
        super().__init__(container, mode=mode, max_items=max_items)
        self._learning = asyncio.Lock()

    async def container_rid(self) -> str:
        if self._rid is None:
            properties = await read_properties(self.container, "monitored container")
            self._rid = str(properties["_rid"])
        return self._rid

    async def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        """The live partition key ranges, in EPK order."""
        feed = [
            EpkRange.from_json(r)
            async for r in self.container.read_feed_ranges(force_refresh=force_refresh)
        ]
        unknown, known = merge_ranges(feed, self._ids)
        if not unknown:
            return known
        async with self._learning:
            for rng in merge_ranges(feed, self._ids)[0]:
                self._ids[rng] = await self._range_id(rng)
        return merge_ranges(feed, self._ids)[1]

    async def _range_id(self, rng: EpkRange) -> str:
        capture = RangeIdCapture()
        async for page in self.container.query_items_change_feed(**capture.kwargs(rng)).by_page():
            _ = [item async for item in page]
            break
        return capture.range_id(rng)

    async def _gone(self, lease: Lease) -> bool:
        """Whether ``lease``'s range is gone: so says the SDK's routing map, read afresh to be
        sure (a map cached before a split does not have a child's id yet)."""
        if not is_gone(lease, await self.ranges()):
            return False
        return is_gone(lease, await self.ranges(force_refresh=True))

    async def read(
        self, lease: Lease, position: str | None, start: Start, *, max_items: int | None = None
    ) -> Page:
        """One page of ``lease``'s range from ``position`` (or ``start``), of at most
        ``max_items`` changes (default: the reader's)."""
        feed_range = range_of(lease)
        if await self._gone(lease):
            return Page.gone_at(position)
        capture = ResponseCapture()
        rid = await self.container_rid()
        kwargs = self._read_kwargs(rid, feed_range, position, start, max_items)
        pager = self.container.query_items_change_feed(**kwargs, response_hook=capture).by_page()
        items: list[dict[str, Any]] = []
        async for page in pager:
            items = [item async for item in page]
            break
        if await self._gone(lease):
            return Page.gone_at(position)
        return capture.page(items, position)
