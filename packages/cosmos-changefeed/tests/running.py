"""One processor run in-process, in either flavour, on the in-memory feed and lease store: a
test writes its scenario once with plain functions (the handler, ``set_aside``, the hooks) and
runs it on the sync processor (threads) and on the aio one (the same functions wrapped in
coroutines, on an event loop of their own), until a condition holds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Literal

from cosmos_changefeed import ChangeFeedProcessor, InMemoryDocuments, InMemoryLeaseStore, Lease
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor
from cosmos_changefeed.aio import InMemoryLeaseStore as AsyncInMemoryLeaseStore
from cosmos_changefeed.testing import AsyncInMemoryFeedSource, InMemoryFeed, InMemoryFeedSource

Flavour = Literal["sync", "aio"]
FLAVOURS: tuple[Flavour, ...] = ("sync", "aio")
#: Lease intervals of a tenth of a second: a scenario takes a fraction of one.
FAST: dict[str, Any] = {
    "poll_delay": 0.01,
    "lease_acquire_interval": 0.05,
    "lease_renew_interval": 0.1,
    "lease_expiration_interval": 0.6,
}
#: Callables a scenario gives as plain functions; in aio they are wrapped in coroutines.
AWAITED = ("handler", "set_aside", "still_set_aside", "on_estimate")


def wrapped(fn: Callable[..., Any]) -> Callable[..., Any]:
    async def call(*args: Any) -> Any:
        return fn(*args)

    return call


def run(
    flavour: Flavour,
    feed: InMemoryFeed,
    documents: InMemoryDocuments,
    until: Callable[[], bool],
    *,
    within: float = 10.0,
    wrap: bool = True,
    **options: Any,
) -> ChangeFeedProcessor | AsyncChangeFeedProcessor:
    """Run one processor (``processor_name`` "p", ``instance_name`` "i" unless given) until
    ``until()``; stop it; return it. ``wrap``: wrap the awaited callables for aio (False: they
    are given as they are)."""
    given: dict[str, Any] = {"processor_name": "p", "instance_name": "i"} | FAST | options
    if flavour == "sync":
        processor = ChangeFeedProcessor(
            InMemoryFeedSource(feed), InMemoryLeaseStore(documents=documents), **given
        )
        with processor:
            processor.wait_until_listening(within)
            wait(until, within)
        return processor
    if wrap:
        given |= {name: wrapped(given[name]) for name in AWAITED if given.get(name) is not None}
    aio = AsyncChangeFeedProcessor(
        AsyncInMemoryFeedSource(feed), AsyncInMemoryLeaseStore(documents=documents), **given
    )

    async def main() -> None:
        async with aio:
            await aio.wait_until_listening(within)
            deadline = time.monotonic() + within
            while not until():
                assert time.monotonic() < deadline, "not within the time"
                await asyncio.sleep(0.005)

    asyncio.run(main())
    return aio


def wait(until: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not until():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.005)


def leases(documents: InMemoryDocuments) -> list[Lease]:
    return [Lease.from_document(d) for d in documents.list_documents("") if "LeaseToken" in d]
