"""The store's initialisation lock (``<prefix>.lock``, ``LeaseManager.initialize``) when a start
fails while holding it, in both processors, on the in-memory feed and lease store.

An error from an operation (the feed source's ``ranges()`` refused: an azure-core error) is
thrown into the flow: the lock is deleted, then the error is raised as it was. A cancel or an
interrupt (``BaseException``) closes the flow without another operation: no I/O after a cancel,
and no "generator ignored GeneratorExit" when it is collected; the lock is left to expire (its
``ttl``, ``INIT_LOCK_SECONDS``)."""

from __future__ import annotations

import asyncio
import gc
import inspect
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.exceptions import ServiceRequestError

from cosmos_changefeed import ChangeFeedProcessor, InMemoryLeaseStore, LeaseStoreError
from cosmos_changefeed._drive import drive
from cosmos_changefeed._names import info_id, lock_id, store_prefix
from cosmos_changefeed._protocol import (
    INIT_LOCK_SECONDS,
    Create,
    Delete,
    LeaseManager,
    Read,
    ReadRanges,
)
from cosmos_changefeed._ranges import PartitionKeyRange
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor
from cosmos_changefeed.aio import InMemoryLeaseStore as AsyncInMemoryLeaseStore
from cosmos_changefeed.aio._drive_async import drive as drive_async
from cosmos_changefeed.testing import AsyncInMemoryFeedSource, InMemoryFeed, InMemoryFeedSource

NAME = "mailer"


def refused() -> ServiceRequestError:
    return ServiceRequestError("connection refused")


class RefusingSource(InMemoryFeedSource):
    """A feed source whose ``ranges()`` raises ``error`` (once the store is locked)."""

    def __init__(self, feed: InMemoryFeed, error: BaseException) -> None:
        super().__init__(feed)
        self.error = error

    def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        raise self.error


class AsyncRefusingSource(AsyncInMemoryFeedSource):
    def __init__(self, feed: InMemoryFeed, error: BaseException) -> None:
        super().__init__(feed)
        self.error = error

    async def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        raise self.error


class AsyncBlockedSource(AsyncInMemoryFeedSource):
    """A feed source whose ``ranges()`` waits until cancelled (``entered`` set meanwhile)."""

    def __init__(self, feed: InMemoryFeed) -> None:
        super().__init__(feed)
        self.entered = asyncio.Event()

    async def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        self.entered.set()
        await asyncio.Event().wait()
        raise AssertionError("not cancelled")


class UndeletingStore(InMemoryLeaseStore):
    """A store that refuses every delete (a store error)."""

    def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        raise LeaseStoreError("delete refused")


@pytest.fixture
def unraisable() -> Iterator[list[str]]:
    """What Python reports as ignored (``sys.unraisablehook``) while the test runs: none, by
    the end of it (garbage collected)."""
    seen: list[str] = []
    previous = sys.unraisablehook

    def hook(report: Any) -> None:
        seen.append(f"{report.object!r}: {report.exc_type.__name__}: {report.exc_value}")

    sys.unraisablehook = hook
    try:
        yield seen
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert seen == []


def the_lock(feed: InMemoryFeed) -> str:
    return lock_id(store_prefix(NAME, feed.account_endpoint, feed.container_rid))


def the_info(feed: InMemoryFeed) -> str:
    return info_id(store_prefix(NAME, feed.account_endpoint, feed.container_rid))


def processor(store: InMemoryLeaseStore, source: InMemoryFeedSource) -> ChangeFeedProcessor:
    return ChangeFeedProcessor(
        source, store, handler=lambda context, changes: None, processor_name=NAME, instance_name="i"
    )


async def handle(context: Any, changes: Any) -> None:
    return None


def async_processor(
    store: AsyncInMemoryLeaseStore, source: AsyncInMemoryFeedSource
) -> AsyncChangeFeedProcessor:
    return AsyncChangeFeedProcessor(
        source, store, handler=handle, processor_name=NAME, instance_name="i"
    )


# -- the flow, sans I/O ----------------------------------------------------------------------


def locked_flow() -> Any:
    """``initialize`` run up to its ``ReadRanges``, the lock created (etag "e1")."""
    flow = LeaseManager("p", "i", partition_key_path="/id", mode="LatestVersion").initialize()
    assert isinstance(next(flow), Read)
    assert isinstance(flow.send(None), Create)
    assert flow.send({"id": "p.lock", "_etag": "e1"}) == ReadRanges(force_refresh=False)
    return flow


def test_an_error_thrown_into_the_locked_flow_deletes_the_lock_then_is_raised() -> None:
    flow = locked_flow()
    error = refused()
    assert flow.throw(error) == Delete("p.lock", "p.lock", "e1")
    with pytest.raises(ServiceRequestError) as raised:
        flow.send(True)
    assert raised.value is error


def test_the_flow_closed_while_it_deletes_the_lock_after_an_error_yields_nothing_more() -> None:
    flow = locked_flow()
    assert isinstance(flow.throw(refused()), Delete)
    flow.close()  # a cancel during the delete


def test_the_locked_flow_closes_without_another_operation() -> None:
    flow = locked_flow()
    flow.close()  # RuntimeError("generator ignored GeneratorExit") when it yields the Delete
    with pytest.raises(StopIteration):
        next(flow)


# -- sync -------------------------------------------------------------------------------------


def test_a_feed_error_while_initialising_deletes_the_lock_and_is_raised(
    unraisable: list[str],
) -> None:
    feed, store, error = InMemoryFeed(), InMemoryLeaseStore(), refused()
    with pytest.raises(ServiceRequestError) as raised:
        processor(store, RefusingSource(feed, error)).start()
    assert raised.value is error
    assert store.read(the_lock(feed), the_lock(feed)) is None
    assert store.read(the_info(feed), the_info(feed)) is None
    started = processor(store, InMemoryFeedSource(feed))
    started.start()  # at once: no lock to wait out
    started.stop()
    assert store.read(the_info(feed), the_info(feed)) is not None


def test_a_lock_that_cannot_be_deleted_leaves_the_error_raised_with_a_note(
    unraisable: list[str],
) -> None:
    feed, store, error = InMemoryFeed(), UndeletingStore(), refused()
    with pytest.raises(ServiceRequestError) as raised:
        processor(store, RefusingSource(feed, error)).start()
    assert raised.value is error
    assert any("delete refused" in note for note in getattr(error, "__notes__", []))
    assert store.read(the_lock(feed), the_lock(feed)) is not None


def test_an_interrupt_while_initialising_leaves_the_lock_to_expire(
    unraisable: list[str],
) -> None:
    feed, store = InMemoryFeed(), InMemoryLeaseStore()
    with pytest.raises(KeyboardInterrupt):
        processor(store, RefusingSource(feed, KeyboardInterrupt())).start()
    gc.collect()
    assert unraisable == []
    lock = store.read(the_lock(feed), the_lock(feed))
    assert lock is not None and lock["ttl"] == INIT_LOCK_SECONDS


def test_the_driver_closes_a_flow_an_interrupt_left(unraisable: list[str]) -> None:
    flow = LeaseManager("p", "i", partition_key_path="/id", mode="LatestVersion").initialize()
    feed = InMemoryFeed()
    with pytest.raises(KeyboardInterrupt):
        drive(
            flow, InMemoryLeaseStore(), RefusingSource(feed, KeyboardInterrupt()), lambda _s: None
        )
    assert inspect.getgeneratorstate(flow) == inspect.GEN_CLOSED  # not left for the collector


# -- aio --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_aio_a_feed_error_while_initialising_deletes_the_lock_and_is_raised(
    unraisable: list[str],
) -> None:
    feed, store, error = InMemoryFeed(), AsyncInMemoryLeaseStore(), refused()
    with pytest.raises(ServiceRequestError) as raised:
        await async_processor(store, AsyncRefusingSource(feed, error)).start()
    assert raised.value is error
    assert await store.read(the_lock(feed), the_lock(feed)) is None
    started = async_processor(store, AsyncInMemoryFeedSource(feed))
    await asyncio.wait_for(started.start(), 5)  # at once: no lock to wait out
    await started.stop()
    assert await store.read(the_info(feed), the_info(feed)) is not None


@pytest.mark.asyncio
async def test_aio_a_cancel_while_initialising_leaves_the_lock_to_expire(
    unraisable: list[str],
) -> None:
    feed, store = InMemoryFeed(), AsyncInMemoryLeaseStore()
    source = AsyncBlockedSource(feed)
    starting = asyncio.create_task(async_processor(store, source).start())
    await asyncio.wait_for(source.entered.wait(), 5)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    del starting
    gc.collect()
    assert unraisable == []
    lock = await store.read(the_lock(feed), the_lock(feed))
    assert lock is not None and lock["ttl"] == INIT_LOCK_SECONDS


@pytest.mark.asyncio
async def test_aio_the_driver_closes_a_flow_a_cancel_left(unraisable: list[str]) -> None:
    flow = LeaseManager("p", "i", partition_key_path="/id", mode="LatestVersion").initialize()
    source = AsyncBlockedSource(InMemoryFeed())
    driving = asyncio.create_task(
        drive_async(flow, AsyncInMemoryLeaseStore(), source, asyncio.sleep)
    )
    await asyncio.wait_for(source.entered.wait(), 5)
    driving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await driving
    assert inspect.getgeneratorstate(flow) == inspect.GEN_CLOSED  # not left for the collector
