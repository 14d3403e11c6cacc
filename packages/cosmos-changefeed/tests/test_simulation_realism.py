"""The simulation does not flatter: each piece of its realism catches a product that is wrong
where a flattering harness -- the one the package had, with handlers and reads that take no
time, a change counted when handed over, an idle feed, one budget for the whole container --
let it pass. Each test runs a deliberately broken processor (the wrong behaviour patched into
our own code, never into the SDK's) under the harness as it was and as it is, and the real one
under the harness as it is."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

import cosmos_changefeed._processing as processing
from cosmos_changefeed._balancing import Round, plan_round
from cosmos_changefeed.aio._worker_async import LeaseWorker
from cosmos_changefeed.testing import SimulatedFleet, Timing, VirtualClock

T = TypeVar("T")
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
ACQUIRE, RENEW, EXPIRY = 13.0, 17.0, 60.0
HOLD, LIMIT = 2 * ACQUIRE, 40 * ACQUIRE
NO_TIME = Timing(0.0, 0.0)


def run(scenario: Callable[[VirtualClock], Coroutine[Any, Any, T]]) -> T:
    clock = VirtualClock(START)
    return clock.run(scenario(clock))


@pytest.fixture
def stealing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The balancing before hand-overs: a newcomer takes a lease from under its owner."""

    def plan(*args: Any, **kwargs: Any) -> Round:
        round_ = plan_round(*args, **kwargs)
        round_.candidates += round_.requests
        round_.steals += len(round_.requests)
        round_.requests = []
        return round_

    monkeypatch.setattr(processing, "plan_round", plan)
    yield


@pytest.fixture
def checkpointing_first(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A processor that checkpoints a batch when it hands it over, not once it is handled."""
    call = LeaseWorker._call

    async def first(self: LeaseWorker, context: Any, changes: list[dict[str, Any]]) -> None:
        if context.continuation is not None:
            await self._checkpoint(context.continuation)
        await call(self, context, changes)

    monkeypatch.setattr(LeaseWorker, "_call", first)
    yield


async def scale_out(clock: VirtualClock, *, times: Timing, read: Timing) -> SimulatedFleet:
    """Three instances, three more, a busy feed (a change per lease a second)."""
    fleet = SimulatedFleet(clock, partitions=12, seed=3, handler_time=times, read_time=read)
    writer = asyncio.create_task(fleet.write(12, 10**9))
    await fleet.add(3)
    assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
    await fleet.add(3)
    assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
    writer.cancel()
    await fleet.close()
    return fleet


def test_handler_time_catches_two_instances_inside_one_leases_handler(stealing: None) -> None:
    """Handlers that take time: a lease taken from under its owner while its batch is in
    flight puts two instances inside its handler -- seen. With handlers that take no time the
    same steals are never seen."""
    flattering = run(lambda clock: scale_out(clock, times=NO_TIME, read=NO_TIME))
    assert flattering.failures_seen() == []
    real = run(lambda clock: scale_out(clock, times=Timing(0.3, 1.0), read=Timing(0.01, 0.05)))
    assert real.failures_seen() != []


def test_handler_time_finds_no_overlap_in_the_real_processor() -> None:
    fleet = run(lambda clock: scale_out(clock, times=Timing(0.3, 1.0), read=Timing(0.01, 0.05)))
    assert fleet.failures_seen() == []
    assert fleet.given_twice().total == 0


async def crash_in_flight(clock: VirtualClock) -> SimulatedFleet:
    """Two instances, slow handlers, a busy feed; one killed while its batches are in flight."""
    fleet = SimulatedFleet(clock, partitions=8, seed=4, handler_time=Timing(2.0, 5.0))
    writer = asyncio.create_task(fleet.write(8, 10**9))
    await fleet.add(2)
    assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
    await fleet.crash(["i000"])
    await fleet.clock_sleep(EXPIRY + 3 * ACQUIRE)
    writer.cancel()
    await fleet.clock_sleep(EXPIRY)
    await fleet.close()
    return fleet


def test_counting_a_change_when_its_handler_completes_catches_a_lost_batch(
    checkpointing_first: None,
) -> None:
    """A processor that checkpoints a batch before its handler completes loses the batches in
    flight at a crash: counted when handed over they look delivered; counted when the handler
    completes they are missing."""
    fleet = run(crash_in_flight)
    assert fleet.undelivered(handed=True) == []  # the flattering count
    assert fleet.undelivered() != []


def test_counting_on_completion_finds_nothing_lost_in_the_real_processor() -> None:
    fleet = run(crash_in_flight)
    assert fleet.undelivered() == []


@pytest.fixture
def checkpointing_under_429s(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A processor that, while the lease container throttles, still writes a checkpoint per
    batch (rather than with the lease's renewal)."""
    monkeypatch.setattr(processing.ProcessorBase, "_throttled", property(lambda self: False))
    yield


async def throttled_writes(clock: VirtualClock, *, busy: bool) -> float:
    """40 leases on 4 instances given half the request units their renewals and listings need:
    the lease writes asked for (429s and azure-cosmos's retries included) per lease per
    second over 5 minutes, the feed busy (a change per lease every 2 s) or idle."""
    fleet = SimulatedFleet(clock, partitions=40, seed=9)
    await fleet.add(4)
    assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
    fleet.set_budget(await fleet.request_units(4 * RENEW) / 2)
    writer = asyncio.create_task(fleet.write(20, 10**9)) if busy else None
    before = fleet.container.total(("replace",))
    await fleet.clock_sleep(300)
    asked = (fleet.container.total(("replace",)) - before) / 300 / 40
    if writer is not None:
        writer.cancel()
    await fleet.close()
    return asked


def test_charging_checkpoints_under_a_busy_feed_catches_a_checkpoint_per_batch_under_429s(
    checkpointing_under_429s: None,
) -> None:
    """Checkpoints are lease writes: a processor that writes one per batch while the lease
    container throttles asks it for far more under a busy feed -- unseen with an idle feed,
    where the bench's figures were measured."""
    idle = run(lambda clock: throttled_writes(clock, busy=False))
    busy = run(lambda clock: throttled_writes(clock, busy=True))
    assert busy > 2 * idle, (idle, busy)


def test_under_429s_a_busy_feed_asks_for_at_most_twice_the_writes_of_an_idle_one() -> None:
    idle = run(lambda clock: throttled_writes(clock, busy=False))
    busy = run(lambda clock: throttled_writes(clock, busy=True))
    assert busy <= 2 * idle, (idle, busy)


def test_a_listing_is_a_cross_partition_query_each_page_charged_to_its_partition() -> None:
    """250 documents in 2 physical partitions, pages of 100: a page at least per partition,
    each a request of its own (3 request units and 0.1 per document), each partition's charges
    on its own half of the budget -- one that ran out answers 429 while the other admits."""
    from cosmos_changefeed.testing import SimulatedLeaseContainer, SimulatedLeaseStore

    async def scenario(clock: VirtualClock) -> tuple[int, float, int]:
        container = SimulatedLeaseContainer(clock, request_units=1000.0, physical_partitions=2)
        store = SimulatedLeaseStore(container, "me")
        for n in range(250):
            container.documents.create({"id": f"p..{n}"}, f"p..{n}")
        listed = await store.list_documents("p..")
        requests, units = container.requests[("me", "list")], container.units
        container.budgets[0].charge(100_000)  # the first partition's budget run out
        hot = next(n for n in range(250) if container.partition_of(f"p..{n}") == 0)
        cold = next(n for n in range(250) if container.partition_of(f"p..{n}") == 1)
        assert await store.read(f"p..{cold}", f"p..{cold}") is not None
        with pytest.raises(Exception, match="429"):
            await store.read(f"p..{hot}", f"p..{hot}")
        return len(listed), units, requests

    listed, units, requests = run(scenario)
    assert listed == 250
    assert requests >= 4  # two partitions of about 125: two pages each
    assert units == pytest.approx(3.0 * requests + 0.1 * 250)
