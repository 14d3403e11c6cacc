"""A fleet of aio processors in one process, in virtual time: the real processor -- its
balancing, its lease protocol, its renewals, checkpoints and splits -- over the in-memory feed
and a lease container that answers as a provisioned Cosmos DB container does
(``SimulatedLeaseContainer``: a latency, pages, a budget per physical partition, 429s).

* **Time is spent where Azure spends it**: each feed read takes a time drawn from ``read_time``,
  each handler call one drawn from ``handler_time`` (``Timing``: a log-normal distribution,
  seeded), each lease request the container's latency.
* **A change counts once its handler completed** (a handler cancelled by a stop did not handle
  its batch): ``deliveries`` -- each change's instances, in order -- and ``undelivered``.
* **Two instances inside one lease's handler at once** are caught as it happens
  (``overlaps``), each said to follow an expiry (the lease was taken from an owner that had not
  written it for the expiration interval: a crash, a pause) or not -- a failure of the lease
  protocol (``failures_seen``).
* **Changes given twice** are told apart (``given_twice``): by a move of the lease (a steal, or
  a hand-over that did not carry the checkpoint), after an expiry, by the same instance; and a
  change given again after an expiry though the dead owner had checkpointed it.
* ``SimulatedFleet``: the feed, the container and the instances (``add`` -- some under .NET's
  balancing, ``dotnet=True``: a mixed fleet --, ``stop`` -- graceful, leases released --,
  ``crash`` -- nothing more reaches the store or the feed), and the spread.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from cosmos_changefeed._leases import Lease
from cosmos_changefeed._memory_feed import InMemoryFeed
from cosmos_changefeed._options import LeaseContext
from cosmos_changefeed._ranges import PartitionKeyRange
from cosmos_changefeed._reading import Page, Start
from cosmos_changefeed.aio._memory_feed_async import InMemoryFeedSource
from cosmos_changefeed.aio._processor_async import ChangeFeedProcessor
from cosmos_changefeed.testing._lease_container import (
    KINDS,
    CrashedError,
    Move,
    SimulatedLeaseContainer,
    SimulatedLeaseStore,
    lsn_of,
)
from cosmos_changefeed.testing._virtual import VirtualClock

#: A start that fails is tried again, as an orchestrator restarts an instance: this many times,
#: this far apart (``start_failures``).
START_ATTEMPTS, START_RETRY = 20, 5.0


@dataclass(frozen=True)
class Timing:
    """Seconds drawn from a log-normal distribution with this ``median`` and 99th percentile
    (``p99``); ``Timing(0, 0)`` takes no time."""

    median: float
    p99: float

    def __post_init__(self) -> None:
        if self.median < 0 or self.p99 < self.median:
            raise ValueError(f"Timing: 0 <= median <= p99, not {self.median!r}, {self.p99!r}")

    def draw(self, rng: random.Random) -> float:
        if self.median == 0:
            return 0.0
        sigma = math.log(self.p99 / self.median) / 2.326  # the 99th percentile's z
        return rng.lognormvariate(math.log(self.median), sigma)


#: What a test's handler does: ``(instance, context, changes)``.
OnBatch = Callable[[str, LeaseContext, list[dict[str, Any]]], Awaitable[None]]
#: A handler that calls a service in the same region, and a change feed read of one page.
HANDLER_TIME = Timing(0.02, 0.25)
READ_TIME = Timing(0.008, 0.05)
NO_TIME = Timing(0.0, 0.0)


@dataclass(frozen=True)
class Overlap:
    """Two instances inside one lease's handler at once."""

    at: float
    token: str
    instances: tuple[str, ...]
    #: The lease came to the later one from an owner that had let it expire (a crash, a
    #: pause past the bound): allowed. Otherwise the lease protocol failed -- unless one of
    #: them balances as .NET does (``dotnet``: its steals overlap, as in a fleet of .NET's).
    after_expiry: bool
    dotnet: bool = False


@dataclass
class Delivery:
    """One instance's handling of one change: its handler's start and end (virtual time)."""

    instance: str
    token: str
    started: float
    ended: float


@dataclass
class GivenTwice:
    """Changes given to the handler again, by why (see the module)."""

    by_move: int = 0
    after_expiry: int = 0
    same_instance: int = 0
    #: Given by two leases over one range (a split's or a merge's leases, not a move).
    by_reshape: int = 0
    #: Given again after an expiry though the dead owner had checkpointed them.
    behind_checkpoint: int = 0
    #: Of ``by_move``, after a steal from an instance that does not hand over (.NET's).
    from_dotnet: int = 0

    @property
    def total(self) -> int:
        return self.by_move + self.after_expiry + self.same_instance + self.by_reshape


class SimulatedFeedSource(InMemoryFeedSource):
    """The in-memory feed as one instance's aio source: each read takes a drawn time; refuses
    all once its instance crashed."""

    def __init__(
        self, feed: InMemoryFeed, store: SimulatedLeaseStore, fleet: SimulatedFleet
    ) -> None:
        super().__init__(feed)
        self._store, self._fleet = store, fleet

    async def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        self._check()
        return await super().ranges(force_refresh=force_refresh)

    async def read(
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = "LatestVersion",
        max_items: int | None = None,
    ) -> Page:
        self._check()
        await asyncio.sleep(self._fleet.read_time.draw(self._fleet.rng))
        self._check()
        return await super().read(lease, position, start, mode=mode, max_items=max_items)

    def _check(self) -> None:
        if self._store.crashed:
            raise CrashedError(f"instance {self._store.instance} crashed")


@dataclass
class Instance:
    name: str
    processor: ChangeFeedProcessor
    store: SimulatedLeaseStore
    dotnet: bool = False


@dataclass
class _Watch:
    """What the fleet records as it runs."""

    #: Each change handled: its (id, _lsn) -> the instances that handled it, in order.
    deliveries: defaultdict[tuple[str, int], list[str]] = field(
        default_factory=lambda: defaultdict(list)
    )
    #: Each change handed to a handler (handled or not): the count the harness once kept.
    handed: defaultdict[tuple[str, int], list[str]] = field(
        default_factory=lambda: defaultdict(list)
    )
    handled: defaultdict[tuple[str, int], list[Delivery]] = field(
        default_factory=lambda: defaultdict(list)
    )
    #: Per lease token: the instances inside its handler now.
    inside: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    overlaps: list[Overlap] = field(default_factory=list)
    #: Batches handed over more than the expiration interval after the receiving instance's
    #: last write of their lease: (time, instance, lease token, seconds since that write).
    late_batches: list[tuple[float, str, str, float]] = field(default_factory=list)
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    #: (virtual time, the lease container's requests so far), each step of ``until_even``.
    samples: list[tuple[float, int]] = field(default_factory=list)


class SimulatedFleet:
    """Processors named ``i000``, ``i001``, ... of one processor over ``feed`` (the in-memory
    feed; ``partitions`` of them when not given) and one ``SimulatedLeaseContainer``
    (``lease_partitions`` physical partitions sharing ``request_units``). Use it inside
    ``VirtualClock.run``; ``options`` are the processors' (lease intervals, poll delay);
    ``dotnet``: every instance balances and keeps its leases as .NET's processor does
    (``add(..., dotnet=...)`` decides it per instance)."""

    def __init__(
        self,
        clock: VirtualClock,
        *,
        partitions: int = 1,
        feed: InMemoryFeed | None = None,
        latency: float = 0.005,
        request_units: float | None = None,
        seed: int = 0,
        dotnet: bool = False,
        handler_time: Timing = HANDLER_TIME,
        read_time: Timing = READ_TIME,
        lease_partitions: int = 1,
        page_size: int = 100,
        **options: Any,
    ) -> None:
        self.clock = clock
        self.dotnet = dotnet
        self.handler_time, self.read_time = handler_time, read_time
        self.feed = feed or InMemoryFeed(partitions, clock=clock.now)
        self.options: dict[str, Any] = {"processor_name": "sim", **options}
        self.container = SimulatedLeaseContainer(
            clock,
            latency=latency,
            request_units=request_units,
            seed=seed,
            physical_partitions=lease_partitions,
            page_size=page_size,
            expiration=self.expiration,
        )
        self.instances: dict[str, Instance] = {}
        self.gone: set[str] = set()
        self.dotnet_instances: set[str] = set()
        self._random = random.Random(seed + 1)
        #: The draws of handler and read times.
        self.rng = random.Random(seed + 2)
        self._next = 0
        self.watch = _Watch()
        #: Starts that failed (and were tried again, as an orchestrator restarts an instance):
        #: (time, instance, error).
        self.start_failures: list[tuple[float, str, str]] = []
        self._written: list[str] = []
        #: Awaited with (instance, context, changes) inside each handler call, if set (what a
        #: test's handler does besides taking its time).
        self.on_batch: OnBatch | None = None

    @property
    def expiration(self) -> float:
        return float(self.options.get("lease_expiration_interval", 60.0))

    # -- what it records (see the module) -------------------------------------------------------

    @property
    def deliveries(self) -> defaultdict[tuple[str, int], list[str]]:
        return self.watch.deliveries

    @property
    def overlaps(self) -> list[Overlap]:
        return self.watch.overlaps

    @property
    def late_batches(self) -> list[tuple[float, str, str, float]]:
        return self.watch.late_batches

    @property
    def failures(self) -> list[tuple[str, str, str]]:
        return self.watch.failures

    @property
    def samples(self) -> list[tuple[float, int]]:
        return self.watch.samples

    # -- the instances --------------------------------------------------------------------------

    async def add(
        self, count: int, *, within: float = 1.0, dotnet: bool | None = None
    ) -> list[str]:
        """Start ``count`` instances, each at a random moment within ``within`` seconds
        (``dotnet``: under .NET's balancing; None: the fleet's)."""
        names = [f"i{self._next + n:03d}" for n in range(count)]
        self._next += count
        offsets = sorted(self._random.uniform(0, within) for _ in names)
        started = 0.0
        for name, offset in zip(names, offsets, strict=True):
            await asyncio.sleep(offset - started)
            started = offset
            await self._start(name, self.dotnet if dotnet is None else dotnet)
        return names

    async def _start(self, name: str, dotnet: bool) -> None:
        store = SimulatedLeaseStore(self.container, name)
        options = dict(self.options)
        if dotnet:
            options.setdefault("keep_start", False)  # as .NET: nothing written before a batch
        processor = ChangeFeedProcessor(
            SimulatedFeedSource(self.feed, store, self),
            store,
            instance_name=name,
            handler=self._handler(name),
            on_error=lambda failure: self.watch.failures.append(
                (name, failure.during, type(failure.error).__name__)
            ),
            balancing="dotnet" if dotnet else "fair-share",
            **options,
        )
        self.instances[name] = Instance(name, processor, store, dotnet)
        if dotnet:
            self.dotnet_instances.add(name)
        for attempt in range(START_ATTEMPTS):  # as an orchestrator restarts a failed start
            try:
                await processor.start()
                return
            except Exception as failed:
                self.start_failures.append((self.clock.elapsed, name, repr(failed)))
                if attempt == START_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(START_RETRY)

    def _handler(
        self, name: str
    ) -> Callable[[LeaseContext, list[dict[str, Any]]], Awaitable[None]]:
        watch = self.watch

        async def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
            token, started = context.lease_token, self.clock.elapsed
            self._late(name, token)
            inside = watch.inside[token]
            if inside - {name}:
                watch.overlaps.append(self._overlap(name, token, inside))
            inside.add(name)
            for change in changes:
                watch.handed[(str(change["id"]), int(change.get("_lsn", 0)))].append(name)
            try:
                await asyncio.sleep(self.handler_time.draw(self.rng))
                if self.on_batch is not None:
                    await self.on_batch(name, context, changes)
            finally:
                inside.discard(name)
            for change in changes:
                key = (str(change["id"]), int(change.get("_lsn", 0)))
                watch.deliveries[key].append(name)
                watch.handled[key].append(Delivery(name, token, started, self.clock.elapsed))

        return handle

    def _late(self, name: str, token: str) -> None:
        now = self.clock.elapsed
        written = self.container.written.get((name, token))
        if written is not None and now - written > self.expiration:
            self.watch.late_batches.append((now, name, token, now - written))

    def _overlap(self, name: str, token: str, inside: set[str]) -> Overlap:
        """``name`` enters the handler of ``token`` while others are inside: after an expiry
        when the move that gave it the lease took it expired; .NET's when one of them
        balances as .NET does (its steals, and steals from it, overlap its batches)."""
        came = [m for m in self.container.moves if m.token == token and m.to == name]
        after_expiry = bool(came) and came[-1].how == "expired"
        everyone = inside | {name}
        return Overlap(
            self.clock.elapsed,
            token,
            tuple(sorted(everyone)),
            after_expiry,
            bool(everyone & self.dotnet_instances),
        )

    async def stop(self, names: list[str]) -> None:
        """Stop these instances as a deployment scales in: each releases its leases."""
        await asyncio.gather(*(self.instances[name].processor.stop() for name in names))
        for name in names:
            self.gone.add(name)
            del self.instances[name]

    async def crash(self, names: list[str]) -> None:
        """Kill these instances: nothing they do reaches the store or the feed from now on."""
        for name in names:
            self.instances[name].store.crashed = True
        await self.stop(names)

    async def close(self) -> None:
        await self.stop(list(self.instances))

    # -- what the fleet looks like --------------------------------------------------------------

    def spread(self) -> dict[str, int]:
        """Leases per live instance, as each processes them (``owned_leases``)."""
        return {name: len(i.processor.owned_leases) for name, i in self.instances.items()}

    def even(self) -> bool:
        """Whether every lease is processed by the one live instance the store says owns it,
        and the instances hold within one lease of each other."""
        spread = self.spread()
        if not spread or max(spread.values()) - min(spread.values()) > 1:
            return False
        owners: dict[str, list[str]] = defaultdict(list)
        for lease in self.container.leases():
            if lease.owner not in self.instances:
                return False
            owners[lease.owner].append(lease.lease_token)
        return all(
            sorted(owners.get(name, [])) == instance.processor.owned_leases
            for name, instance in self.instances.items()
        )

    def failures_seen(self) -> list[Overlap]:
        """Two instances inside one lease's handler, neither after an expiry nor .NET's: the
        protocol failed."""
        return [o for o in self.overlaps if not (o.after_expiry or o.dotnet)]

    def duplicates(self) -> int:
        """Changes given more than once."""
        return sum(len(given) - 1 for given in self.deliveries.values() if len(given) > 1)

    def given_twice(self) -> GivenTwice:
        """The changes given again, by why (see the module)."""
        counts = GivenTwice()
        moves: defaultdict[str, list[Move]] = defaultdict(list)
        for move in self.container.moves:
            moves[move.token].append(move)
        for (_, lsn), handled in self.watch.handled.items():
            for first, again in itertools.pairwise(handled):
                self._classify(counts, first, again, lsn, moves[first.token])
        return counts

    def _classify(
        self, counts: GivenTwice, first: Delivery, again: Delivery, lsn: int, moves: list[Move]
    ) -> None:
        if first.token != again.token:
            counts.by_reshape += 1
            return
        if first.instance == again.instance:
            counts.same_instance += 1
            return
        # the moves of the lease to or from either instance around the two handlings (a former
        # owner handles a batch until it learns the lease moved: at its next write)
        pair = {first.instance, again.instance}
        window = [m for m in moves if first.started - self.expiration <= m.at <= again.started]
        between = [m for m in window if m.was in pair or m.to in pair]
        expired = [m for m in between if m.how == "expired"]
        if expired:
            counts.after_expiry += 1
            checkpoint = lsn_of(expired[0].continuation)
            if checkpoint is not None and lsn <= checkpoint:
                counts.behind_checkpoint += 1
            return
        counts.by_move += 1
        dotnet = self.dotnet_instances
        if pair & dotnet or any(m.how == "stolen" and {m.was, m.to} & dotnet for m in between):
            counts.from_dotnet += 1

    def lost_checkpoints(self) -> int:
        """Changes given again other than after a steal from an instance that does not hand
        over: a checkpoint lost (the bench's older column)."""
        given = self.given_twice()
        return given.total - given.from_dotnet

    async def until_even(self, *, hold: float, limit: float, step: float = 1.0) -> float | None:
        """Watch the fleet (every ``step`` s) until it has been even for ``hold`` seconds, or
        ``limit`` seconds have passed: how long after the call it became even for good (None:
        not within ``limit``)."""
        began = self.clock.elapsed
        since: float | None = None
        while self.clock.elapsed - began < limit:
            self.samples.append((self.clock.elapsed, self.container.total((*KINDS, "429"))))
            if self.even():
                if since is None:
                    since = self.clock.elapsed
                elif self.clock.elapsed - since >= hold:
                    return since - began
            else:
                since = None
            await asyncio.sleep(step)
        return None

    async def request_units(self, seconds: float) -> float:
        """The request units per second the fleet uses over the next ``seconds``."""
        used, began = self.container.units, self.clock.elapsed
        await asyncio.sleep(seconds)
        return (self.container.units - used) / (self.clock.elapsed - began)

    async def write(self, per_second: float, seconds: float) -> list[str]:
        """Write changes to the feed for ``seconds``, ``per_second`` of them (each a new
        document, each under a partition key of its own): their ids."""
        written: list[str] = []
        end = self.clock.elapsed + seconds
        while self.clock.elapsed < end:
            number = len(self._written)
            self.feed.upsert({"id": f"d{number}", "pk": f"k{number}"})
            self._written.append(f"d{number}")
            written.append(f"d{number}")
            await asyncio.sleep(1 / per_second)
        return written

    def undelivered(self, *, handed: bool = False) -> list[str]:
        """The changes written (``write``) whose handler no instance completed (``handed``:
        that no instance was handed, completed or not -- what the harness once counted)."""
        given = {change_id for change_id, _ in (self.watch.handed if handed else self.deliveries)}
        return [change_id for change_id in self._written if change_id not in given]

    def requests_between(self, began: float, ended: float) -> float:
        """Requests per second between two virtual times (from the ``until_even`` samples)."""
        inside = [(at, count) for at, count in self.samples if began <= at <= ended]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return 0.0
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    def set_budget(self, request_units: float | None) -> None:
        """Give the lease container this many request units a second from now (None: no
        limit), split between its physical partitions."""
        self.container.set_budget(request_units)

    def requests(self) -> int:
        """The lease container's requests so far, 429s included."""
        return self.container.total((*KINDS, "429"))

    @property
    def written(self) -> list[str]:
        """The ids of the changes ``write`` wrote."""
        return list(self._written)

    def throttled(self) -> int:
        """The 429s the lease container answered."""
        return sum(count for (_, kind), count in self.container.requests.items() if kind == "429")

    def writes(self) -> Counter[str]:
        """The lease writes so far, by purpose (``PURPOSES``)."""
        return Counter(self.container.writes)

    async def clock_sleep(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass."""
        await asyncio.sleep(seconds)
