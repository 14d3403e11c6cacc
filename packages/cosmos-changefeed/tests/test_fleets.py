"""Fleets in virtual time (``SimulatedFleet``: the real aio processor over a lease container
that answers as Cosmos DB does -- a latency, pages, per-partition budgets, 429s -- with handler
and feed-read times drawn from a seeded distribution): beside .NET instances, through a
balancing move, through a start and a checkpoint under 429s, and a lease that expired under
429s warned of. The scenarios are the bench's
(``python -m bench.changefeed_scale``), seeded alike, so a figure published there is one a
test holds."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from azure.cosmos.exceptions import CosmosHttpResponseError

from cosmos_changefeed import CheckpointPolicy
from cosmos_changefeed.testing import SimulatedFleet, Timing, VirtualClock

T = TypeVar("T")
#: A fixed start: lease times, ``_ts`` included (whole seconds), are the same at every run.
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
ACQUIRE, RENEW, EXPIRY = 13.0, 17.0, 60.0  # .NET's defaults, the processor's
HOLD, LIMIT = 2 * ACQUIRE, 40 * ACQUIRE


def run(scenario: Coroutine[Any, Any, T], clock: VirtualClock) -> T:
    return clock.run(scenario)


async def add_mixed(fleet: SimulatedFleet, count: int) -> None:
    """``count`` instances, half under .NET's balancing, started within the same second."""
    await asyncio.gather(
        fleet.add(count - count // 2, dotnet=True), fleet.add(count // 2, dotnet=False)
    )


@pytest.mark.parametrize(("leases", "instances"), [(100, 10), (500, 50)])
def test_a_mixed_fleet_is_even_within_five_acquire_intervals_cold_and_after_a_scale_out(
    leases: int, instances: int
) -> None:
    """Half the instances balance as .NET's processor does (never giving a lease back, one
    steal a round), half by this package's fair share, on one lease container, changes written
    all along: within 5 acquire intervals of a cold start, and of +50 % instances, every lease
    is processed by the instance the store names and the instances hold within one lease of
    each other. (Before the fair share took from owners that do not hand over, 100 x 10 ended
    at 55/10/10/10/10 on the .NET side and 1 each on the other, and stayed there.)"""
    clock = VirtualClock(START)

    async def scenario() -> tuple[float | None, float | None, SimulatedFleet]:
        fleet = SimulatedFleet(
            clock, partitions=leases, seed=leases + instances, start_from="beginning"
        )
        writer = asyncio.create_task(fleet.write(leases / 30, 10**9))
        await add_mixed(fleet, instances)
        cold = await fleet.until_even(hold=HOLD, limit=LIMIT)
        await add_mixed(fleet, instances // 2)
        out = await fleet.until_even(hold=HOLD, limit=LIMIT)
        writer.cancel()
        for _ in range(60):  # what was written last, handled
            if not fleet.undelivered():
                break
            await fleet.clock_sleep(5)
        await fleet.close()
        return cold, out, fleet

    cold, out, fleet = run(scenario(), clock)
    assert cold is not None and cold <= 5 * ACQUIRE, f"cold start: even after {cold}s"
    assert out is not None and out <= 5 * ACQUIRE, f"scale-out: even after {out}s"
    assert fleet.failures_seen() == [], "two instances inside one lease's handler"
    given = fleet.given_twice()
    assert given.by_move == given.from_dotnet, f"given twice by this package's moves: {given}"
    assert fleet.undelivered() == []


async def _mixed_cold_start(clock: VirtualClock, seed: int) -> float | None:
    """500 leases, 50 instances half .NET's started within a second, changes written all
    along: how long until even (``until_even``)."""
    fleet = SimulatedFleet(clock, partitions=500, seed=seed, start_from="beginning")
    writer = asyncio.create_task(fleet.write(500 / 30, 10**9))
    await add_mixed(fleet, 50)
    cold = await fleet.until_even(hold=HOLD, limit=LIMIT)
    writer.cancel()
    await fleet.close()
    return cold


@pytest.mark.parametrize("seed", [2, 15, 19])
def test_a_mixed_fleet_cold_start_under_other_seeds_is_even_within_five_acquire_intervals(
    seed: int,
) -> None:
    """The mixed fleet's cold start of 500 x 50 under seeds other than the published one
    (`python -m bench.changefeed_scale --mixed-seeds 20`). .NET instances short of their
    share take the available leases in the store's order all at once, and while a .NET
    instance that holds none is in no listing every .NET instance aims at one lease more than
    its share: the leases relayed for the one short of its share went to the others. The
    relay now counts what the .NET instances miss of .NET's own target, the leases available
    not subtracted, and takes from .NET owners beyond their fair share (before: 7.1 intervals
    under seed 2, 6.2 under seed 15). Seed 19: the leases available were all left to the .NET
    instances short of their targets and the fair-share owners at theirs had no surplus, so an
    instance of this package's with a couple of leases took none for rounds; at the fleet's
    first start it now asks for one lease at a time, under half its share (before: 6.2
    intervals)."""
    clock = VirtualClock(START)
    cold = run(_mixed_cold_start(clock, seed), clock)
    assert cold is not None and cold <= 5 * ACQUIRE, f"cold start: even after {cold}s"


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known gap (docs/benchmarks.md, `python -m bench.changefeed_scale --mixed-seeds 20`): "
    "a cold start of 500 x 50 half .NET's is even within 5 acquire intervals under 16 of 20 "
    "seeds; under seed 18 (6.3 intervals) .NET instances short of their share take the "
    "leases available in the store's order, all at once, so one of them gets its share a "
    "round, and two that hold none steal the same lease",
)
def test_a_mixed_fleet_cold_start_under_seed_18_is_even_within_five_acquire_intervals() -> None:
    """The cold start of 500 x 50 half .NET's under seed 18, the worst of the 20 seeds:
    strict xfail, so a fix that evens it in time turns this into a failure to promote."""
    clock = VirtualClock(START)
    cold = run(_mixed_cold_start(clock, 18), clock)
    assert cold is not None and cold <= 5 * ACQUIRE, f"cold start: even after {cold}s"


def test_balancing_moves_hand_over_and_a_crash_gives_again_only_what_followed_a_checkpoint() -> (
    None
):
    """A busy feed (a change per lease every 5 s, a handler of half a second, 2 s at the 99th
    percentile: batches are in flight when leases move; a checkpoint every 5 batches): a
    scale-out, a scale-in and a crash. The moves are hand-overs -- no change given twice by
    one (the batches handled since the last checkpoint are checkpointed by the hand-over),
    never two instances inside one lease's handler -- and the crash's leases, taken once
    expired, give again only what followed the dead owner's last checkpoint."""
    clock = VirtualClock(START)

    async def scenario() -> SimulatedFleet:
        fleet = SimulatedFleet(
            clock,
            partitions=24,
            seed=5,
            handler_time=Timing(0.5, 2.0),
            checkpoint=CheckpointPolicy(batches=5),
        )
        writer = asyncio.create_task(fleet.write(24 / 5, 10**9))
        await fleet.add(4)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        await fleet.add(4)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        await fleet.stop(sorted(fleet.instances)[:2])
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        await fleet.crash(sorted(fleet.instances)[:2])
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        writer.cancel()
        await fleet.clock_sleep(2 * EXPIRY)
        await fleet.close()
        return fleet

    fleet = run(scenario(), clock)
    moved = [m for m in fleet.container.moves if m.how in ("handed over", "released")]
    assert moved, "no lease was handed over"
    assert [m for m in fleet.container.moves if m.how == "stolen"] == []
    given = fleet.given_twice()
    assert given.by_move == 0 and given.same_instance == 0, given
    assert given.after_expiry > 0, "the crash gave nothing again: no batch was in flight"
    assert given.behind_checkpoint == 0, "the crash's leases went back behind a checkpoint"
    assert fleet.failures_seen() == [], "two instances inside one lease's handler"
    assert fleet.undelivered() == []


def test_a_start_waits_through_429s_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """A settled fleet's lease container given a quarter of the request units it needs: five
    instances more start. azure-cosmos's own retries (9, over up to 30 s) are not enough for
    every request of a start; the start waits and tries again, saying so, and never fails (it
    failed before: an orchestrator restarted the instance, into the same 429s)."""
    clock = VirtualClock(START)
    caplog.set_level(logging.WARNING, logger="cosmos_changefeed")

    async def scenario() -> SimulatedFleet:
        fleet = SimulatedFleet(clock, partitions=100, seed=310)
        await fleet.add(10)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        needed = await fleet.request_units(4 * RENEW) + 100 / 60 * 10
        fleet.set_budget(needed / 4)
        writer = asyncio.create_task(fleet.write(100 / 60, 10**9))
        await fleet.add(5)
        await fleet.clock_sleep(10 * ACQUIRE)
        writer.cancel()
        await fleet.close()
        return fleet

    fleet = run(scenario(), clock)
    assert fleet.throttled() > 1000, "the lease container hardly throttled"
    assert fleet.start_failures == []
    waited = [r for r in caplog.records if "starting: the lease container throttles" in r.msg]
    assert waited, "no start had to wait"


@pytest.mark.parametrize("seconds", [20.0, 150.0])
def test_a_batch_is_given_again_for_a_429_only_if_its_lease_expired_meanwhile(
    seconds: float,
) -> None:
    """One instance's requests all meet 429s for ``seconds`` (as a physical partition that
    holds its leases throttles while the others' get through), changes written all along. A
    checkpoint that met the 429s is written again before the next batch: after a refusal
    shorter than the expiration interval no change is given twice. After a longer one its
    leases expire (no renewal got through either), the others take them and give again what
    it handled since its last checkpoint -- after an expiry only: never by a balancing move,
    never by the same instance, never behind a checkpoint; nothing lost."""
    clock = VirtualClock(START)

    async def scenario() -> SimulatedFleet:
        fleet = SimulatedFleet(clock, partitions=12, seed=11)
        await fleet.add(3)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        writer = asyncio.create_task(fleet.write(12 / 2, 10**9))
        await fleet.clock_sleep(30)
        refused = fleet.instances["i000"].store
        refused.refused = True
        await fleet.clock_sleep(seconds)
        refused.refused = False
        await fleet.clock_sleep(3 * EXPIRY)
        writer.cancel()
        await fleet.clock_sleep(2 * EXPIRY)
        await fleet.close()
        return fleet

    fleet = run(scenario(), clock)
    assert fleet.throttled() > 0
    given = fleet.given_twice()
    assert given.by_move == 0 and given.same_instance == 0 and given.behind_checkpoint == 0
    if seconds < EXPIRY:
        assert given.total == 0, given
    else:
        assert given.after_expiry > 0, "the refusal outlasted the expiry: its leases moved"
    assert fleet.failures_seen() == []
    assert fleet.undelivered() == []
    assert fleet.container.regressions == []


#: The warning of leases that expired under throttling (``ProcessorBase._expired_throttled``).
EXPIRED_UNDER_THROTTLING = "expired under throttling"


def _refused_twice(seconds: float) -> SimulatedFleet:
    """12 leases on 3 instances, changes written all along; one instance's requests all meet
    429s for ``seconds``, twice, the fleet left to even out between (the instance takes its
    share back)."""
    clock = VirtualClock(START)

    async def scenario() -> SimulatedFleet:
        fleet = SimulatedFleet(clock, partitions=12, seed=11)
        await fleet.add(3)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        writer = asyncio.create_task(fleet.write(12 / 2, 10**9))
        refused = fleet.instances["i000"].store
        for _ in range(2):
            await fleet.clock_sleep(30)
            refused.refused = True
            await fleet.clock_sleep(seconds)
            refused.refused = False
            assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        writer.cancel()
        await fleet.close()
        return fleet

    return run(scenario(), clock)


def test_leases_that_expire_under_throttling_are_warned_of_once_an_expiration_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An instance whose renewals meet 429s for longer than the expiration interval loses its
    leases (they expire under it; the others take them): it says so as a WARNING that names
    lease_expiration_interval and the request units -- one per expiration interval, not one
    per lease (each loss is an INFO line of its own). Twice refused, twice warned."""
    caplog.set_level(logging.INFO, logger="cosmos_changefeed")
    fleet = _refused_twice(150.0)
    assert fleet.throttled() > 0
    lost = [r for r in caplog.records if r.levelno == logging.INFO and " lost (" in r.getMessage()]
    warned = [r for r in caplog.records if EXPIRED_UNDER_THROTTLING in r.getMessage()]
    assert len(lost) >= 4, f"the refused instance lost {len(lost)} lease(s)"
    assert len(warned) == 2, [r.getMessage() for r in warned]
    for record in warned:
        assert record.levelno == logging.WARNING
        message = record.getMessage()
        assert "instance i000" in message
        assert "lease_expiration_interval (60s)" in message
        assert "request units" in message
    assert "since its last such warning" in warned[1].getMessage()


def test_a_refusal_shorter_than_the_expiration_interval_is_not_warned_of_as_an_expiry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same instance refused for 20 s: its leases never expire, nothing is lost, and no
    warning of an expiry under throttling is said (its failed renewals are)."""
    caplog.set_level(logging.INFO, logger="cosmos_changefeed")
    fleet = _refused_twice(20.0)
    assert fleet.throttled() > 0
    assert [r for r in caplog.records if " lost (" in r.getMessage()] == []
    assert [r for r in caplog.records if EXPIRED_UNDER_THROTTLING in r.getMessage()] == []


@pytest.mark.parametrize("fraction", [0.25, None])
def test_a_fleet_short_of_request_units_is_told_why_its_leases_expire(
    fraction: float | None, caplog: pytest.LogCaptureFixture
) -> None:
    """20 leases on 4 instances, settled; then given a quarter of the request units it needs
    (as the bench's 429 runs), two instances more, changes written all along, for ten
    minutes: renewals meet 429s past the SDK's retries, now and then a lease expires under
    its owner and moves, and each such loss is warned of (no instance twice within an
    expiration interval). The same fleet with the request units it needs (None): no lease
    expires, no such warning."""
    clock = VirtualClock(START)
    caplog.set_level(logging.INFO, logger="cosmos_changefeed")

    async def scenario() -> SimulatedFleet:
        fleet = SimulatedFleet(clock, partitions=20, seed=64)
        await fleet.add(4)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        if fraction is not None:
            needed = await fleet.request_units(4 * RENEW) + 20 / 60 * 10
            fleet.set_budget(needed * fraction)
        writer = asyncio.create_task(fleet.write(20 / 60, 10**9))
        await fleet.add(2)
        await fleet.clock_sleep(10 * EXPIRY)
        writer.cancel()
        await fleet.close()
        return fleet

    fleet = run(scenario(), clock)
    messages = [r.getMessage() for r in caplog.records]
    lost = [m for m in messages if " lost (" in m]
    warned = [m for m in messages if EXPIRED_UNDER_THROTTLING in m]
    if fraction is None:
        assert fleet.throttled() == 0
        assert warned == []
        return
    assert fleet.throttled() > 1000, "the lease container hardly throttled"
    assert lost, "no lease expired under throttling"
    assert warned, "leases expired under throttling, unsaid"
    named = {
        t for m in warned for t in re.findall(r"lease\(s\) ([\d, ]+) expired", m)[0].split(", ")
    }
    assert named <= {re.findall(r"lease (\d+) lost", m)[0] for m in lost}
    ago = [float(s) for m in warned for s in re.findall(r"last such warning, (\d+)s ago", m)]
    assert all(seconds >= EXPIRY for seconds in ago), ago


#: The bench's 429 runs (``bench.changefeed_scale.measure_throttled``): a settled fleet given a
#: quarter of the request units it needs, then +50 % instances and, once even, half of them
#: stopped, changes written all along (one per lease per minute).
QUARTER_EVEN_WITHIN = 40


def _quarter_budget(leases: int, instances: int) -> tuple[float | None, float | None, Any]:
    clock = VirtualClock(START)

    async def scenario() -> tuple[float | None, float | None, SimulatedFleet]:
        fleet = SimulatedFleet(clock, partitions=leases, seed=leases * 3 + instances)
        await fleet.add(instances)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        rate = leases / 60
        needed = await fleet.request_units(4 * RENEW) + rate * 10
        fleet.set_budget(needed / 4)
        writer = asyncio.create_task(fleet.write(rate, 10 * EXPIRY))
        limit = QUARTER_EVEN_WITHIN * ACQUIRE
        await fleet.add(instances // 2)
        out = await fleet.until_even(hold=HOLD, limit=limit)
        await fleet.stop(sorted(fleet.instances)[::2])
        back = await fleet.until_even(hold=HOLD, limit=limit)
        writer.cancel()
        await fleet.close()
        return out, back, fleet

    return run(scenario(), clock)


def test_a_fleet_at_a_quarter_of_the_request_units_it_needs_evens_out_at_the_default_expiry() -> (
    None
):
    """100 leases on 10 instances at .NET's default intervals (expiry 60 s), settled, given a
    quarter of the request units they need: 5 instances more, then half of them stopped. Its
    renewals at the last safe moment (from the time they take, azure-cosmos's retries
    included), its listings seldom, its releases tried until the lease would expire, it is
    even within 40 acquire intervals of each change. (Renewed at two thirds of the expiration
    interval, a failed renewal tried again after 4 s, it asked for more than the budget: leases
    expired under their owners all along, and it was not even within 200.)"""
    out, back, fleet = _quarter_budget(100, 10)
    assert fleet.throttled() > 1000, "the lease container hardly throttled"
    assert out is not None, f"not even within {QUARTER_EVEN_WITHIN} acquire intervals of +5"
    assert back is not None, f"not even within {QUARTER_EVEN_WITHIN} acquire intervals of -50 %"
    given = fleet.given_twice()
    assert given.by_move == 0 and given.same_instance == 0 and given.behind_checkpoint == 0
    assert fleet.failures_seen() == [], "two instances inside one lease's handler"
    assert fleet.late_batches == [], "a batch handed over past the expiry bound"
    assert fleet.container.regressions == []


def test_unthrottled_leases_are_renewed_each_renew_interval() -> None:
    """A settled fleet whose lease container never throttles renews each lease once per renew
    interval (17 s) and lists each acquire interval, as before the renewals under 429s moved
    to the last safe moment: 20 leases on 4 instances, over eight renew intervals."""
    clock = VirtualClock(START)

    async def scenario() -> tuple[int, int, SimulatedFleet]:
        fleet = SimulatedFleet(clock, partitions=20, seed=96)
        await fleet.add(4)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        writes, lists = fleet.writes()["renewal"], fleet.container.total(("list",))
        await fleet.clock_sleep(8 * RENEW)
        renewed = fleet.writes()["renewal"] - writes
        listed = fleet.container.total(("list",)) - lists
        await fleet.close()
        return renewed, listed, fleet

    renewed, listed, fleet = run(scenario(), clock)
    assert fleet.throttled() == 0
    assert 20 * 8 - 20 <= renewed <= 20 * 8 + 20, renewed
    assert listed >= 4 * (8 * RENEW // ACQUIRE) - 4, listed
    for instance in fleet.instances.values():
        assert instance.processor._renew_interval() == RENEW


#: How long one renewal takes in ``test_a_renewal_at_the_last_safe_moment_lands_before_expiry``:
#: azure-cosmos retrying its 429s (after each, the retry-after the service gave).
SDK_RETRYING = 12.0


def test_a_renewal_at_the_last_safe_moment_that_meets_429s_still_lands_before_expiry() -> None:
    """One instance's lease writes each take 12 s (azure-cosmos retrying the 429s it meets),
    and every other one of a lease's renewals fails after those 12 s (429 past the retries):
    its renewals, postponed to the last safe moment, leave room for a renewal that fails and
    one more -- 2 x 12 s, the wait before it and the clocks' skew before expiry -- so none of
    its leases expires, and the other instance takes none. (Renewed at two thirds of the
    expiration interval whatever the renewals' time, 40 + 12 + 4 + 12 s: its leases expired
    and moved.)"""
    clock = VirtualClock(START)

    async def scenario() -> SimulatedFleet:
        fleet = SimulatedFleet(clock, partitions=8, seed=12)
        await fleet.add(2)
        assert await fleet.until_even(hold=HOLD, limit=LIMIT) is not None
        store = fleet.instances["i000"].store
        replace, failed = store.replace, set[str]()

        async def throttled(document: Any, partition_key: str, etag: str | None) -> Any:
            await asyncio.sleep(SDK_RETRYING)
            token = str(document.get("LeaseToken"))
            if token not in failed:
                failed.add(token)
                raise CosmosHttpResponseError(  # type: ignore[no-untyped-call]
                    status_code=429, message="Request rate is large"
                )
            failed.discard(token)
            return await replace(document, partition_key, etag)

        store.replace = throttled  # type: ignore[method-assign]
        moves = len(fleet.container.moves)
        await fleet.clock_sleep(8 * EXPIRY)
        assert [m for m in fleet.container.moves[moves:] if m.how == "expired"] == []
        await fleet.close()
        return fleet

    fleet = run(scenario(), clock)
    assert fleet.container.writes["renewal"] > 0
