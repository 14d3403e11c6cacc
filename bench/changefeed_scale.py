"""cosmos-changefeed at scale: hundreds to thousands of leases, tens to a hundred and fifty
processor instances, in one process, in virtual time -- the real aio processor (its balancing,
hand-overs, lease protocol, renewals, checkpoints, splits) over the in-memory feed and a lease
container that answers as a provisioned Cosmos DB container does
(``cosmos_changefeed.testing.SimulatedFleet``): each request after 5 ms (+-50 %), a listing a
cross-partition query paged 100 documents a request, each physical partition its share of the
request units and 429s past it; each feed read and each handler call a time drawn from a
seeded log-normal distribution (reads: median 8 ms, p99 50 ms; handler: median 20 ms, p99
250 ms), a change counted once its handler completed. Lease intervals are .NET's defaults
(acquire 13 s, renew 17 s, expiry 60 s); changes are written all along (one per lease per 30 s),
so batches are in flight when leases move.

Per size (leases x instances), from a cold start (every instance started within a second),
each change awaited until the fleet is even -- every lease processed by the live instance the
store names, the instances within one lease of each other -- and stays so for two acquire
intervals:

* **scale-out**: half as many instances more; **scale-in**: half of them stopped (they release
  their leases); **crash**: a tenth killed (nothing more reaches the store: their leases
  expire); **splits and merges**: 2 % of the partitions split, 1 % merged with their neighbour;
* the time to even, in acquire intervals; the most and least leases an instance holds then;
  the leases that changed hands (acquired) beside those that had to; the lease container's
  requests per second while balancing; changes given twice, by a balancing move or after an
  expiry (a crash), and moments with two instances inside one lease's handler;
* settled: requests per second over four renew intervals, beside the goal -- one renewal per
  lease per renew interval and one listing page per instance per acquire interval;
* **a mixed fleet**: half the instances under .NET's balancing (``EqualPartitionsBalancingStrategy``
  and .NET's renewal, which never give a lease back nor hand one over), half under this
  package's, on one lease container: a cold start and +50 %, beside a fleet of .NET's alone;
* **under 429s**: a second fleet, settled, given half -- and a quarter -- of the request units
  it needs (its settled use, plus the checkpoints of the changes then written), scaled out and
  in meanwhile; then the budget lifted: 429s per second, the times to even, starts that failed,
  batches handed over past the expiry bound, changes given twice or never.

``python -m bench.changefeed_scale`` prints the tables (``--sizes 100x10,500x50``, ``--grid``
for every pair of 100/500/2,000 leases and 10/50/100 instances, ``--no-dotnet``, ``--no-mixed``,
``--no-throttled``, ``--limit 200``: watch each change for 200 acquire intervals rather than 40;
``--throttled-expiry 120``: the 429 runs' leases expire after 120 s rather than 60);
``--mixed-seeds 20`` only the mixed fleet, under 20 seeds per size (the
published one, then 1 to 19): the spread of its times to even (``--first-seed 20``: seeds 20 to
39 instead, none of them tuned for).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from cosmos_changefeed.testing import SimulatedFleet, SimulatedLeaseContainer, VirtualClock

ACQUIRE, RENEW, EXPIRY = 13.0, 17.0, 60.0
#: The virtual clocks' start: lease times (``_ts`` whole seconds included) alike at every run.
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
HOLD = 2 * ACQUIRE
#: Changes written: one per lease per this many seconds -- from before the fleet starts, so
#: the fleets start from the beginning (a change written before an instance's "now" is not
#: one to deliver).
WRITE_EVERY = 30.0
FROM_START: dict[str, Any] = {"start_from": "beginning"}
SIZES = ((100, 10), (500, 50), (2000, 100))
MIXED = ((100, 10), (500, 50))
GRID = tuple((leases, instances) for leases in (100, 500, 2000) for instances in (10, 50, 100))


@dataclass(frozen=True)
class Watch:
    """How a run is watched: each change for ``limit`` seconds at most (``--limit``, in acquire
    intervals), and the lease expiration interval of the 429 runs (``--throttled-expiry``; the
    processor's default: 60)."""

    limit: float = 40 * ACQUIRE
    throttled_expiry: float = EXPIRY


@dataclass
class Phase:
    """One change and what followed (watched for ``limit`` seconds at most)."""

    change: str
    even_after: float | None
    most: int
    least: int
    moved: int
    needed: int
    requests_per_s: float
    instances: int
    limit: float

    @property
    def intervals(self) -> str:
        if self.even_after is None:
            return f"not within {self.limit / ACQUIRE:.0f}"
        return f"{self.even_after / ACQUIRE:.1f}"


@dataclass
class Safety:
    """What a run did to the changes: given twice, by why; two instances inside a handler."""

    by_move: int = 0
    after_expiry: int = 0
    same_instance: int = 0
    by_reshape: int = 0
    behind_checkpoint: int = 0
    from_dotnet: int = 0
    overlaps: int = 0
    overlaps_dotnet: int = 0
    overlaps_after_expiry: int = 0
    undelivered: int = 0
    written: int = 0

    @classmethod
    def of(cls, fleet: SimulatedFleet) -> Safety:
        given = fleet.given_twice()
        overlaps = fleet.overlaps
        after = sum(1 for overlap in overlaps if overlap.after_expiry)
        dotnet = sum(1 for overlap in overlaps if overlap.dotnet and not overlap.after_expiry)
        return cls(
            given.by_move,
            given.after_expiry,
            given.same_instance,
            given.by_reshape,
            given.behind_checkpoint,
            given.from_dotnet,
            len(fleet.failures_seen()),
            dotnet,
            after,
            len(fleet.undelivered()),
            len(fleet.written),
        )

    def moves_cell(self) -> str:
        dotnet = f" ({self.from_dotnet} .NET's)" if self.from_dotnet else ""
        return f"{self.by_move}{dotnet} / {self.after_expiry} / {self.by_reshape}"

    def inside_cell(self) -> str:
        dotnet = f" ({self.overlaps_dotnet} .NET's)" if self.overlaps_dotnet else ""
        return f"{self.overlaps}{dotnet} / {self.overlaps_after_expiry}"


@dataclass
class Figures:
    leases: int
    instances: int
    strategy: str
    phases: list[Phase] = field(default_factory=list)
    settled_per_s: float = 0.0
    settled_units_per_s: float = 0.0
    goal_per_s: float = 0.0
    safety: Safety = field(default_factory=Safety)
    cpu_s: float = 0.0


class _Meter:
    """Requests per second over a window of virtual time."""

    def __init__(self, fleet: SimulatedFleet) -> None:
        self.fleet = fleet
        self.requests, self.began = fleet.requests(), fleet.clock.elapsed

    def per_second(self) -> float:
        spent = self.fleet.clock.elapsed - self.began
        return (self.fleet.requests() - self.requests) / spent if spent > 0 else 0.0


async def _change(
    fleet: SimulatedFleet,
    change: str,
    act: Callable[[], Coroutine[Any, Any, int]],
    limit: float,
) -> Phase:
    """Make a change (``act``: the leases that must move) and watch the fleet settle, for
    ``limit`` seconds at most: the requests are counted from the change to even (at least an
    acquire interval)."""
    moves = len(fleet.container.moves)
    began = fleet.clock.elapsed
    needed = await act()
    watched = fleet.clock.elapsed
    even_after = await fleet.until_even(hold=HOLD, limit=limit)
    ended = watched + max(even_after if even_after is not None else limit, ACQUIRE)
    spread = fleet.spread()
    return Phase(
        change,
        even_after,
        max(spread.values()),
        min(spread.values()),
        sum(1 for move in fleet.container.moves[moves:] if move.to is not None),
        needed,
        fleet.requests_between(began, ended),
        len(spread),
        limit,
    )


def _writer(fleet: SimulatedFleet, leases: int) -> asyncio.Task[list[str]]:
    """Changes written all along (one per lease per ``WRITE_EVERY`` s) until cancelled."""
    return asyncio.create_task(fleet.write(leases / WRITE_EVERY, 10**9))


async def _drain(fleet: SimulatedFleet, writer: asyncio.Task[list[str]]) -> None:
    """Stop writing and let the fleet handle what was written."""
    writer.cancel()
    for _ in range(60):
        if not fleet.undelivered():
            break
        await asyncio.sleep(5)


async def _scenario(fleet: SimulatedFleet, instances: int, figures: Figures, watch: Watch) -> None:
    leases = figures.leases

    async def cold() -> int:
        await fleet.add(instances)
        return leases

    async def crash() -> int:
        names = sorted(fleet.instances)[: max(1, len(fleet.instances) // 10)]
        owned = sum(len(fleet.instances[name].processor.owned_leases) for name in names)
        await fleet.crash(names)
        return owned

    async def reshape() -> int:
        return _reshape(fleet, leases)

    writer = _writer(fleet, leases)
    figures.phases.append(await _change(fleet, "cold start", cold, watch.limit))
    writer.cancel()  # settled: renewals and listings alone (the goal's)
    meter = _Meter(fleet)
    figures.settled_units_per_s = await fleet.request_units(4 * RENEW)
    figures.settled_per_s = meter.per_second()
    writer = _writer(fleet, leases)
    pages = -(-leases // fleet.container.page_size)
    figures.goal_per_s = leases / RENEW + instances * pages / ACQUIRE
    for change, act in (
        (f"scale-out: +{instances // 2}", lambda: _join(fleet, instances)),
        ("scale-in: -50 %", lambda: _leave(fleet)),
        ("crash: -10 %", crash),
        ("2 % split, 1 % merged", reshape),
    ):
        figures.phases.append(await _change(fleet, change, act, watch.limit))
    await _drain(fleet, writer)
    figures.safety = Safety.of(fleet)


def _reshape(fleet: SimulatedFleet, leases: int) -> int:
    """Split 2 % of the partitions and merge 1 % with their neighbours: the leases that must
    be taken (a split's two children; a merge's leases, replaced in place)."""
    feed = fleet.feed
    ranges = feed.ranges()
    step = max(len(ranges) // max(1, leases // 50), 2)
    merged = 0
    for first, second in zip(ranges[1::step], ranges[2::step], strict=False):
        if merged >= max(1, leases // 100):
            break
        feed.merge(first.id, second.id)
        merged += 1
    split = 0
    for partition in feed.ranges()[::step]:
        if split >= max(1, leases // 50):
            break
        feed.split(partition.id)
        split += 1
    return 2 * split + 2 * merged


def measure(
    leases: int, instances: int, *, dotnet: bool = False, watch: Watch = Watch()
) -> Figures:
    """The figures of one size (``dotnet``: under .NET's balancing)."""
    figures = Figures(leases, instances, ".NET's balancing" if dotnet else "fair share")
    clock = VirtualClock(START)
    started = time.process_time()

    async def main() -> None:
        # dotnet: .NET's balancing, and its renewal (a read, then the replace)
        fleet = SimulatedFleet(
            clock, partitions=leases, seed=leases + instances, dotnet=dotnet, **FROM_START
        )
        try:
            await _scenario(fleet, instances, figures, watch)
        finally:
            await fleet.close()

    clock.run(main())
    figures.cpu_s = time.process_time() - started
    return figures


async def _add_mixed(fleet: SimulatedFleet, count: int) -> list[str]:
    """``count`` instances, half under .NET's balancing, started within the same second."""
    dotnet, ours = await asyncio.gather(
        fleet.add(count - count // 2, dotnet=True), fleet.add(count // 2, dotnet=False)
    )
    return [*dotnet, *ours]


def measure_mixed(
    leases: int, instances: int, *, seed: int | None = None, watch: Watch = Watch()
) -> Figures:
    """Half the instances under .NET's balancing, half under the fair share: a cold start and
    +50 % (a third of the newcomers each way); ``seed``: the simulation's (None: the
    published one, ``leases + instances``)."""
    figures = Figures(leases, instances, "mixed: half .NET's")
    clock = VirtualClock(START)
    started = time.process_time()

    async def main() -> None:
        fleet = SimulatedFleet(
            clock,
            partitions=leases,
            seed=leases + instances if seed is None else seed,
            **FROM_START,
        )
        try:
            writer = _writer(fleet, leases)

            async def cold() -> int:
                await _add_mixed(fleet, instances)
                return leases

            async def out() -> int:
                joined = await _add_mixed(fleet, instances // 2)
                return round(leases * len(joined) / len(fleet.instances))

            figures.phases.append(await _change(fleet, "cold start", cold, watch.limit))
            figures.phases.append(
                await _change(fleet, f"scale-out: +{instances // 2}", out, watch.limit)
            )
            await _drain(fleet, writer)
            figures.safety = Safety.of(fleet)
        finally:
            await fleet.close()

    clock.run(main())
    figures.cpu_s = time.process_time() - started
    return figures


def mixed_seeds_table(
    sizes: tuple[tuple[int, int], ...],
    seeds: int,
    first: int | None = None,
    watch: Watch = Watch(),
) -> str:
    """The mixed fleet (``measure_mixed``) under ``seeds`` seeds per size -- the published one,
    then 1, 2, ...; or ``first``, ``first`` + 1, ... --: the intervals to even after the cold
    start and after +50 % per seed, and how many of them exceeded 5."""
    lines = [
        "| leases x instances | change | even after (acquire intervals), per seed | most | "
        "over 5 |",
        "|---|---|---|---|---|",
    ]
    for leases, instances in sizes:
        chosen = (
            [leases + instances, *range(1, seeds)]
            if first is None
            else list(range(first, first + seeds))
        )
        runs = [measure_mixed(leases, instances, seed=seed, watch=watch) for seed in chosen]
        for place, change in enumerate(("cold start", f"scale-out: +{instances // 2}")):
            spent = [run.phases[place].even_after for run in runs]
            shown = ", ".join(
                f"{seed}: {run.phases[place].intervals}"
                for seed, run in zip(chosen, runs, strict=True)
            )
            worst = "never" if None in spent else f"{max(s or 0.0 for s in spent) / ACQUIRE:.1f}"
            over = sum(1 for s in spent if s is None or s > 5 * ACQUIRE)
            lines.append(
                f"| {_size(leases, instances)} | {change} | {shown} | {worst} | "
                f"{over} of {len(spent)} |"
            )
    return "\n".join(lines)


@dataclass
class Throttled:
    leases: int
    instances: int
    fraction: float
    budget: float
    throttled_per_s: float
    requests_per_s: float
    phases: list[Phase]
    start_failures: int
    late_batches: int
    regressions: int
    safety: Safety
    cpu_s: float


def measure_throttled(
    leases: int, instances: int, *, fraction: float = 0.5, watch: Watch = Watch()
) -> Throttled:
    """A settled fleet given ``fraction`` of the request units it needs, scaled out and in
    while changes are written (see the module)."""
    clock = VirtualClock(START)
    started = time.process_time()
    result: dict[str, Any] = {}

    async def main() -> None:
        fleet = SimulatedFleet(
            clock,
            partitions=leases,
            seed=leases * 3 + instances,
            lease_expiration_interval=watch.throttled_expiry,
        )
        try:
            await fleet.add(instances)
            await fleet.until_even(hold=HOLD, limit=watch.limit)
            rate = leases / 60
            writes = rate * SimulatedLeaseContainer.WRITE_UNITS  # the checkpoints' units
            needed = await fleet.request_units(4 * RENEW) + writes
            fleet.set_budget(needed * fraction)
            throttled, meter = fleet.throttled(), _Meter(fleet)
            writer = asyncio.create_task(fleet.write(rate, 10 * EXPIRY))
            out = f"scale-out: +{instances // 2}"
            phases = [
                await _change(fleet, out, lambda: _join(fleet, instances), watch.limit),
                await _change(fleet, "scale-in: -50 %", lambda: _leave(fleet), watch.limit),
            ]
            await writer
            spent = meter.per_second()
            result.update(
                budget=needed * fraction,
                throttled_per_s=(fleet.throttled() - throttled) / (clock.elapsed - meter.began),
                requests_per_s=spent,
                phases=phases,
            )
            fleet.set_budget(None)
            for _ in range(60):
                if not fleet.undelivered():
                    break
                await asyncio.sleep(5)
            await asyncio.sleep(2 * EXPIRY)
            result.update(
                start_failures=len(fleet.start_failures),
                late_batches=len(fleet.late_batches),
                regressions=len(fleet.container.regressions),
                safety=Safety.of(fleet),
            )
        finally:
            await fleet.close()

    clock.run(main())
    cpu = time.process_time() - started
    return Throttled(leases, instances, fraction, cpu_s=cpu, **result)


async def _join(fleet: SimulatedFleet, instances: int) -> int:
    joined = await fleet.add(instances // 2)
    return round(len(fleet.container.leases()) * len(joined) / len(fleet.instances))


async def _leave(fleet: SimulatedFleet) -> int:
    names = sorted(fleet.instances)[::2]
    owned = sum(len(fleet.instances[name].processor.owned_leases) for name in names)
    await fleet.stop(names)
    return owned


# -- the tables ----------------------------------------------------------------------------------


def _size(leases: int, instances: int) -> str:
    return f"{leases:,} x {instances}"


def changes_table(runs: list[Figures]) -> str:
    lines = [
        "| leases x instances | balancing | change | even after (acquire intervals) | most / "
        "least | leases moved (had to) | lease requests/s while balancing: all (per instance) |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for phase in run.phases:
            per = phase.requests_per_s / max(phase.instances, 1)
            lines.append(
                f"| {_size(run.leases, run.instances)} | {run.strategy} | {phase.change} | "
                f"{phase.intervals} | {phase.most} / {phase.least} | {phase.moved:,} "
                f"({phase.needed:,}) | {phase.requests_per_s:,.1f} ({per:.2f}) |"
            )
    return "\n".join(lines)


def safety_table(runs: list[Figures]) -> str:
    lines = [
        "| leases x instances | balancing | changes handled (written) | given twice: by a "
        "balancing move (of which .NET's steals) / after an expiry / by two leases over one "
        "range (a split's, a merge's) | given again behind a dead "
        "owner's checkpoint | moments with two instances inside one lease's handler: by a move "
        "(of which .NET's) / after an expiry | never given |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        safe = run.safety
        lines.append(
            f"| {_size(run.leases, run.instances)} | {run.strategy} | "
            f"{safe.written - safe.undelivered:,} ({safe.written:,}) | {safe.moves_cell()} | "
            f"{safe.behind_checkpoint} | {safe.inside_cell()} | {safe.undelivered} |"
        )
    return "\n".join(lines)


def settled_table(runs: list[Figures]) -> str:
    lines = [
        "| leases x instances | balancing | lease requests/s, settled: all (per instance) | goal: "
        "a renewal per lease per renew interval + a listing (its pages) per instance per "
        "acquire interval | request units/s |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        per = run.settled_per_s / run.instances
        lines.append(
            f"| {_size(run.leases, run.instances)} | {run.strategy} | {run.settled_per_s:,.1f} "
            f"({per:.2f}) | {run.goal_per_s:,.1f} ({run.settled_per_s / run.goal_per_s:.2f}x) "
            f"| {run.settled_units_per_s:,.0f} |"
        )
    return "\n".join(lines)


def throttled_table(runs: list[Throttled]) -> str:
    lines = [
        "| leases x instances | budget (RU/s: part of the need) | 429s/s | lease requests/s | "
        "even after scale-out / scale-in (acquire intervals) | starts that failed | batches "
        "past the expiry bound | given twice: by a balancing move / after an expiry / by the "
        "same instance | two inside one handler | never given (of written) | checkpoints "
        "moved back |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        out, back = run.phases
        safe = run.safety
        lines.append(
            f"| {_size(run.leases, run.instances)} | {run.budget:,.0f} ({run.fraction:.0%}) | "
            f"{run.throttled_per_s:,.1f} | {run.requests_per_s:,.1f} | {out.intervals} / "
            f"{back.intervals} | {run.start_failures} | {run.late_batches} | "
            f"{safe.by_move} / {safe.after_expiry} / {safe.same_instance} | "
            f"{safe.inside_cell()} | {safe.undelivered} (of {safe.written:,}) | "
            f"{run.regressions} |"
        )
    return "\n".join(lines)


def measure_all(
    sizes: tuple[tuple[int, int], ...] = SIZES,
    *,
    dotnet: bool = True,
    mixed: bool = True,
    throttled: bool = True,
    watch: Watch = Watch(),
) -> dict[str, Any]:
    runs = [measure(leases, instances, watch=watch) for leases, instances in sizes]
    small = [size for size in sizes if size in MIXED] or list(sizes[:2])
    if dotnet:
        runs += [
            measure(leases, instances, dotnet=True, watch=watch) for leases, instances in small
        ]
    both = (
        [measure_mixed(leases, instances, watch=watch) for leases, instances in small]
        if mixed
        else []
    )
    slow = (
        [
            measure_throttled(leases, instances, fraction=fraction, watch=watch)
            for fraction in (0.5, 0.25)
            for leases, instances in sizes
        ]
        if throttled
        else []
    )
    return {"runs": runs, "mixed": both, "throttled": slow}


def report(figures: dict[str, Any]) -> str:
    runs, both, slow = figures["runs"], figures["mixed"], figures["throttled"]
    parts = [changes_table(runs + both), "", safety_table(runs + both), "", settled_table(runs)]
    if slow:
        parts += ["", throttled_table(slow)]
    cpu = sum(run.cpu_s for run in runs + both) + sum(run.cpu_s for run in slow)
    parts.append(f"\n(CPU: {cpu:,.0f} s)")
    return "\n".join(parts)


def _sizes(text: str) -> tuple[tuple[int, int], ...]:
    pairs = (part.split("x") for part in text.split(",") if part.strip())
    return tuple((int(leases), int(instances)) for leases, instances in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.changefeed_scale")
    parser.add_argument("--sizes", type=_sizes, default=SIZES, help="e.g. 100x10,500x50")
    parser.add_argument(
        "--grid", action="store_true", help="every pair of 100/500/2000 x 10/50/100"
    )
    parser.add_argument("--no-dotnet", action="store_true", help="without .NET's balancing")
    parser.add_argument("--no-mixed", action="store_true", help="without the mixed fleet")
    parser.add_argument("--no-throttled", action="store_true", help="without the 429 runs")
    parser.add_argument(
        "--limit",
        type=float,
        default=Watch.limit / ACQUIRE,
        metavar="N",
        help="how long to watch a change settle, in acquire intervals (default 40)",
    )
    parser.add_argument(
        "--throttled-expiry",
        type=float,
        default=Watch.throttled_expiry,
        metavar="S",
        help="the 429 runs' lease expiration interval in seconds (default 60)",
    )
    parser.add_argument(
        "--mixed-seeds",
        type=int,
        default=0,
        metavar="N",
        help="only the mixed fleet, under N seeds per size (default sizes: 100x10,500x50)",
    )
    parser.add_argument(
        "--first-seed",
        type=int,
        default=None,
        metavar="K",
        help="with --mixed-seeds N: seeds K to K+N-1 (default: the published one, then 1 to N-1)",
    )
    args = parser.parse_args()
    watch = Watch(args.limit * ACQUIRE, args.throttled_expiry)
    logging.getLogger("cosmos_changefeed").setLevel(logging.CRITICAL)
    if args.mixed_seeds:
        sizes = args.sizes if args.sizes != SIZES else MIXED
        print(mixed_seeds_table(sizes, args.mixed_seeds, args.first_seed, watch))
        return
    sizes = GRID if args.grid else args.sizes
    figures = measure_all(
        sizes,
        dotnet=not args.no_dotnet,
        mixed=not args.no_mixed,
        throttled=not args.no_throttled,
        watch=watch,
    )
    print(report(figures))


if __name__ == "__main__":
    main()
