"""The local Cosmos DB endpoint's kept state (``state_dir``): a write it acknowledged is there
after its process is killed with SIGKILL right after the answer and started again, for every
kind of write (document operations, a transactional batch, databases, containers, offers),
with the same ``_rid`` / ``_self`` / ``_etag`` and LSN, as a write the service acknowledged is
durable; a state file of the earlier format (one JSON file, version 2) is converted once;
compaction under concurrent writes loses nothing; a journal line cut short by a crash is
dropped, a damaged one refuses the start naming the file.

Local only (no Azure counterpart for killing the service): these tests start their own
endpoints and never run against COSMOS_ENDPOINT.

States: the writes' chain is one state (each write on a database of its own, the physical
partitions' restart test too); its set-up, copied as a SIGKILL leaves it, is the journal tests'
(a line cut short, a damaged line: each damages a copy of its own); the two snapshot tests share
one state written with a snapshot after each write and one restart. Kept on a state of their own:
compaction under concurrent writes (its kill amid the writers and compactions is the subject)
and the earlier format (the old file is the subject).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey, exceptions
from azure.cosmos.partition_key import NonePartitionKeyValue

from cosmos_changefeed import read_again_on_headers_race
from funcstack.cosmos import (
    CosmosEndpoint,
    CosmosStartError,
    merge_partitions,
    physical_partitions,
    split_partition,
    start_cosmos,
)
from funcstack.deadlines import LONG, LOOPBACK, SHORT, wait_for

from .conftest import PK_PATH, unique
from .test_cosmos_partitions import KEYS, PARTITIONS_HEADER, ranges, raw, read_change_feed
from .test_cosmos_partitions import write as write_seq

pytestmark = [
    pytest.mark.integration,
]

FIXTURES = Path(__file__).parent / "fixtures"

Check = Callable[[CosmosClient], None]


@contextmanager
def endpoint(
    state: Path, *, fsync: bool = False, extra_args: list[str] | None = None
) -> Iterator[CosmosEndpoint]:
    """An endpoint keeping its state in ``state``; killed (SIGKILL) when the block ends, if the
    block has not killed it."""
    state.parent.mkdir(parents=True, exist_ok=True)
    cosmos = start_cosmos(
        state_dir=state,
        state_fsync=fsync,
        extra_args=extra_args,
        log_path=state.parent / "cosmos.log",
    )
    try:
        yield cosmos
    finally:
        kill(cosmos)


def kill(cosmos: CosmosEndpoint) -> None:
    process = cosmos.started()
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=LOOPBACK)
    cosmos.stop()  # closes its pipes; the process is gone


def client_of(cosmos: CosmosEndpoint) -> CosmosClient:
    return CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())


def lsn_of(proxy: ContainerProxy | DatabaseProxy) -> int:
    return int(proxy.client_connection.last_response_headers["lsn"])


def system(item: dict[str, Any]) -> dict[str, Any]:
    return {k: item[k] for k in ("id", "_rid", "_self", "_etag", "_ts")}


def setup(client: CosmosClient, db: str = "db") -> ContainerProxy:
    database = client.create_database(db)
    container = database.create_container("c", PartitionKey("/pk"), default_ttl=-1)
    container.create_item({"id": "a", "pk": "p1", "n": 1})
    container.create_item({"id": "b", "pk": "p2", "n": 2})
    return container


def contacts_of(client: CosmosClient, db: str = "db") -> ContainerProxy:
    return client.get_database_client(db).get_container_client("c")


def items_of(client: CosmosClient, db: str = "db") -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in contacts_of(client, db).read_all_items()}


# Each write, on a database of its own (`db`): done on an endpoint that kept `setup`'s state
# through a stop and a start (and the writes before it through a SIGKILL and a start), then
# killed at once after the answer; the check it returns runs against the endpoint started
# again on the same state.


def create(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    created = container.create_item({"id": "new", "pk": "p1", "n": 3})
    lsn = lsn_of(container)

    def check(client: CosmosClient) -> None:
        kept = contacts_of(client, db).read_item("new", "p1")
        assert system(kept) == system(created) and kept["n"] == 3
        assert lsn_of(contacts_of(client, db)) == lsn

    return check


def replace(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    replaced = container.replace_item("a", {"id": "a", "pk": "p1", "n": 10})

    def check(client: CosmosClient) -> None:
        kept = items_of(client, db)["a"]
        assert system(kept) == system(replaced) and kept["n"] == 10

    return check


def upsert(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    upserted = container.upsert_item({"id": "b", "pk": "p2", "n": 20})

    def check(client: CosmosClient) -> None:
        kept = items_of(client, db)["b"]
        assert system(kept) == system(upserted) and kept["n"] == 20

    return check


def delete(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    container.delete_item("a", "p1")
    lsn = lsn_of(container)

    def check(client: CosmosClient) -> None:
        assert sorted(items_of(client, db)) == ["b"]
        # the delete's LSN is kept: the next write gets a later one
        contacts_of(client, db).create_item({"id": "after", "pk": "p1"})
        assert lsn_of(contacts_of(client, db)) > lsn

    return check


def patch(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    patched = container.patch_item("a", "p1", [{"op": "incr", "path": "/n", "value": 41}])

    def check(client: CosmosClient) -> None:
        kept = items_of(client, db)["a"]
        assert system(kept) == system(patched) and kept["n"] == 42

    return check


def batch(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    results = container.execute_item_batch(
        [
            ("create", ({"id": "x", "pk": "p1"},)),
            ("replace", ("a", {"id": "a", "pk": "p1", "n": 100})),
            ("upsert", ({"id": "y", "pk": "p1"},)),
        ],
        partition_key="p1",
    )
    written = {r["resourceBody"]["id"]: r["resourceBody"] for r in results}

    def check(client: CosmosClient) -> None:
        kept = items_of(client, db)
        assert sorted(kept) == ["a", "b", "x", "y"]
        assert {k: system(kept[k]) for k in written} == {k: system(v) for k, v in written.items()}

    return check


def batch_with_fsync(client: CosmosClient, db: str) -> Check:
    """A batch on an endpoint started with --state-fsync: the answer also waits for the disk
    (group commit); the same promise."""
    return batch(client, db)


def delete_partition(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    container.delete_all_items_by_partition_key("p2")

    def check(client: CosmosClient) -> None:
        assert sorted(items_of(client, db)) == ["a"]

    return check


def create_container(client: CosmosClient, db: str) -> Check:
    database = client.get_database_client(db)
    rid = database.create_container("new", PartitionKey("/id")).read()["_rid"]

    def check(client: CosmosClient) -> None:
        assert client.get_database_client(db).get_container_client("new").read()["_rid"] == rid

    return check


def replace_container(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    client.get_database_client(db).replace_container(
        container, PartitionKey("/pk"), default_ttl=3600
    )

    def check(client: CosmosClient) -> None:
        assert contacts_of(client, db).read()["defaultTtl"] == 3600
        assert sorted(items_of(client, db)) == ["a", "b"]

    return check


def delete_container(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    client.get_database_client(db).delete_container(container)

    def check(client: CosmosClient) -> None:
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            contacts_of(client, db).read()

    return check


def create_database(client: CosmosClient, db: str) -> Check:
    rid = client.create_database(f"{db}-other").read()["_rid"]

    def check(client: CosmosClient) -> None:
        assert client.get_database_client(f"{db}-other").read()["_rid"] == rid

    return check


def delete_database(client: CosmosClient, db: str) -> Check:
    client.delete_database(db)

    def check(client: CosmosClient) -> None:
        assert db not in [d["id"] for d in client.list_databases()]

    return check


def replace_throughput(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    container.replace_throughput(900)

    def check(client: CosmosClient) -> None:
        assert contacts_of(client, db).get_throughput().offer_throughput == 900

    return check


def split(client: CosmosClient, db: str) -> Check:
    endpoint = str(client.client_connection.url_connection)
    children = split_partition(endpoint, db, "c")
    live = [p.id for p in physical_partitions(endpoint, db, "c")]

    def check(client: CosmosClient) -> None:
        kept = [
            p.id for p in physical_partitions(str(client.client_connection.url_connection), db, "c")
        ]
        assert kept == live and set(children) <= set(kept)
        assert sorted(items_of(client, db)) == ["a", "b"]

    return check


def merge(client: CosmosClient, db: str) -> Check:
    endpoint = str(client.client_connection.url_connection)
    children = split_partition(endpoint, db, "c")
    merged = merge_partitions(endpoint, db, "c", children)

    def check(client: CosmosClient) -> None:
        here = str(client.client_connection.url_connection)
        [kept] = physical_partitions(here, db, "c")
        assert kept.id == merged and set(children) <= set(kept.parents)
        assert sorted(items_of(client, db)) == ["a", "b"]

    return check


def split_by_throughput(client: CosmosClient, db: str) -> Check:
    container = contacts_of(client, db)
    container.replace_throughput(12_000)  # two partitions' worth: the service splits

    def check(client: CosmosClient) -> None:
        endpoint = str(client.client_connection.url_connection)
        assert len(physical_partitions(endpoint, db, "c")) == 2
        assert contacts_of(client, db).get_throughput().offer_throughput == 12_000

    return check


WRITES = [
    create,
    replace,
    upsert,
    delete,
    patch,
    batch,
    batch_with_fsync,
    delete_partition,
    create_container,
    replace_container,
    delete_container,
    create_database,
    delete_database,
    replace_throughput,
    split,
    merge,
    split_by_throughput,
]


#: The writes done on an endpoint started with --state-fsync.
FSYNC = {batch_with_fsync.__name__}


class Chain:
    """One state folder for every write of the module, each on a database of its own (named
    after it, set up by `setup`): the endpoint a write is done on is the one its previous
    write's check ran on, started again on the state after that write's SIGKILL (the first
    write's: the set-up's start). A write needs one start, not two."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.cosmos: CosmosEndpoint | None = None
        self.fsync = False
        #: how many times the state was started again
        self.restarts = -1
        #: the set-up's state as a SIGKILL would have left it (a copy: the journal tests')
        self.set_up = state.parent.parent / "set-up" / "cosmos"
        #: what other tests wrote on the set-up's start, checked after a restart (by name)
        self.checks: dict[str, Callable[[CosmosEndpoint], None]] = {}

    def running(self, *, fsync: bool = False) -> CosmosEndpoint:
        """The endpoint on the chain's state (started again when it is not running, or not
        with ``fsync`` as asked)."""
        if self.cosmos is not None and not self.cosmos.stopped and self.fsync != fsync:
            kill(self.cosmos)
        if self.cosmos is None or self.cosmos.stopped:
            self.cosmos = self.start(fsync=fsync)
        return self.cosmos

    def restarted(self) -> CosmosEndpoint:
        """The endpoint started again at least once on the state (killed and started, if the
        set-up's start still runs: a test run alone)."""
        if self.restarts < 1 and self.cosmos is not None:
            kill(self.cosmos)
        return self.running(fsync=self.fsync)

    def start(self, *, fsync: bool = False) -> CosmosEndpoint:
        self.cosmos = start_cosmos(
            state_dir=self.state, state_fsync=fsync, log_path=self.state.parent / "cosmos.log"
        )
        self.fsync = fsync
        self.restarts += 1
        return self.cosmos


def next_needs_fsync(write: str) -> bool:
    """Whether the write after ``write`` in the chain is done with --state-fsync."""
    names = [w.__name__ for w in WRITES]
    i = names.index(write) + 1
    return i < len(names) and names[i] in FSYNC


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    """The chain's state: `setup`'s state in a database per write and in ``db`` (copied to
    `Chain.set_up` as the endpoint holds it: what a SIGKILL there leaves), and the physical
    partitions' writes (`ranges_before`), on its first start, which the first write uses."""
    chained = Chain(tmp_path_factory.mktemp("chain") / "state" / "cosmos")
    chained.state.parent.mkdir(parents=True, exist_ok=True)
    cosmos = chained.start()
    try:
        client = client_of(cosmos)
        for name in ["db", *(w.__name__ for w in WRITES)]:
            setup(client, name)
        shutil.copytree(chained.state, chained.set_up)
        chained.checks["ranges"] = ranges_before(cosmos)
        yield chained
    finally:
        if chained.cosmos is not None:
            kill(chained.cosmos)


@pytest.mark.parametrize("write", WRITES, ids=[w.__name__ for w in WRITES])
def test_an_acknowledged_write_is_there_after_a_sigkill(
    chain: Chain, write: Callable[[CosmosClient, str], Check]
) -> None:
    db = write.__name__
    cosmos = chain.running(fsync=db in FSYNC)
    check = write(client_of(cosmos), db)
    kill(cosmos)  # at once after the answer
    check(client_of(chain.start(fsync=next_needs_fsync(db))))


def ranges_before(endpoint: CosmosEndpoint) -> Callable[[CosmosEndpoint], None]:
    """A container of 4 physical partitions written, split and written again, on a database
    of its own; the check of `test_ranges_and_continuations_are_kept_across_a_restart`."""
    names = (unique("db"), unique("c"))
    with CosmosClient(endpoint.endpoint, endpoint.key, **endpoint.client_options()) as client:
        container = client.create_database(names[0]).create_container(
            names[1], partition_key=PartitionKey(path=PK_PATH), headers={PARTITIONS_HEADER: "4"}
        )
        for seq, key in enumerate(KEYS):
            write_seq(container, key, seq)
        items, before_split = read_change_feed(container, None, max_items=100)
        assert len(items) == len(KEYS)
        children = endpoint.split(*names)
        parent = next(
            p for p in endpoint.physical_partitions(*names) if p.id == children[0]
        ).parents[-1]
        for seq, key in enumerate(KEYS, start=100):
            write_seq(container, key, seq)
        layout = ranges(container)

    def check(endpoint: CosmosEndpoint) -> None:
        live = [p.id for p in endpoint.physical_partitions(*names)]
        assert sorted(live) == sorted({"0", "1", "2", "3", *children} - {parent})
        with CosmosClient(endpoint.endpoint, endpoint.key, **endpoint.client_options()) as client:
            container = client.get_database_client(names[0]).get_container_client(names[1])
            assert ranges(container) == layout
        status, _, answered = raw(
            endpoint.endpoint,
            "GET",
            f"dbs/{names[0]}/colls/{names[1]}/docs",
            {"A-IM": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": parent},
        )
        assert (status, answered["x-ms-substatus"]) == (410, "1002")
        with CosmosClient(endpoint.endpoint, endpoint.key, **endpoint.client_options()) as client:
            container = client.get_database_client(names[0]).get_container_client(names[1])
            resumed, _ = read_change_feed(container, before_split)
            assert sorted(str(i["seq"]) for i in resumed) == sorted(str(s) for s in range(100, 108))

    return check


def test_ranges_and_continuations_are_kept_across_a_restart(chain: Chain) -> None:
    """The physical partitions after a split, the SDK's ranges, a change feed continuation
    taken before the split (resumed: only what was written after it), the split parent's 410:
    written on the chain's set-up start, checked on the state started again (after the
    writes' SIGKILLs, in the module's order)."""
    chain.checks["ranges"](chain.restarted())


def test_nothing_acknowledged_is_lost_while_compactions_run(tmp_path: Path) -> None:
    """A journal of a few KB: snapshots are written one after another while 4 clients write
    (creates, replaces and deletes); the endpoint is killed while they do, and every write
    acknowledged before the kill is there, as acknowledged (or as the same client's next
    write of that document, which the kill left unanswered: written, not acknowledged)."""
    state = tmp_path / "state" / "cosmos"
    acknowledged: dict[str, int | None] = {}  # id -> n kept, None: deleted
    # each writer's request under way when the endpoint is killed: it may or may not be kept
    in_flight: dict[str, int | None] = {}
    lock = threading.Lock()
    enough = threading.Event()
    with endpoint(state, extra_args=["--state-compact-bytes", "4096"]) as cosmos:
        container = setup(client_of(cosmos))

        def writer(w: int) -> None:
            own = CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())
            mine = own.get_database_client("db").get_container_client("c")
            i = 0
            while not enough.is_set():
                i += 1
                doc_id = f"w{w}-{i % 40}"
                with lock:
                    in_flight[doc_id] = None if i % 7 == 0 else i
                try:
                    if i % 7 == 0:
                        mine.delete_item(doc_id, "p1")
                        value: int | None = None
                    else:
                        mine.upsert_item({"id": doc_id, "pk": "p1", "n": i, "pad": "x" * 500})
                        value = i
                except exceptions.CosmosResourceNotFoundError:
                    value = None  # answered: not there
                except Exception:  # the kill cuts requests short: not acknowledged
                    return
                with lock:
                    acknowledged[doc_id] = value
                    del in_flight[doc_id]
                    if len(acknowledged) >= 120 and generation(state) >= 4:
                        enough.set()

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        assert enough.wait(timeout=LONG), "no 120 writes and 3 compactions while writing"
        with lock:
            kill(cosmos)
            expected = dict(acknowledged)
            unanswered = dict(in_flight)
        for t in threads:
            t.join(timeout=SHORT)
        assert container is not None
    with endpoint(state) as cosmos:
        kept = items_of(client_of(cosmos))
    for doc_id, value in expected.items():
        found = kept[doc_id]["n"] if doc_id in kept else None
        assert found == value or (doc_id in unanswered and found == unanswered[doc_id]), doc_id


def generation(state: Path) -> int:
    """The highest snapshot generation written so far (1: none)."""
    names = [p.name for p in state.iterdir()] if state.exists() else []
    done = [
        int(n.split("-")[1].split(".")[0])
        for n in names
        if n.startswith("snapshot-") and n.endswith(".jsonl")
    ]
    return max(done, default=1)


def scoped(container: ContainerProxy, key: Any) -> list[str]:
    """The ids a query scoped to one partition key value returns."""
    return sorted(i["id"] for i in container.query_items("SELECT * FROM c", partition_key=key))


def settled(state: Path) -> bool:
    """A snapshot holds everything: the journal of its generation is empty."""
    g = generation(state)
    journal = state / f"journal-{g}.jsonl"
    return g > 1 and journal.exists() and journal.stat().st_size == 0


#: Text beyond Latin-1 (a curly quote, an emoji, CJK): V8 would keep it at two bytes a character.
WIDE = "naïve café, \u2018quoted\u2019 \U0001f600 \u65e5\u672c\u8a9e " * 3


#: A snapshot after each write: the documents are read back from a snapshot, not the journal.
COMPACT = ["--state-compact-bytes", "1"]
#: The two snapshot tests' databases on their shared state.
SNAPSHOT_DB, INDEXES_DB = "snapshot", "indexes"
#: The indexes test's query.
INDEXED = "SELECT VALUE c.id FROM c WHERE c.n >= 2 AND c.n < 4"


@dataclass
class Snapshotted:
    """The snapshot tests' state, written by both (each on its database) with a snapshot after
    each write, stopped settled (the snapshot holds everything) and started again once."""

    state: Path
    #: the endpoint now on the state (the snapshot test starts it again once more)
    cosmos: CosmosEndpoint
    #: the snapshot test's documents and change feed as written
    before: dict[str, dict[str, Any]]
    feed: list[str]


@pytest.fixture(scope="module")
def snapshotted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Snapshotted]:
    state = tmp_path_factory.mktemp("snapshotted") / "state" / "cosmos"
    with endpoint(state, extra_args=COMPACT) as cosmos:
        indexes_before(client_of(cosmos))
        before, feed = snapshot_before(client_of(cosmos))
        wait_for(lambda: settled(state), "a snapshot holding every write")
        cosmos.stop()
    time.sleep(1.1)  # time passing: "short" expires while the endpoint is down
    with endpoint(state, extra_args=COMPACT) as cosmos:
        shared = Snapshotted(state, cosmos, before, feed)
        try:
            yield shared
        finally:
            kill(shared.cosmos)


def snapshot_before(client: CosmosClient) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The snapshot test's documents: the kinds of partition key value, a unique key, a TTL of
    1 s, text beyond Latin-1; as read back and as the change feed lists them."""
    database = client.create_database(SNAPSHOT_DB)
    container = database.create_container(
        "c",
        PartitionKey("/pk"),
        default_ttl=-1,
        unique_key_policy={"uniqueKeys": [{"paths": ["/email"]}]},
    )
    for i in range(6):
        container.create_item({"id": f"d{i}", "pk": f"p{i % 2}", "n": i, "email": f"{i}@x"})
    container.create_item({"id": "short", "pk": "p0", "email": "s@x", "ttl": 1})
    container.create_item({"id": "none", "email": "none@x"})  # no partition key value
    container.create_item({"id": "null", "pk": None, "email": "null@x"})
    container.create_item({"id": "wide", "pk": "p2", "email": "w@x", "text": WIDE})
    assert scoped(container, NonePartitionKeyValue) == ["none"]
    before = {i["id"]: i for i in container.read_all_items()}
    feed = [i["id"] for i in container.query_items_change_feed(start_time="Beginning")]
    return before, feed


def test_documents_read_back_from_a_snapshot_serve_every_operation(
    snapshotted: Snapshotted,
) -> None:
    """After a restart the documents of a snapshot are kept as their text, as every document
    is, and parsed when used; each operation works on them as on any: reads (by id and by
    _self), queries (one partition, documents without a partition key value apart from those
    whose value is null, across partitions, the container's COUNT), the change feed, a unique
    key, TTL, writes; text beyond Latin-1 (kept as UTF-8 bytes) reads back as written; and a
    snapshot written again keeps the documents as they were."""
    state, before, feed, db = snapshotted.state, snapshotted.before, snapshotted.feed, SNAPSHOT_DB
    cosmos = snapshotted.cosmos
    container = contacts_of(client_of(cosmos), db)
    assert system(container.read_item("d1", "p1")) == system(before["d1"])
    assert container.read_item("wide", "p2") == before["wide"]
    wide: list[Any] = list(
        container.query_items(
            "SELECT VALUE c.text FROM c WHERE c.email = 'w@x'",
            enable_cross_partition_query=True,
        )
    )
    assert wide == [WIDE]
    counted: list[Any] = list(
        container.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True)
    )
    assert counted == [len(before.keys() - {"short"})]  # "short" expired meanwhile
    assert system(container.read_item(before["d2"], "p0")) == system(before["d2"])  # _self
    assert sorted(
        i["id"]
        for i in container.query_items(
            "SELECT * FROM c WHERE c.n >= 3", enable_cross_partition_query=True
        )
    ) == ["d3", "d4", "d5"]
    assert scoped(container, "p1") == ["d1", "d3", "d5"]
    assert scoped(container, NonePartitionKeyValue) == ["none"]
    assert [i["id"] for i in container.query_items_change_feed(start_time="Beginning")] == [
        f for f in feed if f != "short"
    ]
    with pytest.raises(exceptions.CosmosResourceExistsError):
        container.create_item({"id": "dup", "pk": "p0", "email": "4@x"})  # d4's
    with pytest.raises(exceptions.CosmosResourceExistsError):
        container.create_item({"id": "d0", "pk": "p0"})
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item("short", "p0")
    container.replace_item("d0", {"id": "d0", "pk": "p0", "n": 100, "email": "0@x"})
    container.patch_item("d1", "p1", [{"op": "incr", "path": "/n", "value": 10}])
    container.delete_item("d2", "p0")
    # a snapshot again: d3..d5 as they were read
    wait_for(lambda: settled(state), "a snapshot holding every write")
    cosmos.stop()

    snapshotted.cosmos = cosmos = start_cosmos(
        state_dir=state, log_path=state.parent / "cosmos.log"
    )
    kept = items_of(client_of(cosmos), db)
    assert {k: v.get("n") for k, v in kept.items()} == {
        "d0": 100,
        "d1": 11,
        "d3": 3,
        "d4": 4,
        "d5": 5,
        "none": None,
        "null": None,
        "wide": None,
    }
    assert kept["wide"] == before["wide"]
    assert scoped(contacts_of(client_of(cosmos), db), NonePartitionKeyValue) == ["none"]
    assert {k: system(kept[k]) for k in ("d3", "d4", "d5")} == {
        k: system(before[k]) for k in ("d3", "d4", "d5")
    }


def set_up_copy(chain: Chain, tmp_path: Path) -> Path:
    """A copy of the chain's set-up state (``db`` among its databases), a test's own: the
    journal's lines are what the test damages, so each has its own folder."""
    state = tmp_path / "state" / "cosmos"
    shutil.copytree(chain.set_up, state)
    return state


def test_a_journal_line_cut_short_by_a_crash_is_dropped(chain: Chain, tmp_path: Path) -> None:
    """A commit whose line was not finished was never acknowledged: it is dropped (and cut off
    the file, so what is appended after it reads back too)."""
    state = set_up_copy(chain, tmp_path)
    journal = max(state.glob("journal-*.jsonl"))
    with journal.open("a") as f:
        f.write('{"l": 99, "p": [["gAAB')
    with endpoint(state) as cosmos:
        assert sorted(items_of(client_of(cosmos))) == ["a", "b"]
        client_of(cosmos).get_database_client("db").get_container_client("c").create_item(
            {"id": "later", "pk": "p1"}
        )
    with endpoint(state) as cosmos:
        assert sorted(items_of(client_of(cosmos))) == ["a", "b", "later"]
    assert "dropped an unfinished last line" in (state.parent / "cosmos.log").read_text()


def test_a_damaged_journal_refuses_the_start_naming_the_file(chain: Chain, tmp_path: Path) -> None:
    state = set_up_copy(chain, tmp_path)
    journal = max(state.glob("journal-*.jsonl"))
    lines = journal.read_text().splitlines(keepends=True)
    lines.insert(1, "not json\n")
    journal.write_text("".join(lines))
    with pytest.raises(CosmosStartError, match=journal.name):
        start_cosmos(state_dir=state, log_path=state.parent / "cosmos.log").stop()


def test_a_state_file_of_the_earlier_format_is_converted_once(tmp_path: Path) -> None:
    """cosmos-state-v2.json was written by the endpoint as it was before (one JSON file,
    version 2; fixtures/README.md says how). Started with the folder beside it, the endpoint
    reads it once, writes it in the new format and removes it: the same documents with the
    same _rid / _self / _etag / _ts, the LSN sequence going on, a change feed continuation
    taken before still valid, the offers; and a write after it kept like any other."""
    old = json.loads((FIXTURES / "cosmos-state-v2.json").read_text())
    feed = json.loads((FIXTURES / "cosmos-state-v2.feed.json").read_text())
    state = tmp_path / "state" / "cosmos"
    state.parent.mkdir()
    shutil.copy(FIXTURES / "cosmos-state-v2.json", tmp_path / "state" / "cosmos.json")
    old_docs = {d["body"]["id"]: d["body"] for c in old["dbs"][0]["colls"] for d in c["docs"]}

    with endpoint(state) as cosmos:
        database = client_of(cosmos).get_database_client("db")
        contacts = database.get_container_client("contacts")
        kept = {i["id"]: i for i in contacts.read_all_items()}
        kept.update({i["id"]: i for i in database.get_container_client("leases").read_all_items()})
        assert {k: system(v) for k, v in kept.items()} == {
            k: system(v) for k, v in old_docs.items()
        }
        assert kept["a"]["n"] == 10 and kept["c"]["n"] == 3
        assert lsn_of(contacts) == old["globalLsn"]
        since = contacts.query_items_change_feed(continuation=feed["continuation"])
        assert sorted(i["id"] for i in since) == ["a", "c"]
        assert contacts.get_throughput().offer_throughput == 700
        leases = database.get_container_client("leases").get_throughput()
        assert leases.auto_scale_max_throughput == 4000
        contacts.create_item({"id": "d", "pk": "p1"})
        assert lsn_of(contacts) == old["globalLsn"] + 1
        created_rid = contacts.read_item("d", "p1")["_rid"]
        kill(cosmos)
    assert not (tmp_path / "state" / "cosmos.json").exists()
    assert sorted(p.name for p in state.iterdir()) == ["journal-2.jsonl", "snapshot-2.jsonl"]

    with endpoint(state) as cosmos:
        contacts = client_of(cosmos).get_database_client("db").get_container_client("contacts")
        assert sorted(i["id"] for i in contacts.read_all_items()) == ["a", "b", "c", "d", "e"]
        assert contacts.read_item("d", "p1")["_rid"] == created_rid
        assert created_rid not in {v["_rid"] for v in old_docs.values()}


def indexes_before(client: CosmosClient) -> None:
    """The indexes test's documents (a query builds and uses the index before the restart)."""
    container = setup(client, INDEXES_DB)
    for i in range(3, 8):
        text = 'a "quoted" \\ text' * i  # skipped over in the kept JSON
        data = {"note": text, "k": i % 2 == 0, "at": [i]}
        container.create_item({"id": f"d{i}", "pk": "p1", "n": i, "data": data, "tags": [f"t{i}"]})
    found: list[Any] = list(container.query_items(INDEXED, enable_cross_partition_query=True))
    assert sorted(found) == ["b", "d3"]
    container.upsert_item({"id": "d3", "pk": "p1", "n": 9})


def ids_of(container: ContainerProxy, sql: str) -> list[Any]:
    return list(container.query_items(sql, enable_cross_partition_query=True))


def test_after_a_restart_the_indexes_are_built_again_from_the_kept_documents(
    snapshotted: Snapshotted,
) -> None:
    """Indexes are not kept: the first query on a path after a restart builds its index from
    the kept documents (a snapshot after each write: the documents kept), then reads only what
    the index selects. (Whichever of the state's restarts this test runs after: its container
    is queried by no other test.)"""
    container = contacts_of(client_of(snapshotted.cosmos), INDEXES_DB)
    # the index reads the kept documents' text. Read again on azure-cosmos's headers race: the
    # client's background health check writes the headers object the query copies its own into
    # ("OrderedDict mutated during iteration", cosmos_changefeed's module on it); the metrics
    # are the query's own, from its hook, not the client's last headers (the check's, maybe)
    metrics: list[str] = []

    def query() -> list[Any]:
        metrics.clear()
        return list(
            container.query_items(
                INDEXED,
                enable_cross_partition_query=True,
                populate_query_metrics=True,
                response_hook=lambda headers, _: metrics.append(
                    str(headers["x-ms-documentdb-query-metrics"])
                ),
            )
        )

    found = read_again_on_headers_race(query, what="the indexed query")
    assert found == ["b"]
    assert metrics and all("retrievedDocumentCount=1;" in m for m in metrics), metrics
    # values deeper in the kept documents' JSON, read from its text while the index is built
    for where, expected in (
        ("c.data.k = true", ["d4", "d6"]),
        ("ARRAY_CONTAINS(c.tags, 't5')", ["d5"]),
        ("c.data.at[0] >= 6", ["d6", "d7"]),
    ):
        sql = f"SELECT VALUE c.id FROM c WHERE {where}"  # noqa: S608 - the test's own
        rows = read_again_on_headers_race(partial(ids_of, container, sql), what=where)
        assert sorted(rows) == expected, where
