"""A fleet of aio processors in one process, in virtual time: the real processor -- its
balancing, its lease protocol, its renewals, checkpoints and splits -- over the in-memory feed
and a lease container that answers as a provisioned Cosmos DB container does, slowly and, past
its request units, with 429s.

* ``SimulatedLeaseContainer``: the lease documents (``InMemoryDocuments``), a latency per request
  (jittered, seeded), a budget of request units per second (a bucket refilled at that rate: a
  request is admitted while it holds some, charged after, and refused with a 429 and a
  retry-after while it is empty), and what it saw: requests by instance and kind, 429s, every
  lease that changed hands, every checkpoint that moved back.
* ``SimulatedLeaseStore``: one instance's view of it (an ``aio.LeaseStore``), which retries a 429
  as azure-cosmos does by default (9 times, 30 s of waiting in all, each after the retry-after)
  and then raises azure-cosmos's ``CosmosHttpResponseError`` (429), as ``CosmosLeaseStore``
  would.
* ``SimulatedFleet``: the feed, the container and the instances (``add``, ``stop`` -- graceful,
  leases released --, ``crash`` -- nothing more reaches the store or the feed), what the fleet
  handled (each change's deliveries; a batch an instance was given more than the expiration
  interval after its last write of the lease: ``late_batches``), and the spread.

The request-unit charges are a model, not Azure's bill: a point read 1, a write (create,
replace, delete) 10, a query 3 plus 0.1 per document returned.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from azure.cosmos.exceptions import CosmosHttpResponseError

from cosmos_changefeed._balancing import dotnet_round
from cosmos_changefeed._leases import Lease, parse_time
from cosmos_changefeed._memory_feed import InMemoryFeed
from cosmos_changefeed._options import LeaseContext
from cosmos_changefeed._ranges import PartitionKeyRange
from cosmos_changefeed._reading import Page, Start
from cosmos_changefeed._store import InMemoryDocuments
from cosmos_changefeed.aio._memory_feed_async import InMemoryFeedSource
from cosmos_changefeed.aio._processor_async import ChangeFeedProcessor
from cosmos_changefeed.aio._store_async import LeaseStore
from cosmos_changefeed.testing._virtual import VirtualClock

T = TypeVar("T")

#: Request units per operation (see the module).
READ_RU, WRITE_RU, QUERY_RU, QUERY_RU_PER_DOCUMENT = 1.0, 10.0, 3.0, 0.1
#: azure-cosmos's default throttle retries: attempts after the first, and the wait in all.
SDK_RETRIES, SDK_MAX_WAIT = 9, 30.0
KINDS = ("list", "read", "create", "replace", "delete")
#: A start that fails (the lease container throttles) is tried again, as an orchestrator
#: restarts an instance: this many times, this many seconds apart.
START_ATTEMPTS, START_RETRY = 20, 5.0


class CrashedError(ConnectionError):
    """What a crashed instance's store and feed answer: its process is gone."""


class Throughput:
    """Provisioned request units per second (None: unlimited), as a bucket holding a second's
    worth."""

    def __init__(self, per_second: float | None) -> None:
        self.per_second = per_second
        self._tokens = per_second or 0.0
        self._at = 0.0

    def admit(self, now: float) -> float | None:
        """None when a request is admitted now, else the retry-after (seconds)."""
        rate = self.per_second
        if rate is None:
            return None
        self._tokens = min(rate, self._tokens + (now - self._at) * rate)
        self._at = now
        if self._tokens > 0:
            return None
        return max(-self._tokens / rate, 0.001)

    def charge(self, units: float) -> None:
        if self.per_second is not None:
            self._tokens -= units


@dataclass
class Move:
    """A lease that changed hands (an acquire, or a release: ``to`` None)."""

    at: float
    token: str
    was: str | None
    to: str | None
    #: When ``was`` last wrote the lease (None: never, or no owner).
    was_written: float | None = None

    @property
    def stolen(self) -> bool:
        """Taken from an instance that wrote it within the expiration interval (60 s)."""
        fresh = self.was_written is not None and self.at - self.was_written <= 60.0
        return self.to is not None and self.was is not None and fresh


@dataclass
class SimulatedLeaseContainer:
    """The lease container the fleet shares (see the module)."""

    #: The request units of a write (create, replace, delete): what a checkpoint costs.
    WRITE_UNITS: ClassVar[float] = WRITE_RU

    clock: VirtualClock
    latency: float = 0.005
    request_units: float | None = None
    seed: int = 0
    documents: InMemoryDocuments = field(default_factory=InMemoryDocuments)
    #: Requests by (instance, kind), 429s included (kind "429" counts them again apart).
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    units: float = 0.0
    moves: list[Move] = field(default_factory=list)
    #: Checkpoints that moved a lease's continuation back: (token, from, to).
    regressions: list[tuple[str, str, str]] = field(default_factory=list)
    #: Per (instance, lease token): the virtual time of its last write of the lease.
    written: dict[tuple[str, str], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.throughput = Throughput(self.request_units)
        self._random = random.Random(self.seed)

    def delay(self) -> float:
        """One request's latency: the base, jittered by +-50 %."""
        return self.latency * (0.5 + self._random.random())

    def total(self, kinds: tuple[str, ...] = KINDS) -> int:
        return sum(n for (_, kind), n in self.requests.items() if kind in kinds)

    def leases(self) -> list[Lease]:
        return [
            Lease.from_document(doc)
            for doc in self.documents.list_documents("")
            if "LeaseToken" in doc
        ]

    def seen_replace(self, instance: str, before: Mapping[str, Any] | None, after: Any) -> None:
        """What a successful replace did: a lease that changed hands, a continuation that moved
        back, the writer's last write of the lease."""
        if before is None or "LeaseToken" not in after:
            return
        token = str(after["LeaseToken"])
        if before.get("Owner") != after.get("Owner"):
            was = before.get("Owner")
            written = self.written.get((was, token)) if was else None
            self.moves.append(Move(self.clock.elapsed, token, was, after.get("Owner"), written))
        old, new = _lsn(before.get("ContinuationToken")), _lsn(after.get("ContinuationToken"))
        if old is not None and (new is None or new < old):
            self.regressions.append((token, str(old), str(new)))
        stamp = parse_time(after.get("timestamp"))
        if stamp is not None and after.get("Owner") == instance:
            self.written[(instance, token)] = (stamp - self.clock.now()).total_seconds() + (
                self.clock.elapsed
            )


def _lsn(continuation: Any) -> int | None:
    try:
        return int(str(continuation).strip('"')) if continuation else None
    except ValueError:
        return None


class SimulatedLeaseStore(LeaseStore):
    """One instance's view of a ``SimulatedLeaseContainer`` (see the module)."""

    def __init__(self, container: SimulatedLeaseContainer, instance: str) -> None:
        self.container, self.instance = container, instance
        self.crashed = False

    async def partition_key_path(self) -> str:
        return self.container.documents.partition_key_path

    async def expires_documents(self) -> bool:
        return True

    async def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        docs = self.container.documents
        return await self._request("list", lambda: docs.list_documents(prefix), _query_units)

    async def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        docs = self.container.documents
        return await self._request("read", lambda: docs.read(item_id, partition_key), READ_RU)

    async def create(
        self, document: Mapping[str, Any], partition_key: str
    ) -> dict[str, Any] | None:
        docs = self.container.documents
        return await self._request("create", lambda: docs.create(document, partition_key), WRITE_RU)

    async def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        container = self.container

        def write() -> dict[str, Any]:
            before = container.documents.read(str(document["id"]), partition_key)
            after = container.documents.replace(document, partition_key, etag)
            container.seen_replace(self.instance, before, after)
            return after

        return await self._request("replace", write, WRITE_RU)

    async def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        docs = self.container.documents
        return await self._request(
            "delete", lambda: docs.delete(item_id, partition_key, etag), WRITE_RU
        )

    async def _request(
        self, kind: str, operation: Callable[[], T], units: float | Callable[[T], float]
    ) -> T:
        """``operation`` after the latency, once the budget admits it (a 429 retried as the
        SDK retries it); its result."""
        container, waited = self.container, 0.0
        loop = asyncio.get_running_loop()
        for attempt in range(SDK_RETRIES + 1):
            container.requests[(self.instance, kind)] += 1
            await asyncio.sleep(container.delay())
            if self.crashed:
                raise CrashedError(f"instance {self.instance} crashed")
            retry_after = container.throughput.admit(loop.time())
            if retry_after is None:
                result = operation()
                charge = units(result) if callable(units) else units
                container.throughput.charge(charge)
                container.units += charge
                return result
            container.requests[(self.instance, "429")] += 1
            if attempt == SDK_RETRIES or waited + retry_after > SDK_MAX_WAIT:
                break
            await asyncio.sleep(retry_after)
            waited += retry_after
        raise CosmosHttpResponseError(  # type: ignore[no-untyped-call]
            status_code=429, message="Request rate is large"
        )


def _query_units(result: list[dict[str, Any]]) -> float:
    return QUERY_RU + QUERY_RU_PER_DOCUMENT * len(result)


class SimulatedFeedSource(InMemoryFeedSource):
    """The in-memory feed as one instance's aio source: refuses all once it crashed."""

    def __init__(self, feed: InMemoryFeed, store: SimulatedLeaseStore) -> None:
        super().__init__(feed)
        self._store = store

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
        return await super().read(lease, position, start, mode=mode, max_items=max_items)

    def _check(self) -> None:
        if self._store.crashed:
            raise CrashedError(f"instance {self._store.instance} crashed")


@dataclass
class Instance:
    name: str
    processor: ChangeFeedProcessor
    store: SimulatedLeaseStore


class SimulatedFleet:
    """Processors named ``i000``, ``i001``, ... of one processor over ``feed`` (the in-memory
    feed; ``partitions`` of them when not given) and one ``SimulatedLeaseContainer``. Use it
    inside ``VirtualClock.run``; ``options`` are the processors' (lease intervals, poll delay)."""

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
        **options: Any,
    ) -> None:
        self.clock = clock
        #: The instances balance and renew as .NET's processor does (for comparison).
        self.dotnet = dotnet
        self.feed = feed or InMemoryFeed(partitions, clock=clock.now)
        self.container = SimulatedLeaseContainer(
            clock, latency=latency, request_units=request_units, seed=seed
        )
        self.options: dict[str, Any] = {"processor_name": "sim", **options}
        self.instances: dict[str, Instance] = {}
        self.gone: set[str] = set()
        self._random = random.Random(seed + 1)
        self._next = 0
        #: Each change handled: its (id, _lsn) -> the instances that were given it, in order.
        self.deliveries: defaultdict[tuple[str, int], list[str]] = defaultdict(list)
        #: Batches handed over more than the expiration interval after the receiving instance's
        #: last write of their lease: (time, instance, lease token, seconds since that write).
        self.late_batches: list[tuple[float, str, str, float]] = []
        self.failures: list[tuple[str, str, str]] = []
        self._written: list[str] = []
        #: (instance, change id) -> (when it was first given it, the lease token).
        self._given: dict[tuple[str, str], tuple[float, str]] = {}
        #: (virtual time, the lease container's requests so far), each step of ``until_even``.
        self.samples: list[tuple[float, int]] = []

    @property
    def expiration(self) -> float:
        return float(self.options.get("lease_expiration_interval", 60.0))

    async def add(self, count: int, *, within: float = 1.0) -> list[str]:
        """Start ``count`` instances, each at a random moment within ``within`` seconds."""
        names = [f"i{self._next + n:03d}" for n in range(count)]
        self._next += count
        offsets = sorted(self._random.uniform(0, within) for _ in names)
        started = 0.0
        for name, offset in zip(names, offsets, strict=True):
            await asyncio.sleep(offset - started)
            started = offset
            await self._start(name)
        return names

    async def _start(self, name: str) -> None:
        store = SimulatedLeaseStore(self.container, name)

        async def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
            self._handled(name, context.lease_token, changes)

        processor = ChangeFeedProcessor(
            SimulatedFeedSource(self.feed, store),
            store,
            instance_name=name,
            handler=handle,
            on_error=lambda failure: self.failures.append(
                (name, failure.during, type(failure.error).__name__)
            ),
            **self.options,
        )
        if self.dotnet:  # .NET's EqualPartitionsBalancingStrategy
            processor._planner = dotnet_round
        self.instances[name] = Instance(name, processor, store)
        for attempt in range(START_ATTEMPTS):  # as an orchestrator restarts a failed start
            try:
                await processor.start()
                if self.dotnet and processor._manager is not None:
                    processor._manager.read_before_renew = True  # .NET's renewal: a read first
                return
            except Exception:
                if attempt == START_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(START_RETRY)

    def _handled(self, name: str, token: str, changes: list[dict[str, Any]]) -> None:
        now = self.clock.elapsed
        written = self.container.written.get((name, token))
        if written is not None and now - written > self.expiration:
            self.late_batches.append((now, name, token, now - written))
        for change in changes:
            self.deliveries[(str(change["id"]), int(change.get("_lsn", 0)))].append(name)
            self._given.setdefault((name, str(change["id"])), (now, token))

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

    def duplicates(self) -> int:
        """Changes given more than once."""
        return sum(len(given) - 1 for given in self.deliveries.values() if len(given) > 1)

    def lost_checkpoints(self) -> int:
        """Changes given again after their first instance held on to the lease past the
        expiry bound without writing their checkpoint (it was taken as expired, or released
        unwritten) -- not those given again because one of the two instances took the lease
        from the other while it was not expired (a steal: the batch the owner had in flight,
        or read, which it hands over before it learns of the steal: the README's at-least-once
        on a move)."""
        lost = 0
        for (change_id, _), given in self.deliveries.items():
            for first, again in itertools.pairwise(given):
                if first == again or not self._stolen_between(first, again, change_id):
                    lost += 1
        return lost

    def _stolen_between(self, first: str, again: str, change_id: str) -> bool:
        """Whether one of the two instances given ``change_id`` stole its lease from the
        other (``Move.stolen``) around when they were given it."""
        given_at, token = self._given[(first, change_id)]
        return any(
            move.stolen and abs(move.at - given_at) <= self.expiration
            for move in self.container.moves
            if move.token == token and {move.was, move.to} == {first, again}
        )

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

    def undelivered(self) -> list[str]:
        """The changes written (``write``) that no instance was given."""
        given = {change_id for change_id, _ in self.deliveries}
        return [change_id for change_id in self._written if change_id not in given]

    def requests_between(self, began: float, ended: float) -> float:
        """Requests per second between two virtual times (from the ``until_even`` samples)."""
        inside = [(at, count) for at, count in self.samples if began <= at <= ended]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return 0.0
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    def set_budget(self, request_units: float | None) -> None:
        """Give the lease container this many request units a second from now (None: no
        limit)."""
        self.container.throughput = Throughput(request_units)

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

    async def clock_sleep(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass."""
        await asyncio.sleep(seconds)
