"""The processor at scale and under throttling, in virtual time (``VirtualClock``): a fleet
of aio processors -- the real balancing, lease protocol, renewals and checkpoints -- over the
in-memory feed and a lease container with a latency and, past a budget of request units, 429s
(``SimulatedFleet``). No server; lease intervals of seconds pass in microseconds, so a
scenario of minutes takes a second or two. The bench (``python -m bench.changefeed_scale``)
gives the figures at 100-2,000 leases and 10-150 instances."""

from __future__ import annotations

import datetime as dt
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from cosmos_changefeed.testing import SimulatedFleet, SimulatedLeaseContainer, VirtualClock

WRITE_RU = SimulatedLeaseContainer.WRITE_UNITS

T = TypeVar("T")
ACQUIRE, RENEW, EXPIRY = 13.0, 17.0, 60.0  # .NET's defaults, the processor's
#: A fixed start: lease times, ``_ts`` included (whole seconds), are the same at every run.
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def run(scenario: Coroutine[Any, Any, T], clock: VirtualClock) -> T:
    return clock.run(scenario)


def test_a_scale_out_is_spread_evenly_within_three_acquire_intervals() -> None:
    """60 leases on 6 instances, 3 more join (+50 %): within 3 acquire intervals every
    instance holds 6 or 7 leases, processes what the store says it owns, and about the leases
    that must move moved (no thrashing)."""
    clock = VirtualClock(START)

    async def scenario() -> tuple[float | None, dict[str, int], int]:
        fleet = SimulatedFleet(clock, partitions=60, seed=1)
        await fleet.add(6)
        assert await fleet.until_even(hold=3 * ACQUIRE, limit=30 * ACQUIRE) is not None
        moves = len(fleet.container.moves)
        joined = await fleet.add(3)
        took = await fleet.until_even(hold=3 * ACQUIRE, limit=30 * ACQUIRE)
        taken = [m for m in fleet.container.moves[moves:] if m.to is not None]
        spread = fleet.spread()
        await fleet.close()
        return took, spread, len(taken) - sum(spread[name] for name in joined)

    took, spread, extra_moves = run(scenario(), clock)
    assert took is not None, "not even within 30 acquire intervals"
    assert took <= 3 * ACQUIRE, f"even after {took / ACQUIRE:.1f} acquire intervals"
    assert max(spread.values()) - min(spread.values()) <= 1, spread
    assert extra_moves <= 3, f"{extra_moves} leases moved beyond what the newcomers hold"


@pytest.fixture(scope="module")
def throttled() -> SimulatedFleet:
    """40 leases on 4 instances, settled; then for ten minutes changes written (one a lease a
    minute) while the lease container's budget is half what the fleet needs (its settled use
    measured, plus the checkpoints of those changes); then the budget lifted and the fleet
    left to catch up."""
    clock = VirtualClock(START)

    async def scenario() -> SimulatedFleet:
        fleet = SimulatedFleet(clock, partitions=40, seed=7, start_from="beginning")
        await fleet.add(4)
        assert await fleet.until_even(hold=3 * ACQUIRE, limit=30 * ACQUIRE) is not None
        per_second = 40 / 60
        needed = await fleet.request_units(4 * RENEW) + per_second * WRITE_RU
        fleet.set_budget(needed / 2)
        await fleet.write(per_second, 600)
        fleet.set_budget(None)
        for _ in range(60):
            if not fleet.undelivered():
                break
            await fleet.clock_sleep(5)
        await fleet.clock_sleep(2 * EXPIRY)
        await fleet.close()
        return fleet

    return run(scenario(), clock)


def test_under_429s_no_two_instances_process_a_lease_past_the_expiry_bound(
    throttled: SimulatedFleet,
) -> None:
    assert throttled.throttled() > 1000, "the lease container hardly throttled"
    assert throttled.late_batches == [], (
        "batches handed over more than the expiration interval after the instance's last "
        f"write of their lease: {throttled.late_batches[:5]}"
    )


def test_under_429s_no_checkpoint_is_lost(throttled: SimulatedFleet) -> None:
    assert throttled.throttled() > 1000, "the lease container hardly throttled"
    assert throttled.undelivered() == []
    assert throttled.container.regressions == []
    given_twice = {key: who for key, who in throttled.deliveries.items() if len(who) > 1}
    assert given_twice == {}, "changes given again: a handled batch's checkpoint was lost"


@pytest.mark.parametrize("keep_start", [True, False])
def test_a_lease_taken_before_its_first_checkpoint_starts_where_its_first_owner_did(
    keep_start: bool,
) -> None:
    """An instance starts from "now", reads its leases (nothing yet) and dies before it reads
    the change written next; an instance started later takes the leases as they expire. Its
    own "now" is after the change: the change is delivered only because the first owner kept
    its start in the lease (1.0 wrote nothing until a batch: the change was skipped).
    `keep_start=False` is .NET's way (funcstack's Functions host): the change is skipped."""
    clock = VirtualClock(START)

    async def scenario() -> list[str]:
        fleet = SimulatedFleet(clock, partitions=4, seed=3, poll_delay=5.0, keep_start=keep_start)
        [first] = await fleet.add(1)
        await fleet.clock_sleep(2)  # listening, each lease read once: nothing
        written = await fleet.write(per_second=1, seconds=3)
        await fleet.crash([first])
        await fleet.clock_sleep(10)
        await fleet.add(1)  # its "now" is after the changes
        await fleet.clock_sleep(EXPIRY + 4 * ACQUIRE)
        await fleet.close()
        assert written
        return fleet.undelivered()

    undelivered = run(scenario(), clock)
    assert (undelivered == []) is keep_start, undelivered
