"""The feed source's contract suite, shipped with the package beside the lease store's: what the
processor and the estimator rely on of a monitored container's change feed (``_source`` lists
it), as tests a source proves itself by. The in-memory feed passes it in-process; the Cosmos DB
adapter (sync and aio) passes it against a local Cosmos DB endpoint. A source of your own::

    class TestMySource(FeedSourceContract):
        @pytest.fixture
        def make_feed(self) -> Callable[[int], FeedHarness]:
            return lambda partitions: MyHarness(partitions)   # a new, empty container

A ``FeedHarness`` is the source and the container's writer: it writes and deletes documents
and splits (and merges) physical partitions, as a test of the service would. An aio source
is tested through the same tests: its harness sets ``run`` (what runs a coroutine to its end),
and the suite reads it through ``blocking``. What a source cannot do is said by its class:
``supports_merge``, ``supports_all_versions_and_deletes``, ``lsn_per_partition`` (False: those
tests are skipped with the reason).
"""

from __future__ import annotations

import datetime as dt
import itertools
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from cosmos_changefeed._continuation import ALL_VERSIONS_AND_DELETES, sdk_continuation
from cosmos_changefeed._estimation import remaining_work
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._names import store_prefix
from cosmos_changefeed._ranges import MAX_EPK, MIN_EPK, EpkRange, PartitionKeyRange
from cosmos_changefeed._reading import SESSION_TOKEN_HEADER, Page, Start
from cosmos_changefeed._source import FeedSource
from cosmos_changefeed.aio._feed_async import FeedSource as AsyncFeedSource

T = TypeVar("T")


class FeedHarness(ABC):
    """A monitored container under test: its feed ``source`` and what changes it."""

    #: The source (sync), or an aio source with ``run`` set.
    source: FeedSource | AsyncFeedSource
    #: Runs a coroutine of an aio source to its end (None for a sync source).
    run: Callable[[Awaitable[Any]], Any] | None = None
    partition_key_path: str = "/pk"

    @abstractmethod
    def upsert(self, document: dict[str, Any]) -> None:
        """Create or replace a document."""

    @abstractmethod
    def delete(self, item_id: str, partition_key: Any) -> None:
        """Delete a document."""

    @abstractmethod
    def split(self, range_id: str) -> tuple[str, ...]:
        """Split a physical partition; its children's ids."""

    def merge(self, first_id: str, second_id: str) -> str:
        """Merge two adjacent physical partitions; the new one's id."""
        raise NotImplementedError


def blocking(harness: FeedHarness) -> FeedSource:
    """The harness's source as a sync one (an aio source's calls run by ``harness.run``)."""
    source = harness.source
    if isinstance(source, FeedSource):
        return source
    run = harness.run
    if run is None:
        raise TypeError("an aio source's harness sets `run`")
    return _Blocking(source, run)


class _Blocking(FeedSource):
    def __init__(self, source: AsyncFeedSource, run: Callable[[Awaitable[Any]], Any]) -> None:
        self._source, self._run = source, run

    @property
    def account_endpoint(self) -> str:
        return self._source.account_endpoint

    def container_rid(self) -> str:
        return str(self._run(self._source.container_rid()))

    def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        return list(self._run(self._source.ranges(force_refresh=force_refresh)))

    def read(
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = "LatestVersion",
        max_items: int | None = None,
    ) -> Page:
        page = self._run(self._source.read(lease, position, start, mode=mode, max_items=max_items))
        assert isinstance(page, Page)
        return page


def lease_of(rng: PartitionKeyRange) -> Lease:
    """A version-0 lease over a partition key range (as the processor creates one)."""
    return Lease(id=f"contract..{rng.id}", lease_token=rng.id, feed_range=rng.range)


def epk_lease(rng: EpkRange) -> Lease:
    """An EPK lease (version 1) over ``rng``, as .NET leaves one after a merge."""
    return Lease(id=f"contract..{rng.token}", lease_token=rng.token, version=1, feed_range=rng)


def read_all(
    source: FeedSource,
    lease: Lease,
    position: str | None = None,
    start: Start = "Beginning",
    *,
    page_size: int | None = None,
    mode: str = "LatestVersion",
) -> tuple[list[dict[str, Any]], str | None, list[Page]]:
    """Every change of ``lease``'s range from ``position`` (or ``start``), page by page until
    a page is empty: the changes, the last etag, the pages."""
    items: list[dict[str, Any]] = []
    pages: list[Page] = []
    for _ in range(10_000):
        page = source.read(lease, position, start, mode=mode, max_items=page_size)
        pages.append(page)
        assert not page.gone, f"lease {lease.lease_token} is gone"
        position = page.etag or position
        if not page.items:
            return items, position, pages
        items.extend(page.items)
    raise AssertionError("the feed never ended")


def _docs(count: int, prefix: str) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", "pk": f"{prefix}-k{i}", "n": i} for i in range(count)]


class FeedSourceContract:
    """What every feed source does. Subclass it with a ``make_feed`` fixture."""

    supports_merge = True
    supports_all_versions_and_deletes = True
    #: Each physical partition has its own LSN (the estimator's lag is then what is pending).
    lsn_per_partition = True

    @pytest.fixture
    def make_feed(self) -> Callable[[int], FeedHarness]:
        raise NotImplementedError("subclass FeedSourceContract with a `make_feed` fixture")

    def test_the_ranges_tile_the_effective_partition_key_space(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        ranges = blocking(make_feed(3)).ranges()
        assert len(ranges) == 3 and len({r.id for r in ranges}) == 3
        assert ranges[0].range.min == MIN_EPK and ranges[-1].range.max == MAX_EPK
        assert all(a.range.max == b.range.min for a, b in itertools.pairwise(ranges))

    def test_the_container_has_a_resource_id_and_its_account_an_endpoint(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        source = blocking(make_feed(1))
        prefix = store_prefix("p", source.account_endpoint, source.container_rid())
        assert prefix.startswith("p") and source.container_rid() in prefix

    def test_a_range_read_from_the_beginning_gives_its_changes_in_order_in_pages(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        harness = make_feed(2)
        source = blocking(harness)
        written = _docs(30, "a")
        for doc in written:
            harness.upsert(doc)
        seen: list[str] = []
        for rng in source.ranges():
            items, etag, pages = read_all(source, lease_of(rng), page_size=4)
            assert all(len(page.items) <= 4 for page in pages)
            lsns = [int(item["_lsn"]) for item in items]
            assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)
            again = source.read(lease_of(rng), etag, "Beginning")
            assert again.items == [] and again.etag == etag, "the end is not where it stays"
            seen.extend(item["id"] for item in items)
        assert sorted(seen) == sorted(doc["id"] for doc in written), "a change lost or twice"

    def test_a_read_from_now_gives_nothing_and_a_position_later_changes_follow(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        harness = make_feed(1)
        source = blocking(harness)
        harness.upsert({"id": "before", "pk": "x"})
        (only,) = source.ranges()
        now = source.read(lease_of(only), None, "Now")
        assert now.items == [] and now.etag
        harness.upsert({"id": "after", "pk": "x"})
        items, _, _ = read_all(source, lease_of(only), now.etag)
        assert [item["id"] for item in items] == ["after"]

    def test_a_read_from_a_time_gives_the_changes_from_that_second_on(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        harness = make_feed(1)
        source = blocking(harness)
        harness.upsert({"id": "old", "pk": "x"})
        time.sleep(1.1 - time.time() % 1)  # into the next second, and a tenth
        moment = dt.datetime.now(dt.UTC)
        harness.upsert({"id": "new", "pk": "x"})
        (only,) = source.ranges()
        items, _, _ = read_all(source, lease_of(only), start=moment)
        assert [item["id"] for item in items] == ["new"]

    def test_the_latest_version_of_a_document_is_read_once_and_a_deleted_one_not_at_all(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        harness = make_feed(1)
        source = blocking(harness)
        harness.upsert({"id": "kept", "pk": "x", "v": 1})
        harness.upsert({"id": "gone", "pk": "x", "v": 1})
        harness.upsert({"id": "kept", "pk": "x", "v": 2})
        harness.delete("gone", "x")
        (only,) = source.ranges()
        items, _, _ = read_all(source, lease_of(only))
        assert [(item["id"], item["v"]) for item in items] == [("kept", 2)]

    def test_a_position_given_as_azure_cosmos_continuation_reads_on_from_its_etag(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        harness = make_feed(1)
        source = blocking(harness)
        for doc in _docs(6, "c"):
            harness.upsert(doc)
        (only,) = source.ranges()
        first = source.read(lease_of(only), None, "Beginning", max_items=2)
        assert first.etag is not None
        state = sdk_continuation(source.container_rid(), only.range, first.etag, "LatestVersion")
        by_etag, _, _ = read_all(source, lease_of(only), first.etag)
        by_state, _, _ = read_all(source, lease_of(only), state)
        assert [i["id"] for i in by_state] == [i["id"] for i in by_etag]
        assert len(by_etag) == 4

    def test_the_session_token_names_the_partitions_latest_lsn_so_the_lag_is_the_pending(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        if not self.lsn_per_partition:
            pytest.skip("this source keeps one LSN for the account, not one per partition")
        harness = make_feed(2)
        source = blocking(harness)
        first, second = source.ranges()
        marks = {r.id: source.read(lease_of(r), None, "Now").etag for r in (first, second)}
        for doc in _docs(40, "l"):
            harness.upsert(doc)
        for rng in (first, second):
            pending, _, _ = read_all(source, lease_of(rng), marks[rng.id])
            page = source.read(lease_of(rng), marks[rng.id], "Beginning", max_items=1)
            lag = remaining_work(page.headers.get(SESSION_TOKEN_HEADER), page.items)
            assert lag == len(pending) > 0

    def test_after_a_split_the_parent_is_gone_and_its_children_read_on_from_its_position(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        harness = make_feed(1)
        source = blocking(harness)
        written = _docs(24, "s")
        for doc in written:
            harness.upsert(doc)
        (parent,) = source.ranges()
        read = source.read(lease_of(parent), None, "Beginning", max_items=5)
        assert len(read.items) == 5
        children = harness.split(parent.id)
        assert source.read(lease_of(parent), read.etag, "Beginning").gone
        after = source.ranges(force_refresh=True)
        assert sorted(r.id for r in after) == sorted(children)
        assert after[0].range.min == parent.range.min and after[-1].range.max == parent.range.max
        rest: list[str] = []
        for child in after:
            items, _, _ = read_all(source, lease_of(child), read.etag)
            rest.extend(item["id"] for item in items)
        handled = {item["id"] for item in read.items}
        assert sorted(rest) == sorted(d["id"] for d in written if d["id"] not in handled)

    def test_an_epk_lease_reads_its_part_of_a_partition_and_is_gone_across_two(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        harness = make_feed(2)
        source = blocking(harness)
        written = _docs(30, "e")
        for doc in written:
            harness.upsert(doc)
        first, second = source.ranges()
        whole, _, _ = read_all(source, lease_of(first))
        middle = _middle(first.range)
        halves = [EpkRange(first.range.min, middle), EpkRange(middle, first.range.max)]
        parts = [{i["id"] for i in read_all(source, epk_lease(h))[0]} for h in halves]
        assert not parts[0] & parts[1]
        assert parts[0] | parts[1] == {item["id"] for item in whole}
        assert all(parts), "a half read nothing: the range is not scoped"
        across = epk_lease(EpkRange(middle, _middle(second.range)))
        assert source.read(across, None, "Beginning").gone

    def test_after_a_merge_version_0_leases_are_gone_and_epk_leases_read_their_ranges_on(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        if not self.supports_merge:
            pytest.skip("this source's container does not merge partitions")
        harness = make_feed(2)
        source = blocking(harness)
        for doc in _docs(20, "m"):
            harness.upsert(doc)
        first, second = source.ranges()
        marks = {r.id: read_all(source, lease_of(r))[1] for r in (first, second)}
        later = _docs(20, "n")
        for doc in later[:10]:
            harness.upsert(doc)
        merged = harness.merge(first.id, second.id)
        for doc in later[10:]:
            harness.upsert(doc)
        assert source.read(lease_of(first), marks[first.id], "Beginning").gone
        assert [r.id for r in source.ranges(force_refresh=True)] == [merged]
        read: list[str] = []
        for rng in (first, second):
            items, _, _ = read_all(source, epk_lease(rng.range), marks[rng.id])
            read.extend(item["id"] for item in items)
        assert sorted(read) == sorted(doc["id"] for doc in later), "lost or repeated by a merge"

    def test_all_versions_and_deletes_gives_each_create_replace_and_delete_with_metadata(
        self, make_feed: Callable[[int], FeedHarness]
    ) -> None:
        if not self.supports_all_versions_and_deletes:
            pytest.skip("this source does not serve the all-versions-and-deletes feed")
        harness = make_feed(1)
        source = blocking(harness)
        (only,) = source.ranges()
        now = source.read(lease_of(only), None, "Now", mode=ALL_VERSIONS_AND_DELETES)
        key = f"k-{uuid.uuid4().hex[:6]}"
        harness.upsert({"id": "a", "pk": key, "v": 1})
        harness.upsert({"id": "a", "pk": key, "v": 2})
        harness.delete("a", key)
        items, _, _ = read_all(source, lease_of(only), now.etag, mode=ALL_VERSIONS_AND_DELETES)
        kinds = [item["metadata"]["operationType"] for item in items]
        assert kinds == ["create", "replace", "delete"]
        create, replace, delete = items
        assert create["current"]["v"] == 1 and replace["current"]["v"] == 2
        assert replace["metadata"]["previousImageLSN"] == create["metadata"]["lsn"]
        assert delete["metadata"]["id"] == "a"
        assert delete["metadata"]["partitionKey"] == {"pk": key}
        assert delete["metadata"]["previousImageLSN"] == replace["metadata"]["lsn"]
        assert delete["metadata"]["timeToLiveExpired"] is False
        lsns = [item["metadata"]["lsn"] for item in items]
        assert lsns == sorted(lsns) and len(set(lsns)) == 3


def _middle(rng: EpkRange) -> str:
    """An EPK inside ``rng`` (halfway, in the 32-hex-digit space documents lie in)."""
    low = int(rng.min.ljust(32, "0")[:32], 16) if rng.min else 0
    high = int(rng.max.ljust(32, "0")[:32], 16) if rng.max != MAX_EPK else 1 << 126
    return f"{(low + high) // 2:032X}"
