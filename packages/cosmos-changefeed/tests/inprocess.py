"""Processors in-process, on the in-memory feed and the in-memory lease store: each scenario is
written once and run on the sync processor (threads) and on the aio one (tasks, on an event loop
of their own in a thread), through ``Fleet``: the same calls, the same handler (a plain
function, wrapped in a coroutine for aio), so one test holds both shells.

``Frozen`` stands for a process that stopped answering (SIGKILLed, paused): its instance's
lease container and feed refuse everything from the moment it is frozen, so nothing it does
reaches the store -- no renewal, no checkpoint, no release -- as after a kill; ``thaw`` lets a
paused one go on (as a process stalled under load, or a pause that ends)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from deadlines import SHORT

from cosmos_changefeed import (
    ChangeFeedProcessor,
    FeedSource,
    InMemoryDocuments,
    InMemoryLeaseStore,
    Lease,
    LeaseContext,
    ManualCheckpointContext,
)
from cosmos_changefeed._ranges import PartitionKeyRange
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor
from cosmos_changefeed.aio import InMemoryLeaseStore as AsyncInMemoryLeaseStore
from cosmos_changefeed.aio import ManualCheckpointContext as AsyncManualCheckpointContext
from cosmos_changefeed.testing import AsyncInMemoryFeedSource, InMemoryFeed, InMemoryFeedSource

Flavour = Literal["sync", "aio"]
FLAVOURS: tuple[Flavour, ...] = ("sync", "aio")
T = TypeVar("T")
#: ``(context, changes)``, called as it is by the sync processor and from a coroutine by aio.
Handle = Callable[[LeaseContext, list[dict[str, Any]]], object]
#: What a handle returns, under manual checkpoints, to have the batch checkpointed: the
#: context's ``checkpoint()`` is then called (sync) or awaited (aio) before the handler returns.
CHECKPOINT = "checkpoint"

#: Lease intervals of a tenth of a second: each scenario takes a fraction of one.
FAST: dict[str, float] = {
    "poll_delay": 0.02,
    "lease_acquire_interval": 0.05,
    "lease_renew_interval": 0.1,
    "lease_expiration_interval": 0.6,
}
#: No lease expires however slow the machine is (a renewal late by a second under load would
#: let FAST's lease expire and be read again from its checkpoint): for a test of exactly once.
STEADY: dict[str, float] = {"lease_expiration_interval": SHORT}


class FrozenError(Exception):
    """What a frozen instance's store and feed answer."""


class Frozen:
    """A switch: once ``freeze()`` is called, the instance's store and feed refuse all."""

    def __init__(self) -> None:
        self.frozen = False

    def freeze(self) -> None:
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False

    def check(self) -> None:
        if self.frozen:
            raise FrozenError("this instance's process is gone")


class _FrozenDocuments(InMemoryDocuments):
    """Lease documents seen through a ``Frozen`` switch."""

    def __init__(self, documents: InMemoryDocuments, switch: Frozen) -> None:
        self.partition_key_path = documents.partition_key_path
        self._inner, self._switch = documents, switch

    def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        self._switch.check()
        return self._inner.list_documents(prefix)

    def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        self._switch.check()
        return self._inner.read(item_id, partition_key)

    def create(self, document: Mapping[str, Any], partition_key: str) -> dict[str, Any] | None:
        self._switch.check()
        return self._inner.create(document, partition_key)

    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        self._switch.check()
        return self._inner.replace(document, partition_key, etag)

    def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        self._switch.check()
        return self._inner.delete(item_id, partition_key, etag)


class _FrozenFeed(InMemoryFeed):
    """A feed seen through a ``Frozen`` switch (reads only: the test writes to the real one)."""

    def __init__(self, feed: InMemoryFeed, switch: Frozen) -> None:
        self._inner, self._switch = feed, switch
        self.account_endpoint, self.container_rid = feed.account_endpoint, feed.container_rid
        self.partition_key_path = feed.partition_key_path

    def ranges(self) -> Any:
        self._switch.check()
        return self._inner.ranges()

    def read(self, *args: Any, **kwargs: Any) -> Any:
        self._switch.check()
        return self._inner.read(*args, **kwargs)


class Member:
    """One processor instance, driven the same way whatever its flavour."""

    def __init__(self, fleet: Fleet, processor: ChangeFeedProcessor | AsyncChangeFeedProcessor):
        self.fleet, self.processor = fleet, processor
        self.switch = Frozen()

    def start(self) -> Member:
        if isinstance(self.processor, ChangeFeedProcessor):
            self.processor.start()
        else:
            self.fleet.call(self.processor.start())
        return self

    def wait_until_listening(self, timeout: float = 10.0) -> None:
        if isinstance(self.processor, ChangeFeedProcessor):
            self.processor.wait_until_listening(timeout)
        else:
            self.fleet.call(self.processor.wait_until_listening(), timeout)

    def stop(self) -> None:
        if isinstance(self.processor, ChangeFeedProcessor):
            self.processor.stop()
        else:
            self.fleet.call(self.processor.stop())

    def ranges(self) -> list[PartitionKeyRange]:
        """The ranges as this instance's feed source sees them (from its cache)."""
        source = self.processor._reader
        if isinstance(source, FeedSource):
            return source.ranges()
        return self.fleet.call(source.ranges())

    @property
    def owned_leases(self) -> list[str]:
        processor = self.processor
        if isinstance(processor, ChangeFeedProcessor):
            return processor.owned_leases

        async def owned() -> list[str]:
            return processor.owned_leases

        return self.fleet.call(owned())


class Fleet:
    """Processors of one flavour over one in-memory feed and one in-memory lease container."""

    def __init__(self, flavour: Flavour, feed: InMemoryFeed) -> None:
        self.flavour, self.feed = flavour, feed
        self.leases = InMemoryDocuments("/id")
        self.members: list[Member] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        if flavour == "aio":
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, daemon=True).start()

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def processor(self, instance: str, handle: Handle, **options: Any) -> Member:
        """A new instance (not started) of the processor ``options["processor_name"]`` ("p")."""
        options = {"processor_name": "p", **FAST, **options}
        switch = Frozen()
        feed, documents = _FrozenFeed(self.feed, switch), _FrozenDocuments(self.leases, switch)
        processor: ChangeFeedProcessor | AsyncChangeFeedProcessor
        if self.flavour == "sync":

            def sync_handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
                if handle(context, changes) == CHECKPOINT:
                    assert isinstance(context, ManualCheckpointContext)
                    context.checkpoint()

            processor = ChangeFeedProcessor(
                InMemoryFeedSource(feed),
                InMemoryLeaseStore(documents=documents),
                instance_name=instance,
                handler=sync_handler,
                **options,
            )
        else:

            async def handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
                if handle(context, changes) == CHECKPOINT:
                    assert isinstance(context, AsyncManualCheckpointContext)
                    await context.checkpoint()

            processor = AsyncChangeFeedProcessor(
                AsyncInMemoryFeedSource(feed),
                AsyncInMemoryLeaseStore(documents=documents),
                instance_name=instance,
                handler=handler,
                **options,
            )
        member = Member(self, processor)
        member.switch = switch
        self.members.append(member)
        return member

    def stored(self) -> dict[str, Lease]:
        """The leases in the lease container, by token."""
        return {
            lease.lease_token: lease
            for lease in map(Lease.from_document, self.leases.list_documents(""))
            if lease.lease_token
        }

    def owner(self, token: str) -> str | None:
        """Lease ``token``'s owner in the lease container now."""
        return self.stored()[token].owner

    def positions(self) -> dict[str, str | None]:
        """Each stored lease's checkpoint, by token."""
        return {token: lease.continuation for token, lease in self.stored().items()}

    def close(self) -> None:
        for member in self.members:
            member.stop()  # a frozen one's release fails: its leases expire
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


@contextmanager
def fleet(flavour: Flavour, feed: InMemoryFeed) -> Iterator[Fleet]:
    made = Fleet(flavour, feed)
    try:
        yield made
    finally:
        made.close()


def in_order_per_partition_key(batches: list[tuple[LeaseContext, list[dict[str, Any]]]]) -> None:
    """Per partition key, the first delivery of each change comes after the change before it
    (a redelivery may repeat earlier ones: at least once)."""
    seen: dict[str, int] = defaultdict(lambda: -1)
    for _, changes in batches:
        for doc in changes:
            if doc["seq"] > seen[doc["pk"]]:
                assert doc["seq"] == seen[doc["pk"]] + 1, f"{doc['pk']}: a gap before {doc}"
                seen[doc["pk"]] = doc["seq"]


class Delivered:
    """What the handlers were given, in the order they were given it (thread-safe).

    ``owner_of`` (a lease token: its owner in the lease container, ``Fleet.owner``): each batch
    is also told apart as given to the lease's owner, or to an instance that no longer owns it
    -- a stolen lease's former owner, which learns it only at its next renewal or checkpoint,
    and whose batch in flight is given meanwhile but not checkpointed (``owners_positions``)."""

    def __init__(self, owner_of: Callable[[str], str | None] | None = None) -> None:
        self.batches: list[tuple[LeaseContext, list[dict[str, Any]]]] = []
        self._owner_of = owner_of
        self._owners_positions: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def __call__(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        with self._lock:
            self.batches.append((context, changes))
            owner = self._owner_of(context.lease_token) if self._owner_of is not None else None
            if owner == context.instance_name:
                self._owners_positions[context.lease_token] = context.continuation

    @property
    def ids(self) -> set[str]:
        with self._lock:
            return {doc["id"] for _, changes in self.batches for doc in changes}

    def count(self, item_id: str) -> int:
        with self._lock:
            return sum(1 for _, changes in self.batches for doc in changes if doc["id"] == item_id)

    def last_positions(self) -> dict[str, str | None]:
        """Each lease's continuation after the last batch it was given."""
        with self._lock:
            return {context.lease_token: context.continuation for context, _ in self.batches}

    def owners_positions(self) -> dict[str, str | None]:
        """Each lease's continuation after the last batch given to its owner at the time (as
        the lease container said as it was given; needs ``owner_of``): what a checkpoint, or
        the stop's, stores -- a former owner's checkpoint is refused."""
        assert self._owner_of is not None, "Delivered(owner_of=...) tells the owners apart"
        with self._lock:
            return dict(self._owners_positions)

    def tokens(self) -> set[str]:
        with self._lock:
            return {context.lease_token for context, _ in self.batches}

    def assert_in_order_per_partition_key(self) -> None:
        in_order_per_partition_key(self.batches)


def write(feed: InMemoryFeed, keys: int, per_key: int, *, start: int = 0) -> list[str]:
    """``per_key`` changes to each of ``keys`` partition keys (``seq`` counts them per key)."""
    ids: list[str] = []
    for seq in range(start, start + per_key):
        for key in range(keys):
            ids.append(f"k{key}-{seq}")
            feed.upsert({"id": ids[-1], "pk": f"k{key}", "seq": seq})
    return ids


def eventually(condition: Callable[[], bool], within: float = SHORT) -> None:
    """Wait for `condition` under a named deadline generous for a slow machine (`SHORT`)."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.005)
