"""An outage is not a poison (``_retries``, ``_health``): with the defaults, in virtual time
(``VirtualClock``: the aio processor's minutes pass in milliseconds), a handler whose downstream
is down for 80 s or ten minutes -- every change of every lease fails -- has nothing set aside,
keeps its leases, says it is stalled (a WARNING, ``stalled_since``, the estimator's answer) and
handles everything once the downstream is back; one poison in a batch of 10 is still set aside
alone; a lone change is told by a success elsewhere (another lease, the lease's next change);
a ``TransientError`` is never set aside. The sync shell's twin runs in real time with short
delays."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

import pytest
from running import FLAVOURS, Flavour, run

from cosmos_changefeed import (
    ChangeFeedProcessorState,
    FailedBatch,
    InMemoryDocuments,
    LeaseContext,
    TransientError,
)
from cosmos_changefeed._memory_feed import epk_of
from cosmos_changefeed.aio import ChangeFeedEstimator, ChangeFeedProcessor, InMemoryLeaseStore
from cosmos_changefeed.testing import AsyncInMemoryFeedSource, InMemoryFeed, VirtualClock


class Downstream:
    """What a handler writes to: down until ``until`` (virtual seconds), and never for the
    ``poison`` ids; what it took, in order; the clock's time at each call."""

    def __init__(self, clock: VirtualClock, until: float = 0.0, poison: set[str] | None = None):
        self.clock, self.until, self.poison = clock, until, poison or set()
        self.taken: list[str] = []
        self.calls = 0

    async def handle(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        self.calls += 1
        if self.clock.elapsed < self.until:
            raise ConnectionError("the downstream is down")
        if any(change["id"] in self.poison for change in changes):
            raise ValueError("cannot take this change")
        self.taken.extend(change["id"] for change in changes)


def written(feed: InMemoryFeed, keys: int, per_key: int, *, start: int = 0) -> list[str]:
    ids = [f"k{key}-{seq}" for seq in range(start, start + per_key) for key in range(keys)]
    for item in ids:
        feed.upsert({"id": item, "pk": item.split("-")[0]})
    return ids


def processor(
    feed: InMemoryFeed,
    documents: InMemoryDocuments,
    downstream: Downstream,
    parked: list[FailedBatch],
    **options: Any,
) -> ChangeFeedProcessor:
    async def park(batch: FailedBatch) -> None:
        parked.append(batch)

    return ChangeFeedProcessor(
        AsyncInMemoryFeedSource(feed),
        InMemoryLeaseStore(documents=documents),
        processor_name="p",
        instance_name="i",
        handler=downstream.handle,
        set_aside=park,  # set_aside_after, the retry delays, the poll delay: the defaults
        start_from="beginning",
        **options,
    )


async def until(condition: Callable[[], bool], limit: float, clock: VirtualClock) -> None:
    deadline = clock.elapsed + limit
    while not condition():
        assert clock.elapsed < deadline, "not within the (virtual) time"
        await asyncio.sleep(1)


@pytest.mark.parametrize("outage", [80.0, 600.0], ids=["80 s", "10 minutes"])
def test_an_outage_with_the_defaults_sets_nothing_aside_and_all_is_handled_after(
    outage: float, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cosmos_changefeed")
    clock = VirtualClock()
    feed, documents = InMemoryFeed(partitions=2, clock=clock.now), InMemoryDocuments()
    downstream, parked = Downstream(clock, until=outage), list[FailedBatch]()
    ids = written(feed, keys=5, per_key=4)  # batches of 10 on each of the two leases
    seen: dict[str, Any] = {}

    async def main() -> None:
        cfp = processor(feed, documents, downstream, parked)
        estimator = ChangeFeedEstimator(
            AsyncInMemoryFeedSource(feed),
            InMemoryLeaseStore(documents=documents),
            processor_name="p",
        )
        async with cfp:
            await until(lambda: cfp.stalled_since is not None, outage + 60, clock)
            seen["stalled_since"] = cfp.stalled_since
            await asyncio.sleep(20)  # a renewal (17 s) writes the stall into the leases
            seen["estimates"] = await estimator.get_estimates()
            await until(lambda: set(downstream.taken) >= set(ids), outage + 120, clock)
            seen["after"] = cfp.stalled_since
            await asyncio.sleep(5)
            seen["estimates after"] = await estimator.get_estimates()

    clock.run(main())
    assert parked == [], f"{len(parked)} change(s) set aside in an outage of {outage:g} s"
    assert sorted(downstream.taken) == sorted(ids) and len(downstream.taken) == len(ids)
    assert seen["stalled_since"] is not None and seen["after"] is None
    stalled: list[ChangeFeedProcessorState] = seen["estimates"]
    assert {s.stalled_since for s in stalled} == {seen["stalled_since"]}, stalled
    assert all(s.stalled_since is None for s in seen["estimates after"])
    said = [r.getMessage() for r in caplog.records]
    assert any("stalled: the handler fails on every change since" in m for m in said), said
    assert any("no longer stalled" in m for m in said)
    assert any("an outage, not a poison" in m for m in said)


def test_one_poison_in_a_batch_of_ten_is_set_aside_alone_with_the_defaults() -> None:
    clock = VirtualClock()
    feed, documents = InMemoryFeed(partitions=1, clock=clock.now), InMemoryDocuments()
    ids = written(feed, keys=10, per_key=1)
    downstream, parked = Downstream(clock, poison={ids[6]}), list[FailedBatch]()

    async def main() -> None:
        async with processor(feed, documents, downstream, parked):
            await until(lambda: len(downstream.taken) == 9 and bool(parked), 600, clock)

    clock.run(main())
    assert [[c["id"] for c in batch.changes] for batch in parked] == [[ids[6]]]
    assert parked[0].attempt == 5  # set_aside_after's default
    assert downstream.taken == [item for item in ids if item != ids[6]]


def key_in(feed: InMemoryFeed, partition: int, prefix: str) -> str:
    """A partition key (``<prefix><n>``) that lies in the feed's ``partition``-th range."""
    rng = feed.ranges()[partition].range
    return next(f"{prefix}{n}" for n in range(1000) if rng.min <= epk_of(f"{prefix}{n}") < rng.max)


def test_a_lone_change_is_a_poison_when_another_lease_of_the_instance_succeeds_meanwhile() -> None:
    """A batch of one change on its lease, nothing behind it; the instance's other lease is
    handled meanwhile: the lone change is a poison, set aside after its attempts."""
    clock = VirtualClock()
    feed, documents = InMemoryFeed(partitions=2, clock=clock.now), InMemoryDocuments()
    lone, other = key_in(feed, 0, "lone"), key_in(feed, 1, "other")
    feed.upsert({"id": lone, "pk": lone})
    downstream, parked = Downstream(clock, poison={lone}), list[FailedBatch]()

    async def main() -> None:
        async with processor(feed, documents, downstream, parked):
            for n in range(60):
                if parked:
                    return
                feed.upsert({"id": f"{other}-{n}", "pk": other})  # the other lease's work
                await asyncio.sleep(10)
            raise AssertionError("the lone poison was not set aside within ten minutes")

    clock.run(main())
    assert [[c["id"] for c in batch.changes] for batch in parked] == [[lone]]
    assert parked[0].attempt == 5


def test_a_lone_change_on_a_quiet_instance_waits_stalled_until_a_later_change_tells() -> None:
    """One lease, one change that always fails: nothing tells a poison from an outage, so it
    is not set aside; once a change is written behind it, the probe (that change, handed over
    alone) succeeds: the lone change is a poison, set aside, and the probe not given again."""
    clock = VirtualClock()
    feed, documents = InMemoryFeed(partitions=1, clock=clock.now), InMemoryDocuments()
    downstream, parked = Downstream(clock, poison={"lone"}), list[FailedBatch]()
    feed.upsert({"id": "lone", "pk": "a"})

    async def main() -> None:
        async with processor(feed, documents, downstream, parked, max_items=1) as cfp:
            await asyncio.sleep(900)
            assert parked == [] and cfp.stalled_since is not None
            feed.upsert({"id": "later", "pk": "b"})
            await until(lambda: bool(parked) and downstream.taken == ["later"], 120, clock)
            await asyncio.sleep(30)

    clock.run(main())
    assert [[c["id"] for c in batch.changes] for batch in parked] == [["lone"]]
    assert downstream.taken == ["later"]  # handled once: as the probe


def test_a_transient_error_is_never_set_aside_and_the_batch_comes_again() -> None:
    clock = VirtualClock()
    feed, documents = InMemoryFeed(partitions=1, clock=clock.now), InMemoryDocuments()
    ids = written(feed, keys=3, per_key=1)
    parked: list[FailedBatch] = []
    calls: list[float] = []

    class Throttled(Downstream):
        async def handle(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
            calls.append(clock.elapsed)
            if clock.elapsed < 900 and any(c["id"] == ids[1] for c in changes):
                raise TransientError("throttled: again later") from ConnectionError("429")
            await super().handle(context, changes)

    downstream = Throttled(clock)

    async def main() -> None:
        async with processor(feed, documents, downstream, parked):
            await until(lambda: len(downstream.taken) == 3, 1200, clock)

    clock.run(main())
    assert parked == []
    assert downstream.taken == ids
    assert max(b - a for a, b in itertools.pairwise(calls)) <= 60  # capped back-off


def test_the_sync_processor_sets_nothing_aside_in_an_outage_either() -> None:
    """The sync shell, in real time with short delays: every change of the batch fails for a
    while (set_aside_after=2: the batch is taken apart several times meanwhile)."""
    import time

    feed, documents = InMemoryFeed(1), InMemoryDocuments()
    ids = [f"d{n}" for n in range(6)]
    for item in ids:
        feed.upsert({"id": item, "pk": item})
    parked: list[FailedBatch] = []
    taken: list[str] = []
    back_at = time.monotonic() + 0.6

    def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        if time.monotonic() < back_at:
            raise ConnectionError("down")
        taken.extend(c["id"] for c in changes)

    run(
        "sync",
        feed,
        documents,
        lambda: set(taken) >= set(ids),
        handler=handle,
        set_aside=parked.append,
        set_aside_after=2,
        min_retry_delay=0.01,
        max_retry_delay=0.05,
        start_from="beginning",
    )
    assert parked == [] and sorted(taken) == ids


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_outage_that_ends_while_a_batch_is_taken_apart_sets_nothing_aside(
    flavour: Flavour,
) -> None:
    """The handler fails on its first six calls (an outage) and works from the seventh: the
    batch of 6 fails whole, then its first half is taken apart down to single changes that each
    fail alone -- before the handler works again on the second half. Those three failed in the
    outage, not as poisons: each is given once more alone, handled, and nothing is set aside."""
    feed, documents = InMemoryFeed(1), InMemoryDocuments()
    ids = [f"d{n}" for n in range(6)]
    for item in ids:
        feed.upsert({"id": item, "pk": item})
    parked: list[FailedBatch] = []
    taken: list[str] = []
    calls = itertools.count(1)

    def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        if next(calls) < 7:
            raise ConnectionError("down")
        taken.extend(c["id"] for c in changes)

    run(
        flavour,
        feed,
        documents,
        lambda: set(taken) >= set(ids),
        handler=handle,
        set_aside=parked.append,
        set_aside_after=1,
        start_from="beginning",
    )
    assert parked == [] and sorted(taken) == ids
