"""The feed source port's Cosmos DB adapter, sync (``_source.FeedSource`` over azure-cosmos's
``ContainerProxy``): the container's resource id, its partition key ranges, and one page of a
lease's range. The requests and what is kept of the answers are ``_reading``'s; this file only
sends them.

The ranges' ids: azure-cosmos lists a container's physical partitions as EPK ranges
(``read_feed_ranges``) without their ids. A change feed read of one range names it: the SDK
resolves the range in its routing map and sends the id in ``x-ms-documentdb-partitionkeyrangeid``,
which azure-core's ``raw_request_hook`` shows. So each range's id is learnt once by a read from
"now" (a 304: nothing is read) and kept while the SDK's map has that range.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from azure.cosmos import ContainerProxy

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
)
from cosmos_changefeed._resources import read_properties
from cosmos_changefeed._shared_headers import read_again_on_headers_race
from cosmos_changefeed._source import FeedSource


class CosmosFeedSource(Reader[ContainerProxy], FeedSource):
    """The change feed of ``container`` (an azure-cosmos ``ContainerProxy``), read lease by
    lease: what the processor and the estimator use when given a container."""

    def __init__(self, container: ContainerProxy) -> None:
        super().__init__(container)
        self._lock = threading.Lock()
        self._client_hooks: tuple[RawHook | None, RawHook | None] | None = client_hooks(container)

    def container_rid(self) -> str:
        if self._rid is None:
            properties = read_properties(self.container, "monitored container")
            self._rid = str(properties["_rid"])
            self._paths = paths_of(properties)
        return self._rid

    def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        """The live partition key ranges, in EPK order (``force_refresh``: the SDK's routing
        map read again first)."""
        feed = [
            EpkRange.from_json(r)
            for r in self.container.read_feed_ranges(force_refresh=force_refresh)
        ]
        with self._lock:
            unknown, _ = merge_ranges(feed, self._ids)
        for rng in unknown:
            found = self._range_id(rng)
            with self._lock:
                self._ids[rng] = found
        with self._lock:
            _, known = merge_ranges(feed, self._ids)
        return known

    def _range_id(self, rng: EpkRange) -> str:
        capture = RangeIdCapture()

        def learn() -> None:
            for page in self.container.query_items_change_feed(**capture.kwargs(rng)).by_page():
                list(page)
                break

        read_again_on_headers_race(learn, what="a range's id")
        return capture.range_id(rng)

    def _gone(self, lease: Lease) -> bool:
        """Whether ``lease``'s range is gone: so says the SDK's routing map, read afresh to be
        sure (a map cached before a split does not have a child's id yet)."""
        if not is_gone(lease, self.ranges()):
            return False
        return is_gone(lease, self.ranges(force_refresh=True))

    def read(
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
        ``max_items`` changes (None: the service's page). Before the read returns, when its
        client's own raw hooks could be found (``_reading.client_hooks``): ``sent()`` once its
        request is on its way, ``answered(etag)`` once the answer is known to hold changes up
        to ``etag`` (the page's, unless it is gone), before azure-cosmos parses it -- what the
        sync processor sends the next read from. Told through the read's raw hooks, which call
        the client's own too (``_reading.ReadHooks``)."""
        feed_range = range_of(lease)
        capture = ResponseCapture()
        kwargs = change_feed_kwargs(
            self.container_rid(), feed_range, position, start, mode=mode, max_items=max_items
        )
        if self._client_hooks is not None:
            kwargs.update(ReadHooks(self._client_hooks, sent, answered).kwargs())

        def first_page() -> list[dict[str, Any]]:
            pager = self.container.query_items_change_feed(**kwargs, response_hook=capture)
            for page in pager.by_page():
                return list(page)
            return []

        items = read_again_on_headers_race(first_page, what="a change feed read")
        # decided after the read only: a read of a range already gone is answered by the SDK
        # from the children (it handles the 410), and dropped here as any split under a read
        if self._gone(lease):
            return Page.gone_at(position)
        return capture.page(items, position)
