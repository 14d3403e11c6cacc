"""The feed source port, aio (``FeedSource``), and its Cosmos DB adapter over azure-cosmos's
``aio.ContainerProxy``. See ``cosmos_changefeed._source`` (the port) and
``cosmos_changefeed._feed`` (the same requests, sent)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from azure.cosmos.aio import ContainerProxy

from cosmos_changefeed._continuation import LATEST_VERSION
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._ranges import EpkRange, PartitionKeyRange
from cosmos_changefeed._reading import (
    Page,
    RangeIdCapture,
    RawHook,
    Reader,
    ReadHooks,
    ResponseCapture,
    Start,
    change_feed_kwargs,
    client_hooks,
    is_gone,
    merge_ranges,
    paths_of,
    range_of,
    writes_at_once,
)
from cosmos_changefeed.aio._resources_async import read_properties


class FeedSource(ABC):
    """The monitored container's change feed (aio). See ``cosmos_changefeed.FeedSource``."""

    @property
    @abstractmethod
    def account_endpoint(self) -> str:
        """The account's endpoint."""

    @abstractmethod
    async def container_rid(self) -> str:
        """The container's resource id (``_rid``)."""

    @abstractmethod
    async def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        """The live partition key ranges, in EPK order (``force_refresh``: not from a cache)."""

    @abstractmethod
    async def read(
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = LATEST_VERSION,
        max_items: int | None = None,
    ) -> Page:
        """One page of ``lease``'s range from ``position``, or from ``start``."""

    def partition_key_paths(self) -> list[str] | None:
        """The container's partition key paths, once ``container_rid`` was read (None: the
        source cannot say). See ``cosmos_changefeed.FeedSource.partition_key_paths``."""
        return None

    async def close(self) -> None:  # noqa: B027 - nothing to close by default
        """Release what the source holds."""


class CosmosFeedSource(Reader[ContainerProxy], FeedSource):
    """The change feed of ``container`` (an azure-cosmos ``aio.ContainerProxy``), read lease
    by lease."""

    def __init__(self, container: ContainerProxy) -> None:
        super().__init__(container)
        self._learning = asyncio.Lock()
        self._client_hooks: tuple[RawHook | None, RawHook | None] | None = client_hooks(container)
        #: Whether a read sent from the hook of the answer before goes out while that answer is
        #: parsed (``_reading.writes_at_once``): the processor sends one early only then.
        self._writes_at_once = writes_at_once(container)

    async def container_rid(self) -> str:
        if self._rid is None:
            properties = await read_properties(self.container, "monitored container")
            self._rid = str(properties["_rid"])
            self._paths = paths_of(properties)
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
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = LATEST_VERSION,
        max_items: int | None = None,
        sent: Callable[[], None] | None = None,
        answered: Callable[[str], None] | None = None,
    ) -> Page:
        """One page of ``lease``'s range from ``position`` (or ``start``), of at most
        ``max_items`` changes (None: the service's page); ``sent`` and ``answered`` told as
        ``cosmos_changefeed.CosmosFeedSource.read`` tells them (the aio processor starts the next
        read from ``answered`` when the client ``writes_at_once``: ``aio/_worker_async``)."""
        feed_range = range_of(lease)
        capture = ResponseCapture()
        rid = await self.container_rid()
        kwargs = change_feed_kwargs(
            rid, feed_range, position, start, mode=mode, max_items=max_items
        )
        if self._client_hooks is not None:
            kwargs.update(ReadHooks(self._client_hooks, sent, answered).kwargs())
        pager = self.container.query_items_change_feed(**kwargs, response_hook=capture).by_page()
        items: list[dict[str, Any]] = []
        async for page in pager:
            items = [item async for item in page]
            break
        # decided after the read only: a read of a range already gone is answered by the SDK
        # from the children (it handles the 410), and dropped here as any split under a read
        if await self._gone(lease):
            return Page.gone_at(position)
        return capture.page(items, position)
