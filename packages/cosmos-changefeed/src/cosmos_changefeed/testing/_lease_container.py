"""A lease container that answers as a provisioned Cosmos DB container does, for processors run
in virtual time (``_simulation.SimulatedFleet``): slowly, page by page, and past its request
units with 429s.

* **Physical partitions** (``physical_partitions``, default 1): a document lies in one, by a
  hash of its id (the lease container's partition key: ``/id``, or ``/partitionKey`` = the id);
  the budget of request units per second is split evenly between them, each a bucket refilled
  at its rate (a request is admitted while its bucket holds some, charged after, and refused
  with a 429 and a retry-after while it is empty) -- so a partition a whole fleet reads (the
  one that holds ``.info``) throttles while the others have room, as Cosmos DB budgets them.
* **A listing is a cross-partition query**: one page of at most ``page_size`` documents (the
  service's default for a query, 100) after another, in each physical partition in turn (at
  least one page each, empty or not); each page is a request of its own -- its latency, its
  charge, its 429s, retried alone -- and reads its partition as it is when it is served.
* **Charges** (request units, a model, not Azure's bill): a point read 1, a write (create,
  replace, delete) 10 -- a checkpoint is a replace --, a query page 3 plus 0.1 per document.
* **What it saw**: requests by instance and kind (429s counted again as "429"), the writes of
  the leases by purpose (``PURPOSES``: what changed between the stored and the written lease),
  every lease that changed hands (``Move``: how -- taken unowned, expired, stolen, handed over,
  released -- and where its checkpoint was), every checkpoint that moved back.

``SimulatedLeaseStore`` is one instance's view of it (an ``aio.LeaseStore``): each request after
a latency (jittered +-50 %, seeded), a 429 retried as azure-cosmos does by default (9 times, 30 s
of waiting in all, each after the retry-after) and then raised as azure-cosmos's
``CosmosHttpResponseError`` (429), as ``CosmosLeaseStore`` would; a crashed instance's store
refuses everything.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from azure.cosmos.exceptions import CosmosHttpResponseError

from cosmos_changefeed._leases import Lease, parse_time
from cosmos_changefeed._store import InMemoryDocuments
from cosmos_changefeed.aio._store_async import LeaseStore
from cosmos_changefeed.testing._virtual import VirtualClock

T = TypeVar("T")

#: Request units per operation (see the module).
READ_RU, WRITE_RU, QUERY_RU, QUERY_RU_PER_DOCUMENT = 1.0, 10.0, 3.0, 0.1
#: Documents per page of a query (the service's default page size).
PAGE_SIZE = 100
#: azure-cosmos's default throttle retries: attempts after the first, and the wait in all.
SDK_RETRIES, SDK_MAX_WAIT = 9, 30.0
KINDS = ("list", "read", "create", "replace", "delete")
#: What a write of a lease did: took it (``Owner`` set), released it (cleared), handed it over
#: (set by its owner to another), asked for it (``handOver`` written alone), checkpointed it
#: (``ContinuationToken`` moved), renewed it (``timestamp`` alone).
PURPOSES = ("acquire", "release", "hand-over", "request", "checkpoint", "renewal")


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
    """A lease that changed hands: an acquisition, a hand-over (``to`` set by ``was``), or a
    release (``to`` None)."""

    at: float
    token: str
    was: str | None
    to: str | None
    #: When ``was`` last wrote the lease (None: never, or no owner).
    was_written: float | None = None
    #: The instance that wrote the change, and the lease's expiration interval.
    writer: str | None = None
    expiration: float = 60.0
    #: The lease's checkpoint when it changed hands.
    continuation: str | None = None

    @property
    def how(self) -> str:
        """ "released", "unowned" (taken without an owner), "handed over" (by its owner),
        "expired" (taken from an owner that had not written it for the expiration interval)
        or "stolen" (taken from an owner that had)."""
        if self.to is None:
            return "released"
        if self.was is None:
            return "unowned"
        if self.writer == self.was:
            return "handed over"
        if self.was_written is None or self.at - self.was_written > self.expiration:
            return "expired"
        return "stolen"

    @property
    def stolen(self) -> bool:
        """Taken from an instance that wrote it within the expiration interval."""
        return self.how == "stolen"


def physical_partition(item_id: str, partitions: int) -> int:
    """The physical partition a lease container of ``partitions`` keeps ``item_id`` in."""
    digest = hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


@dataclass
class SimulatedLeaseContainer:
    """The lease container the fleet shares (see the module)."""

    #: The request units of a write (create, replace, delete): what a checkpoint costs.
    WRITE_UNITS: ClassVar[float] = WRITE_RU

    clock: VirtualClock
    latency: float = 0.005
    request_units: float | None = None
    seed: int = 0
    #: Physical partitions, which share ``request_units`` evenly.
    physical_partitions: int = 1
    #: Documents per page of a listing.
    page_size: int = PAGE_SIZE
    #: The processors' lease expiration interval (to tell an expired lease from a stolen one).
    expiration: float = 60.0
    documents: InMemoryDocuments = field(default_factory=InMemoryDocuments)
    #: Requests by (instance, kind), 429s included (kind "429" counts them again apart).
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Writes of leases by purpose (``PURPOSES``).
    writes: Counter[str] = field(default_factory=Counter)
    units: float = 0.0
    moves: list[Move] = field(default_factory=list)
    #: Checkpoints that moved a lease's continuation back: (token, from, to).
    regressions: list[tuple[str, str, str]] = field(default_factory=list)
    #: Per (instance, lease token): the virtual time of its last write of the lease.
    written: dict[tuple[str, str], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.physical_partitions < 1 or self.page_size < 1:
            raise ValueError("physical_partitions and page_size are 1 or more")
        self._random = random.Random(self.seed)
        self.set_budget(self.request_units)

    @property
    def throughput(self) -> Throughput:
        """The first physical partition's budget (the whole one's with one partition)."""
        return self.budgets[0]

    def set_budget(self, request_units: float | None) -> None:
        """``request_units`` a second from now, split between the physical partitions."""
        self.request_units = request_units
        share = None if request_units is None else request_units / self.physical_partitions
        self.budgets = [Throughput(share) for _ in range(self.physical_partitions)]

    def partition_of(self, item_id: str) -> int:
        return physical_partition(item_id, self.physical_partitions)

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

    def by_partition(self, prefix: str) -> list[list[tuple[str, str]]]:
        """The (id, partition key) of the documents under ``prefix``, per physical partition."""
        path = self.documents.partition_key_path
        found: list[list[tuple[str, str]]] = [[] for _ in range(self.physical_partitions)]
        for doc in self.documents.list_documents(prefix):
            item_id = str(doc["id"])
            key = item_id if path == "/id" else str(doc.get("partitionKey", item_id))
            found[self.partition_of(item_id)].append((item_id, key))
        return found

    def page(self, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """The documents of one page, as they are when it is served."""
        read = (self.documents.read(item_id, key) for item_id, key in keys)
        return [doc for doc in read if doc is not None]

    def seen_replace(self, instance: str, before: Mapping[str, Any] | None, after: Any) -> None:
        """What a successful replace did: its purpose, a lease that changed hands, a
        continuation that moved back, the writer's last write of the lease."""
        if before is None or "LeaseToken" not in after:
            return
        token = str(after["LeaseToken"])
        self.writes[_purpose(instance, before, after)] += 1
        if before.get("Owner") != after.get("Owner"):
            was = before.get("Owner")
            written = self.written.get((was, token)) if was else None
            self.moves.append(
                Move(
                    self.clock.elapsed,
                    token,
                    was,
                    after.get("Owner"),
                    written,
                    instance,
                    self.expiration,
                    before.get("ContinuationToken"),
                )
            )
        old, new = lsn_of(before.get("ContinuationToken")), lsn_of(after.get("ContinuationToken"))
        if old is not None and (new is None or new < old):
            self.regressions.append((token, str(old), str(new)))
        stamp = parse_time(after.get("timestamp"))
        if stamp is not None and after.get("Owner") == instance:
            self.written[(instance, token)] = (stamp - self.clock.now()).total_seconds() + (
                self.clock.elapsed
            )


def _purpose(writer: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What a write of a lease did (``PURPOSES``)."""
    if before.get("Owner") != after.get("Owner"):
        if not after.get("Owner"):
            return "release"
        return "hand-over" if before.get("Owner") == writer else "acquire"
    if before.get("ContinuationToken") != after.get("ContinuationToken"):
        return "checkpoint"
    if before.get("timestamp") == after.get("timestamp"):
        return "request"
    return "renewal"


def lsn_of(continuation: Any) -> int | None:
    """The LSN a continuation (the in-memory feed's etag, ``"<lsn>"``) stands at."""
    try:
        return int(str(continuation).strip('"')) if continuation else None
    except ValueError:
        return None


class SimulatedLeaseStore(LeaseStore):
    """One instance's view of a ``SimulatedLeaseContainer`` (see the module)."""

    def __init__(self, container: SimulatedLeaseContainer, instance: str) -> None:
        self.container, self.instance = container, instance
        self.crashed = False
        #: Every request of this instance answered 429 (after azure-cosmos's retries): as the
        #: physical partition that holds its leases throttles while the others' get through.
        self.refused = False

    async def partition_key_path(self) -> str:
        return self.container.documents.partition_key_path

    async def expires_documents(self) -> bool:
        return True

    async def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        container, found = self.container, []
        size = container.page_size
        listed: list[list[tuple[str, str]]] = []

        def page(partition: int, number: int) -> Callable[[], list[dict[str, Any]]]:
            def serve() -> list[dict[str, Any]]:
                if not listed:  # the query's first page: what it finds from there on
                    listed.extend(container.by_partition(prefix))
                return container.page(listed[partition][number * size : (number + 1) * size])

            return serve

        for partition in range(container.physical_partitions):
            number = 0
            while True:
                served = await self._request(
                    "list", partition, page(partition, number), _query_units
                )
                found += served
                if (number + 1) * size >= len(listed[partition]):
                    break
                number += 1
        return found

    async def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        docs = self.container.documents
        return await self._request(
            "read", self._partition(item_id), lambda: docs.read(item_id, partition_key), READ_RU
        )

    async def create(
        self, document: Mapping[str, Any], partition_key: str
    ) -> dict[str, Any] | None:
        docs = self.container.documents
        return await self._request(
            "create",
            self._partition(str(document["id"])),
            lambda: docs.create(document, partition_key),
            WRITE_RU,
        )

    async def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        container = self.container

        def write() -> dict[str, Any]:
            before = container.documents.read(str(document["id"]), partition_key)
            after = container.documents.replace(document, partition_key, etag)
            container.seen_replace(self.instance, before, after)
            return after

        return await self._request("replace", self._partition(str(document["id"])), write, WRITE_RU)

    async def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        docs = self.container.documents
        return await self._request(
            "delete",
            self._partition(item_id),
            lambda: docs.delete(item_id, partition_key, etag),
            WRITE_RU,
        )

    def _partition(self, item_id: str) -> int:
        return self.container.partition_of(item_id)

    async def _request(
        self,
        kind: str,
        partition: int,
        operation: Callable[[], T],
        units: float | Callable[[T], float],
    ) -> T:
        """``operation`` after the latency, once its physical partition's budget admits it (a
        429 retried as the SDK retries it); its result."""
        container, waited = self.container, 0.0
        loop = asyncio.get_running_loop()
        for attempt in range(SDK_RETRIES + 1):
            container.requests[(self.instance, kind)] += 1
            await asyncio.sleep(container.delay())
            if self.crashed:
                raise CrashedError(f"instance {self.instance} crashed")
            budget = container.budgets[partition % len(container.budgets)]
            retry_after = SDK_MAX_WAIT if self.refused else budget.admit(loop.time())
            if retry_after is None:
                result = operation()
                charge = units(result) if callable(units) else units
                budget.charge(charge)
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
