"""The sync processor's read-ahead: the next page of a lease read on the reading pool while its
handler runs, for a handler that takes time; after it, on the lease's thread, for one that
returns at once (in-memory feed and lease store)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from inprocess import FAST, eventually, write

from cosmos_changefeed import ChangeFeedProcessor, InMemoryLeaseStore, LeaseContext
from cosmos_changefeed.testing import InMemoryFeed, InMemoryFeedSource


class ThreadsOfReads(InMemoryFeedSource):
    """The feed, naming the thread each read of it was made on."""

    def __init__(self, feed: InMemoryFeed) -> None:
        super().__init__(feed)
        self.threads: list[str] = []

    def read(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        return super().read(*args, **kwargs)


@pytest.mark.parametrize("waits", [0.0, 0.005])
def test_the_sync_processor_reads_ahead_only_for_a_handler_that_takes_time(waits: float) -> None:
    """A handler that waits (5 ms a batch, as one that writes somewhere does) has the next page
    read while it runs, on the reading pool; one that returns at once has it read after it, on
    the lease's own thread (a page handed between threads would cost it, and hide nothing)."""
    feed = InMemoryFeed(1)
    handled = write(feed, keys=30, per_key=1)
    source, seen, handlers = ThreadsOfReads(feed), [], set()

    def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        handlers.add(threading.current_thread().name)
        seen.extend(c["id"] for c in changes)
        if waits:
            time.sleep(waits)

    processor = ChangeFeedProcessor(
        source,
        InMemoryLeaseStore(),
        processor_name="p",
        instance_name="i",
        handler=handle,
        start_from="beginning",
        max_items=3,
        **FAST,
    )
    processor.start()
    try:
        eventually(lambda: set(seen) >= set(handled))
    finally:
        processor.stop()
    [lease_thread] = handlers
    pages = len(handled) // 3  # the backlog's reads (the first read on the lease's thread)
    backlog = source.threads[:pages]
    if waits:  # each read after the first while the handler waited: on the pool
        assert lease_thread not in backlog[1:], source.threads
    else:  # after the handler's first batch (read ahead: none measured yet), after it; a batch
        # measured slow on a loaded machine (its thread preempted) is read ahead again
        assert lease_thread in backlog[2:], source.threads
