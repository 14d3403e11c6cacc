"""cosmos-changefeed's processor beside its floors, in one run against the local Cosmos DB
endpoint (issues 64 and 71):

* **Throughput per lease**: one physical partition (one lease) holding a backlog, read from
  the beginning to the end by the sync processor and by a bare ``query_items_change_feed``
  loop over the same documents (nothing written), alternated, ``ROUNDS`` times each: documents
  per second **from start to end** -- the processor's from the call to ``start()`` (its lease
  store initialised, its lease acquired: about fifteen requests, a few tenths of a second on a
  loaded machine) to its last batch, the loop's from its ``read_feed_ranges`` to its last page
  -- the median of the rounds. The backlog (``LARGE`` documents in pages of 1,000, ``DOCS`` in
  pages of 100: each about five seconds of reading) makes the start-up a few hundredths of the
  figure, not the figure. Rows (each with its own aim, ``ROWS``):

  - pages of 1,000, a checkpoint per batch (the default): aim 0.9x;
  - pages of 1,000, a handler that waits ``HANDLER_WAIT`` (5 ms) a batch, as one that writes
    somewhere does, and a loop that waits as long after each page: aim 1.3x -- the processor
    reads the next page while the handler waits (issue 90), the loop one after the other;
  - the same two with the aio processor and a loop on azure-cosmos's aio client (the wait an
    ``asyncio.sleep``): aims 0.9x and 1.3x;
  - the same two aio rows again, the clients of both sides made as cosmos-outbox makes them
    for its relay where the process has no proxy or netrc setting (azure-core's
    ``AioHttpTransport(use_env_settings=False)``): aiohttp then writes a request at once,
    instead of looking up the proxy and the netrc in a thread first, so the aio processor's
    next read goes out while a page is parsed, as the sync one's does: aims 0.9x and 1.3x;
  - pages of 100 with the opt-in ``CheckpointPolicy(batches=100, seconds=1.0)``: aim 0.9x;
  - pages of 100, a checkpoint per batch, in **Azure's shape**: a round trip of
    ``ROUND_TRIP`` seconds on every request of both sides (an in-region gateway request is a
    few milliseconds), waited out in azure-core's public ``raw_response_hook`` (the thread that
    made the request sleeps: no core is held; this machine's kernel has no ``netem``): aim
    0.85x;
  - pages of 100, a checkpoint per batch, no round trip: no aim -- what the policy buys.

  The six rows of pages of 1,000 (0, 1, 5, 6, 7 and 8: ``python -m bench.changefeed 0,1,5,6,7,8``)
  also run the processor with ``checkpoint_interval=CHECKPOINT_INTERVAL`` (at most one checkpoint
  per lease a second), in the same alternated rounds, its figure beside the per-batch one: aims
  0.95x (an empty handler) and 1.3x (5 ms). Each processor's **lease-container requests a second**
  over its run (its start, its listing, renewals and checkpoints: every request its lease
  container's client sent, counted by azure-core's ``raw_response_hook`` on a client of its own)
  say what the interval saves on a busy feed. Under each of these rows, round by round, the
  processor's **start**: the seconds from ``start()`` to its first batch handed to the handler
  (and those ``start()`` itself took: the store initialised), the requests its lease container's
  client and its monitored container's client sent before that batch, and the seconds the
  processor was later to its first batch than the loop to its first page beside the seconds it
  took more than the loop over the whole backlog (the gap): how much of the gap the start
  explains.

  A checkpoint is a request: against an endpoint on the same machine it costs the client (and
  the endpoint) about what the read it follows costs, which is why the default cannot reach
  0.9x at pages of 100 there, and why the policy exists. Before the rows, the endpoint answers
  one query with a result: funcstack starts its query thread at its first such query (about a
  second under load), which the processor's first lease listing would otherwise pay.
* **Takeover**: an instance in a process of its own owns the leases of 4 partitions and is
  SIGKILLed; the time until another instance owns them all, beside the protocol's bound (the
  expiration interval plus one acquire interval: 2 s + 0.25 s here).
* **Memory per lease**: the resident memory a process adds per lease it owns (the sync
  processor: 2 threads per lease), 32 partitions against 1, beside a bare poller that keeps one
  thread and one continuation per partition.

``measure()`` returns the figures; ``python -m bench.changefeed`` prints them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from azure.core.pipeline.transport import AioHttpTransport
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from cosmos_changefeed import ChangeFeedProcessor, CheckpointPolicy, Lease, LeaseContext
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor
from funcstack.cosmos import CosmosEndpoint, start_cosmos

DOCS = 60_000
LARGE = 200_000
ROUNDS = 3
#: The round trip the Azure-shaped row adds to every request (seconds).
ROUND_TRIP = 0.004
EXPIRATION, ACQUIRE = 2.0, 0.25
PARTITIONS_HEADER = "x-funcstack-physical-partitions"
POLICY = CheckpointPolicy(batches=100, seconds=1.0)
#: The interval the rows of pages of 1,000 are also measured with (``checkpoint_interval``).
CHECKPOINT_INTERVAL = 1.0
#: What a handler that does I/O waits per batch (the loop waits as long per page): the
#: processor reads the next page meanwhile (issue 90).
HANDLER_WAIT = 0.005


@dataclass(frozen=True)
class Row:
    """One throughput row: the processor's page size and checkpoint policy, with the round trip
    or not, its aim (None: none), the wait of its handler -- and of the loop -- per batch, and
    the flavour (the processor's and the loop's client: sync or aio)."""

    label: str
    page_size: int
    checkpoint: CheckpointPolicy
    round_trip: bool
    aim: float | None
    wait: float = 0.0
    flavour: str = "sync"
    #: The aim with ``checkpoint_interval=CHECKPOINT_INTERVAL``, measured beside (None: not).
    interval_aim: float | None = None
    #: Whether the aio clients read the proxy and netrc settings from the environment
    #: (azure-core's default) or not (``use_env_settings=False``, as cosmos-outbox builds them).
    trusts_env: bool = True


#: The aio rows, on clients that read the environment (azure-core's default).
_AIO_ROWS = (
    Row(
        "aio: pages of 1,000, a checkpoint per batch (the default)",
        1000,
        CheckpointPolicy(),
        False,
        0.9,
        flavour="aio",
        interval_aim=0.95,
    ),
    Row(
        f"aio: pages of 1,000, a handler that waits {HANDLER_WAIT * 1000:.0f} ms a batch",
        1000,
        CheckpointPolicy(),
        False,
        1.3,
        HANDLER_WAIT,
        flavour="aio",
        interval_aim=1.3,
    ),
)

ROWS: tuple[Row, ...] = (
    Row(
        "pages of 1,000, a checkpoint per batch (the default)",
        1000,
        CheckpointPolicy(),
        False,
        0.9,
        interval_aim=0.95,
    ),
    Row(
        f"pages of 1,000, a handler that waits {HANDLER_WAIT * 1000:.0f} ms a batch (the loop "
        "as long a page)",
        1000,
        CheckpointPolicy(),
        False,
        1.3,
        HANDLER_WAIT,
        interval_aim=1.3,
    ),
    Row("pages of 100, CheckpointPolicy(batches=100, seconds=1.0)", 100, POLICY, False, 0.9),
    Row(
        f"pages of 100, a checkpoint per batch, a {ROUND_TRIP * 1000:.0f} ms round trip",
        100,
        CheckpointPolicy(),
        True,
        0.85,
    ),
    Row(
        "pages of 100, a checkpoint per batch, no round trip", 100, CheckpointPolicy(), False, None
    ),
    *_AIO_ROWS,
    *(
        replace(
            row,
            label=row.label.replace("aio:", "aio, clients that do not read the environment:"),
            trusts_env=False,
        )
        for row in _AIO_ROWS
    ),
)


def _aio_client(local: CosmosEndpoint, row: Row, **options: Any) -> AsyncCosmosClient:
    """An aio client of the endpoint for ``row`` (its transport not reading the environment
    when the row says so)."""
    if not row.trusts_env:
        options["transport"] = AioHttpTransport(use_env_settings=False)
    return AsyncCosmosClient(local.endpoint, local.key, **options)


def _container(database: DatabaseProxy, partitions: int, path: str = "/pk") -> ContainerProxy:
    return database.create_container(
        f"c{uuid.uuid4().hex[:8]}",
        partition_key=PartitionKey(path=path),
        headers={PARTITIONS_HEADER: str(partitions)},
    )


def _load(container: ContainerProxy, docs: int) -> None:
    """``docs`` documents, 100 to a partition key, written in transactional batches of 100."""
    for key in range(docs // 100):
        operations: list[tuple[str, tuple[dict[str, Any]]]] = [
            ("create", ({"id": f"d{key}-{n}", "pk": f"k{key}", "n": n},)) for n in range(100)
        ]
        container.execute_item_batch(operations, partition_key=f"k{key}")


def _warm(database: DatabaseProxy) -> None:
    """funcstack's query thread started (its first query with a result starts it)."""
    container = _container(database, 1, "/id")
    container.create_item({"id": "warm"})
    assert list(container.query_items("SELECT * FROM c", enable_cross_partition_query=True))


@dataclass(frozen=True)
class LoopRun:
    """One loop's run: documents a second from its first request to its last page, and the
    seconds from its first request to its first page."""

    per_s: float
    first_s: float


def _bare_loop(container: ContainerProxy, page_size: int, docs: int, wait: float = 0.0) -> LoopRun:
    """The floor: the whole (one-partition) feed read page by page, from the beginning (and
    ``wait`` seconds after each page, as a handler that does I/O would); documents per second
    from its first request to its last page."""
    started = time.perf_counter()
    (feed_range,) = list(container.read_feed_ranges())
    read, continuation = 0, None
    last, first = started, 0.0
    while True:
        kwargs: dict[str, Any] = {"max_item_count": page_size}
        if continuation:
            kwargs["continuation"] = continuation
        else:
            kwargs.update(feed_range=feed_range, start_time="Beginning")
        pager = container.query_items_change_feed(**kwargs).by_page()
        page = next(pager, None)
        items = list(page) if page is not None else []
        if not items:
            break
        if not read:
            first = time.perf_counter() - started
        read += len(items)
        if wait:
            time.sleep(wait)
        last = time.perf_counter()
        continuation = pager.continuation_token  # type: ignore[attr-defined]
    assert read == docs, read
    return LoopRun(docs / (last - started), first)


class Requests:
    """azure-core's ``raw_response_hook`` on a client of a processor's lease container: its
    requests counted (and, for a row in Azure's shape, the round trip waited out)."""

    def __init__(self, round_trip: bool = False) -> None:
        self.count = 0
        self.round_trip = round_trip

    def __call__(self, _response: Any) -> None:
        self.count += 1
        if self.round_trip:
            time.sleep(ROUND_TRIP)


@dataclass(frozen=True)
class Run:
    """One processor's run: documents a second, and its lease container's requests a second,
    from its start to its last batch; and its start: the seconds from ``start()`` to its first
    batch handed to the handler, and the requests its lease container's client and its
    monitored container's client sent before it."""

    per_s: float
    lease_requests_per_s: float
    first_s: float = 0.0
    lease_requests_first: int = 0
    monitored_requests_first: int = 0
    #: The seconds ``start()`` took (the store initialised; the lease is acquired after).
    start_s: float = 0.0


class _Seen:
    """What a processor's handler saw, made its ``Run``: its first batch (when, and the requests
    each client sent before it), its last (when, and the lease requests by then), and how many
    changes. The sync and the aio runs share it; only their waits differ."""

    def __init__(self, docs: int, leases: Requests, monitored: Requests | None) -> None:
        self.docs, self.leases, self.monitored = docs, leases, monitored
        self.count = self.at_last = self.first_leases = self.first_monitored = 0
        self.monitored_before = 0
        self.started = self.first = self.last = 0.0

    def starting(self) -> None:
        """Just before ``start()``: the clock and the monitored requests from here."""
        self.monitored_before = self.monitored.count if self.monitored is not None else 0
        self.started = time.perf_counter()

    def begun(self) -> None:
        """A batch handed to the handler, before its wait."""
        if not self.count:
            self.first = time.perf_counter() - self.started
            self.first_leases = self.leases.count
            if self.monitored is not None:
                self.first_monitored = self.monitored.count - self.monitored_before

    def ended(self, changes: int) -> bool:
        """The batch handled: whether every change is read."""
        self.last, self.at_last = time.perf_counter(), self.leases.count
        self.count += changes
        return self.count >= self.docs

    def run(self, returned: float) -> Run:
        took = self.last - self.started
        return Run(
            self.docs / took,
            self.at_last / took,
            self.first,
            self.first_leases,
            self.first_monitored,
            returned,
        )


def _processor(
    local: CosmosEndpoint,
    container: ContainerProxy,
    database: DatabaseProxy,
    row: Row,
    docs: int,
    interval: float | None = None,
    monitored: Requests | None = None,
) -> Run:
    """The sync processor reading the same documents (its handler waits ``row.wait`` seconds a
    batch; ``checkpoint_interval=interval``), its lease container's requests counted (and its
    monitored container's, by ``monitored``: the hook of ``container``'s client)."""
    leases = database.create_container(
        f"l{uuid.uuid4().hex[:8]}", partition_key=PartitionKey(path="/id"), default_ttl=-1
    )
    requests = Requests(row.round_trip)
    counted = CosmosClient(local.endpoint, local.key, raw_response_hook=requests)
    done = threading.Event()
    seen = _Seen(docs, requests, monitored)

    def handler(_context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        seen.begun()
        if row.wait:
            time.sleep(row.wait)
        if seen.ended(len(changes)):
            done.set()

    processor = ChangeFeedProcessor(
        container,
        counted.get_database_client(database.id).get_container_client(leases.id),
        processor_name="bench",
        instance_name="one",
        handler=handler,
        start_from="beginning",
        max_items=row.page_size,
        poll_delay=0.05,
        checkpoint=row.checkpoint,
        checkpoint_interval=interval,
    )
    seen.starting()
    processor.start()
    returned = time.perf_counter() - seen.started
    try:
        assert done.wait(300), f"{seen.count} of {docs}"
        return seen.run(returned)
    finally:
        processor.stop()


def _throughput(
    local: CosmosEndpoint,
    database: DatabaseProxy,
    backlogs: dict[int, ContainerProxy],
    only: tuple[int, ...] | None = None,
    monitored: Requests | None = None,
) -> dict[str, dict[str, Any]]:
    """Each row of ``ROWS``: the loop and the processor (and, for a row with an
    ``interval_aim``, the processor with ``checkpoint_interval``), alternated, their medians
    (``monitored``: the hook of ``database``'s client, counting the monitored container's
    requests of the sync processor's start)."""
    far = CosmosClient(
        local.endpoint,
        local.key,
        raw_response_hook=lambda _response: time.sleep(ROUND_TRIP),
    ).get_database_client(database.id)
    rows: dict[str, dict[str, Any]] = {}
    chosen = [row for place, row in enumerate(ROWS) if only is None or place in only]
    for row in chosen:
        db = far if row.round_trip else database
        docs = LARGE if row.page_size == 1000 else DOCS
        container = db.get_container_client(backlogs[docs].id)
        loops: list[LoopRun] = []
        runs: dict[float | None, list[Run]] = {None: []}
        if row.interval_aim is not None:
            runs[CHECKPOINT_INTERVAL] = []
        for _ in range(ROUNDS):
            if row.flavour == "aio":
                names = (database.id, backlogs[docs].id)
                loops.append(asyncio.run(_bare_loop_aio(local, names, row, docs)))
                for interval, made in runs.items():
                    made.append(asyncio.run(_processor_aio(local, names, row, docs, interval)))
                continue
            loops.append(_bare_loop(container, row.page_size, docs, row.wait))
            for interval, made in runs.items():
                made.append(
                    _processor(
                        local,
                        container,
                        db,
                        row,
                        docs,
                        interval,
                        None if row.round_trip else monitored,
                    )
                )
        loop = statistics.median(r.per_s for r in loops)
        for interval, made in runs.items():
            label = row.label
            if interval is not None:
                label = f"{label}, checkpoint_interval={interval:g} s"
            processor = statistics.median(r.per_s for r in made)
            rows[label] = {
                "loop_per_s": loop,
                "processor_per_s": processor,
                "ratio": processor / loop,
                "docs": docs,
                "aim": row.aim if interval is None else row.interval_aim,
                "lease_requests_per_s": statistics.median(r.lease_requests_per_s for r in made),
                "rounds": {
                    "loop": [r.per_s for r in loops],
                    "processor": [r.per_s for r in made],
                },
                "start": [_start(docs, lr, r) for lr, r in zip(loops, made, strict=True)],
            }
    return rows


def _start(docs: int, loop: LoopRun, run: Run) -> dict[str, float]:
    """One round's start beside its whole: the seconds to the processor's first batch and to
    the loop's first page, the requests before the first batch, the seconds the processor took
    more than the loop over the whole backlog (the gap) and the share of it its later first
    batch explains."""
    gap = docs / run.per_s - docs / loop.per_s
    later = run.first_s - loop.first_s
    return {
        "start_s": run.start_s,
        "first_s": run.first_s,
        "loop_first_s": loop.first_s,
        "lease_requests": run.lease_requests_first,
        "monitored_requests": run.monitored_requests_first,
        "gap_s": gap,
        "later_s": later,
        "explained": later / gap if gap > 0 else float("nan"),
    }


async def _bare_loop_aio(
    local: CosmosEndpoint, names: tuple[str, str], row: Row, docs: int
) -> LoopRun:
    """``_bare_loop`` with azure-cosmos's aio client (the handler's wait an ``asyncio.sleep``)."""
    async with _aio_client(local, row) as client:
        container = client.get_database_client(names[0]).get_container_client(names[1])
        started = time.perf_counter()
        (feed_range,) = [r async for r in container.read_feed_ranges()]
        read, continuation, last, first = 0, None, started, 0.0
        while True:
            kwargs: dict[str, Any] = {"max_item_count": row.page_size}
            if continuation:
                kwargs["continuation"] = continuation
            else:
                kwargs.update(feed_range=feed_range, start_time="Beginning")
            pager = container.query_items_change_feed(**kwargs).by_page()
            items: list[dict[str, Any]] = []
            async for page in pager:
                items = [item async for item in page]
                break
            if not items:
                break
            if not read:
                first = time.perf_counter() - started
            read += len(items)
            if row.wait:
                await asyncio.sleep(row.wait)
            last = time.perf_counter()
            continuation = pager.continuation_token  # type: ignore[attr-defined]
    assert read == docs, read
    return LoopRun(docs / (last - started), first)


async def _processor_aio(
    local: CosmosEndpoint,
    names: tuple[str, str],
    row: Row,
    docs: int,
    interval: float | None = None,
) -> Run:
    """``_processor`` with the aio processor (its handler awaits the wait)."""
    requests, monitored = Requests(), Requests()
    async with (
        _aio_client(local, row, raw_response_hook=monitored) as client,
        _aio_client(local, row, raw_response_hook=requests) as counted,
    ):
        database = client.get_database_client(names[0])
        leases = await database.create_container(
            f"l{uuid.uuid4().hex[:8]}", partition_key=PartitionKey(path="/id"), default_ttl=-1
        )
        done, seen = asyncio.Event(), _Seen(docs, requests, monitored)

        async def handler(_context: LeaseContext, changes: list[dict[str, Any]]) -> None:
            seen.begun()
            if row.wait:
                await asyncio.sleep(row.wait)
            if seen.ended(len(changes)):
                done.set()

        processor = AsyncChangeFeedProcessor(
            database.get_container_client(names[1]),
            counted.get_database_client(names[0]).get_container_client(leases.id),
            processor_name="bench",
            instance_name="one",
            handler=handler,
            start_from="beginning",
            max_items=row.page_size,
            poll_delay=0.05,
            checkpoint=row.checkpoint,
            checkpoint_interval=interval,
        )
        seen.starting()
        await processor.start()
        returned = time.perf_counter() - seen.started
        try:
            await asyncio.wait_for(done.wait(), 300)
            return seen.run(returned)
        finally:
            await processor.stop()


_INSTANCE = textwrap.dedent(
    """
    import os, time
    from azure.cosmos import CosmosClient
    from cosmos_changefeed import ChangeFeedProcessor

    client = CosmosClient(os.environ["ENDPOINT"], os.environ["KEY"])
    database = client.get_database_client(os.environ["DATABASE"])
    processor = ChangeFeedProcessor(
        database.get_container_client(os.environ["MONITORED"]),
        database.get_container_client(os.environ["LEASES"]),
        processor_name="bench", instance_name=os.environ["NAME"],
        handler=lambda context, changes: None, poll_delay=0.2, lease_acquire_interval=0.25,
        lease_renew_interval=0.5, lease_expiration_interval=2.0,
    )
    processor.start()
    processor.wait_until_listening(60)
    print(len(processor.owned_leases), flush=True)
    while True:
        time.sleep(1)
    """
)

_BARE = textwrap.dedent(
    """
    import os, threading, time
    from azure.cosmos import CosmosClient

    client = CosmosClient(os.environ["ENDPOINT"], os.environ["KEY"])
    container = client.get_database_client(os.environ["DATABASE"]).get_container_client(
        os.environ["MONITORED"])
    ready = threading.Barrier(int(os.environ["RANGES"]) + 1)

    def poll(feed_range):
        pager = container.query_items_change_feed(feed_range=feed_range, start_time="Now").by_page()
        continuation = None
        for page in pager:
            list(page)
            continuation = pager.continuation_token  # type: ignore[attr-defined]
        ready.wait()
        while True:
            time.sleep(0.2)
            kwargs = {"continuation": continuation} if continuation else {
                "feed_range": feed_range, "start_time": "Now"}
            pager = container.query_items_change_feed(**kwargs).by_page()
            for page in pager:
                list(page)
                continuation = pager.continuation_token  # type: ignore[attr-defined]

    for feed_range in container.read_feed_ranges():
        threading.Thread(target=poll, args=(feed_range,), daemon=True).start()
    ready.wait()
    print(int(os.environ["RANGES"]), flush=True)
    while True:
        time.sleep(1)
    """
)


def _spawn(code: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    owned = int(process.stdout.readline())
    return process, owned


def _rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text("ascii").splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def _env(
    local: CosmosEndpoint, database: DatabaseProxy, monitored: ContainerProxy
) -> dict[str, str]:
    return {
        "ENDPOINT": local.endpoint,
        "KEY": local.key,
        "DATABASE": database.id,
        "MONITORED": monitored.id,
    }


def _memory_kb(local: CosmosEndpoint, database: DatabaseProxy, code: str) -> dict[int, int]:
    found: dict[int, int] = {}
    for partitions in (1, 32):
        monitored = _container(database, partitions)
        env = {
            **_env(local, database, monitored),
            "LEASES": _container(database, 1, "/id").id,
            "NAME": "memory",
            "RANGES": str(partitions),
        }
        process, owned = _spawn(code, env)
        try:
            assert owned == partitions, (owned, partitions)
            time.sleep(1.0)  # a few polls each
            found[partitions] = _rss_kb(process.pid)
        finally:
            process.kill()
            process.wait()
    return found


def _takeover_s(local: CosmosEndpoint, database: DatabaseProxy) -> float:
    monitored, leases = _container(database, 4), _container(database, 1, "/id")
    env = {**_env(local, database, monitored), "LEASES": leases.id, "NAME": "doomed"}
    process, owned = _spawn(_INSTANCE, env)
    assert owned == 4
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed = time.perf_counter()
    heir = ChangeFeedProcessor(
        monitored,
        leases,
        processor_name="bench",
        instance_name="heir",
        handler=lambda _c, _d: None,
        poll_delay=0.2,
        lease_acquire_interval=ACQUIRE,
        lease_renew_interval=0.5,
        lease_expiration_interval=EXPIRATION,
    )
    heir.start()
    try:
        while len(heir.owned_leases) < 4:
            assert time.perf_counter() - killed < 30
            time.sleep(0.01)
        return time.perf_counter() - killed
    finally:
        heir.stop()
        assert all(
            Lease.from_document(d).owner is None
            for d in leases.read_all_items()
            if "LeaseToken" in d
        )


def measure(
    *, rows: tuple[int, ...] | None = None, throughput_only: bool = False
) -> dict[str, Any]:
    """The figures; ``rows``: only these of ``ROWS`` (by position); ``throughput_only``: no
    takeover and no memory."""
    logging.getLogger("azure").setLevel(logging.WARNING)
    logging.getLogger("cosmos_changefeed").setLevel(logging.WARNING)
    local = start_cosmos()
    try:
        monitored = Requests()
        client = CosmosClient(local.endpoint, local.key, raw_response_hook=monitored)
        database = client.create_database(f"bench-{uuid.uuid4().hex[:8]}")
        _warm(database)
        backlogs = {docs: _container(database, 1) for docs in (DOCS, LARGE)}
        for docs, container in backlogs.items():
            _load(container, docs)
        throughput = _throughput(local, database, backlogs, rows, monitored)
        if throughput_only:
            return {"docs": DOCS, "throughput": throughput}
        takeovers = [_takeover_s(local, database) for _ in range(2)]
        processor_kb = _memory_kb(local, database, _INSTANCE)
        bare_kb = _memory_kb(local, database, _BARE)
        per_lease = (processor_kb[32] - processor_kb[1]) / 31
        per_range = (bare_kb[32] - bare_kb[1]) / 31
        return {
            "docs": DOCS,
            "throughput": throughput,
            "takeover_s": statistics.median(takeovers),
            "takeover_bound_s": EXPIRATION + ACQUIRE,
            "takeover_ratio": statistics.median(takeovers) / (EXPIRATION + ACQUIRE),
            "memory_kb": {"processor": processor_kb, "bare": bare_kb},
            "kb_per_lease": per_lease,
            "kb_per_bare_range": per_range,
            "memory_ratio": per_lease / per_range if per_range > 0 else float("nan"),
        }
    finally:
        local.stop()


def _start_line(rounds: list[dict[str, float]]) -> str:
    return "    start, round by round: " + "; ".join(
        f"first batch {r['first_s']:.3f} s after start() (which took {r['start_s']:.3f} s; "
        f"loop's first page "
        f"{r['loop_first_s']:.3f} s), {r['lease_requests']:.0f} lease + "
        f"{r['monitored_requests']:.0f} monitored requests before it; "
        f"{r['later_s']:+.3f} s of a {r['gap_s']:+.3f} s gap ({_explained(r)})"
        for r in rounds
    )


def _explained(r: dict[str, float]) -> str:
    """The share of the gap the start explains, in words where a share would mislead."""
    if r["gap_s"] <= 0:
        return "no gap: as fast as the loop or faster over the whole"
    if r["explained"] >= 1:
        return "all of it"
    return f"{r['explained']:.0%}"


def _throughput_lines(figures: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for label, row in figures["throughput"].items():
        lines.append(
            f"  throughput per lease, {row['docs']:,} documents start to end, {label}: "
            f"processor {row['processor_per_s']:,.0f}/s, bare query_items_change_feed loop "
            f"{row['loop_per_s']:,.0f}/s: {row['ratio']:.2f}x "
            f"({'aim >= ' + format(row['aim'], 'g') + 'x' if row['aim'] else 'no aim'}); "
            f"lease container {row['lease_requests_per_s']:,.1f} requests/s"
        )
        if "start" in row:
            lines.append(_start_line(row["start"]))
    return lines


def report(figures: dict[str, Any]) -> str:
    if "takeover_s" not in figures:
        return "\n".join(_throughput_lines(figures))
    return "\n".join(
        [
            *_throughput_lines(figures),
            f"  takeover after a SIGKILL (4 leases): {figures['takeover_s']:.2f} s, the bound "
            f"(expiry + acquire) {figures['takeover_bound_s']:.2f} s: "
            f"{figures['takeover_ratio']:.2f}x",
            f"  memory per lease: {figures['kb_per_lease']:,.0f} KB, a bare poller's per range "
            f"{figures['kb_per_bare_range']:,.0f} KB: {figures['memory_ratio']:.2f}x",
        ]
    )


if __name__ == "__main__":
    import sys

    # python -m bench.changefeed [row positions, e.g. 0,1: the throughput rows alone]
    picked = tuple(int(n) for n in sys.argv[1].split(",")) if len(sys.argv) > 1 else None
    print(report(measure(rows=picked, throughput_only=picked is not None)))
