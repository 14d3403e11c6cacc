"""Queries served from the container's indexes (cosmos/queryrun.js, queryindex.js,
pathindexes.js): what a query reads, as its query metrics and index metrics say (the service's
headers, the SDK's `populate_query_metrics` / `populate_index_metrics`), never how long it
takes: equality, range and function filters on indexed paths read what they select; a filter
on an excluded path reads every document and reports the index it misses; ORDER BY needs its
range or composite index as in Azure; a COUNT the index answers reads nothing; the indexes
follow every kind of write; pages resume where they stopped, also when their time budget ran
out."""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import pytest
from azure.cosmos import ContainerProxy, DatabaseProxy, PartitionKey
from azure.cosmos.exceptions import CosmosBatchOperationError, CosmosHttpResponseError

from funcstack._cache import node_executable, node_modules
from funcstack.cosmos._control import control
from funcstack.cosmos._launcher import COSMOS_DIR
from funcstack.deadlines import LOOPBACK, SHORT, wait_for

from .conftest import PK_PATH, Target, doc, unique

CONTACTS = 6
EVENTS = 14


def metrics_of(container: ContainerProxy) -> dict[str, str]:
    header = container.client_connection.last_response_headers["x-ms-documentdb-query-metrics"]
    return dict(pair.split("=", 1) for pair in header.split(";"))


def index_metrics_of(container: ContainerProxy) -> dict[str, Any]:
    found: dict[str, Any] = container.client_connection.last_response_headers[
        "x-ms-cosmos-index-utilization"
    ]
    return found


def specs(entries: list[dict[str, Any]]) -> list[str]:
    return [str(e["IndexSpec"]) for e in entries]


def query(container: ContainerProxy, sql: str, **kwargs: Any) -> list[Any]:
    kwargs.setdefault("partition_key", "p1")
    return list(
        container.query_items(
            sql, populate_query_metrics=True, populate_index_metrics=True, **kwargs
        )
    )


@pytest.fixture
def app(container: ContainerProxy) -> ContainerProxy:
    """The Contacts app's shape in one partition: contacts among more event documents."""
    for i in range(CONTACTS):
        container.create_item(
            doc(f"c{i}", "p1", type="contact", n=i, tags=["vip"] if i % 2 else [], deleted=False)
        )
    for i in range(EVENTS):
        container.create_item(doc(f"e{i}", "p1", type="event", n=100 + i, data={"seq": i}))
    return container


def test_a_filter_on_an_indexed_path_reads_only_what_it_selects(app: ContainerProxy) -> None:
    found = query(app, "SELECT VALUE c.id FROM c WHERE c.type = 'contact' AND c.deleted = false")
    assert sorted(found) == [f"c{i}" for i in range(CONTACTS)]
    assert metrics_of(app)["retrievedDocumentCount"] == str(CONTACTS)
    assert specs(index_metrics_of(app)["UtilizedSingleIndexes"]) in (["/type/?"], ["/deleted/?"])


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("c.n > 102 AND c.n <= 105", ["e3", "e4", "e5"]),
        ("c.n BETWEEN 1 AND 2", ["c1", "c2"]),
        ("c.id IN ('c0', 'e13', 'none')", ["c0", "e13"]),
        ("STARTSWITH(c.id, 'c')", [f"c{i}" for i in range(CONTACTS)]),
        ("ARRAY_CONTAINS(c.tags, 'vip')", ["c1", "c3", "c5"]),
        ("IS_DEFINED(c.data)", [f"e{i}" for i in range(EVENTS)]),
        ("NOT IS_DEFINED(c.data)", [f"c{i}" for i in range(CONTACTS)]),
        ("c.data.seq = 3 OR c.n = 0", ["c0", "e3"]),
    ],
)
def test_range_and_function_filters_are_index_seeks(
    app: ContainerProxy, where: str, expected: list[str]
) -> None:
    """Each reads only the documents it answers (the index answers the filter exactly)."""
    found = query(app, f"SELECT VALUE c.id FROM c WHERE {where}")  # noqa: S608 - the cases' own
    assert sorted(found) == sorted(expected)
    metrics = metrics_of(app)
    assert metrics["retrievedDocumentCount"] == str(len(expected))
    assert metrics["indexUtilizationRatio"] == "1.00"
    assert index_metrics_of(app)["PotentialSingleIndexes"] == []


def test_a_filter_no_index_serves_reads_every_document_and_still_answers(
    app: ContainerProxy,
) -> None:
    found = query(app, "SELECT VALUE c.id FROM c WHERE LOWER(c.type) = 'contact'")
    assert sorted(found) == [f"c{i}" for i in range(CONTACTS)]
    assert metrics_of(app)["retrievedDocumentCount"] == str(CONTACTS + EVENTS)


@pytest.fixture
def excluding(database: DatabaseProxy) -> ContainerProxy:
    """A container whose policy indexes /type only (as deploy/indexing-policy.json, a few paths)."""
    container = database.create_container(
        unique("x"),
        partition_key=PartitionKey(path=PK_PATH),
        indexing_policy={
            "includedPaths": [{"path": "/type/?"}],
            "excludedPaths": [{"path": "/*"}],
            "compositeIndexes": [
                [{"path": "/type", "order": "ascending"}, {"path": "/n", "order": "descending"}]
            ],
        },
    )
    for i in range(6):
        container.create_item(doc(f"d{i}", "p1", type="a" if i < 2 else "b", n=i, secret=i % 3))
    return container


def test_a_filter_on_an_excluded_path_is_a_scan_reported_as_an_index_miss(
    excluding: ContainerProxy,
) -> None:
    assert sorted(query(excluding, "SELECT VALUE c.id FROM c WHERE c.secret = 1")) == ["d1", "d4"]
    assert metrics_of(excluding)["retrievedDocumentCount"] == "6"
    utilization = index_metrics_of(excluding)
    assert specs(utilization["PotentialSingleIndexes"]) == ["/secret/?"]
    assert specs(utilization["UtilizedSingleIndexes"]) == ["/pk/?".replace("pk", PK_PATH[1:])]
    # beside an indexed path: that index selects, the excluded one is evaluated on what it read
    found = query(excluding, "SELECT VALUE c.id FROM c WHERE c.type = 'a' AND c.secret = 1")
    assert found == ["d1"]
    assert metrics_of(excluding)["retrievedDocumentCount"] == "2"


def test_order_by_needs_its_index_as_in_azure(excluding: ContainerProxy) -> None:
    with pytest.raises(CosmosHttpResponseError) as refused:
        query(excluding, "SELECT VALUE c.id FROM c ORDER BY c.n")
    assert refused.value.status_code == 400
    assert "order-by item is excluded" in str(refused.value)
    with pytest.raises(CosmosHttpResponseError) as missing:
        query(excluding, "SELECT VALUE c.id FROM c ORDER BY c.type, c.n")
    assert missing.value.status_code == 400
    assert "composite index" in str(missing.value)
    # the declared composite index, in its order and exactly reversed
    assert query(excluding, "SELECT VALUE c.id FROM c ORDER BY c.type, c.n DESC") == [
        "d1",
        "d0",
        "d5",
        "d4",
        "d3",
        "d2",
    ]
    assert [c["IndexSpecs"] for c in index_metrics_of(excluding)["UtilizedCompositeIndexes"]] == [
        ["/type ASC", "/n DESC"]
    ]
    assert query(excluding, "SELECT VALUE c.id FROM c ORDER BY c.type DESC, c.n") == [
        "d2",
        "d3",
        "d4",
        "d5",
        "d0",
        "d1",
    ]
    assert query(excluding, "SELECT VALUE c.id FROM c ORDER BY c.type DESC, c.n", max_item_count=4)


def test_a_count_the_index_answers_reads_no_document(app: ContainerProxy) -> None:
    """As the service's test_partition_scoped_count_is_index_only: the partition's COUNT, and
    a COUNT over an exact filter, count index entries."""
    assert query(app, "SELECT VALUE COUNT(1) FROM c") == [CONTACTS + EVENTS]
    assert metrics_of(app)["retrievedDocumentCount"] == "0"
    assert metrics_of(app)["indexUtilizationRatio"] == "1.00"
    assert query(app, "SELECT VALUE COUNT(1) FROM c WHERE c.type = 'event'") == [EVENTS]
    assert metrics_of(app)["retrievedDocumentCount"] == "0"
    # not exact (a function the index does not answer): the documents are read
    assert query(app, "SELECT VALUE COUNT(1) FROM c WHERE c.type = 'event' AND c.n % 2 = 0") == [
        EVENTS // 2
    ]
    assert metrics_of(app)["retrievedDocumentCount"] == str(EVENTS)


def count_all(container: ContainerProxy) -> int:
    """`SELECT VALUE COUNT(1) FROM c` across partitions, as an app asks it (the SDK's plan)."""
    found: list[Any] = list(
        container.query_items(
            "SELECT VALUE COUNT(1) FROM c",
            enable_cross_partition_query=True,
            populate_query_metrics=True,
        )
    )
    assert metrics_of(container)["retrievedDocumentCount"] == "0"  # nothing read
    return int(found[0])


def test_a_whole_containers_count_is_exactly_what_it_holds(container: ContainerProxy) -> None:
    """The unfiltered COUNT of a container is what it holds (the endpoint's own count, read no
    document), after every kind of write: creates across partitions, a replace, an upsert of
    a new id, a delete, a transactional batch and its rollback, a partition key's deletion, a
    rename, and documents past their time to live (never answered, as the service answers no
    expired item, whether or not the sweep has deleted them yet)."""
    assert count_all(container) == 0
    for p in range(4):
        container.execute_item_batch(
            [("create", (doc(f"d{p}-{i}", f"p{p}", n=i),)) for i in range(5)],
            partition_key=f"p{p}",
        )
    assert count_all(container) == 20
    container.replace_item("d0-0", doc("d0-0", "p0", n=99))
    container.upsert_item(doc("d0-1", "p0", n=98))  # there already
    container.upsert_item(doc("new", "p0"))
    container.delete_item("d1-0", "p1")
    assert count_all(container) == 20
    with pytest.raises(CosmosBatchOperationError):  # rolled back: neither is there
        container.execute_item_batch(
            [("create", (doc("b1", "p2"),)), ("create", (doc("d2-0", "p2"),))],
            partition_key="p2",
        )
    container.delete_all_items_by_partition_key("p3")
    assert count_all(container) == 15
    container.replace_item("d2-1", doc("renamed", "p2"))  # an id may change: still one
    for i in range(3):
        container.create_item(doc(f"short{i}", "p2", ttl=1))
    assert count_all(container) == 18
    wait_for(lambda: count_all(container) == 15, "the three gone past their 1 s time to live")
    assert query(container, "SELECT VALUE COUNT(1) FROM c", partition_key="p2") == [5]


def in_process(script: str) -> Any:
    """Run `script` (the body of an async function) in Node beside the endpoint's modules
    (`store`, `internals`, `lsn`, `queryrun` bound); the JSON of what it returns."""
    prelude = "".join(
        f"const {name} = require({(COSMOS_DIR / f'{name}.js').as_posix()!r});"
        for name in ("store", "internals", "lsn", "queryrun")
    )
    ran = subprocess.run(
        [
            node_executable(),
            "-e",
            f"{prelude}(async () => {{{script}}})()"
            ".then(v => process.stdout.write(JSON.stringify(v)));",
        ],
        env={**os.environ, "NODE_PATH": str(node_modules())},
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_documents_past_their_time_to_live_are_not_counted_before_the_sweep() -> None:
    """The count leaves out what has expired and waits for the sweep (none runs here): told
    from the expiry index, as of the time asked."""
    counts = in_process(
        "const account = new internals.Account('localhost', 0);"
        "account.databases.create({ id: 'db' });"
        "const db = account.database('db');"
        "db.collections.create({ id: 'c', partitionKey: { paths: ['/pk'] }, defaultTtl: 60 });"
        "const s = new store.Store(db.collection('c'));"
        "const put = (id, pk, ttl) => s.insert({ id, pk, ttl });"
        "for (let i = 0; i < 10; i += 1) put(`keep${i}`, 'p', -1);"
        "for (let i = 0; i < 5; i += 1) put(`soon${i}`, 'p', 10);"
        "for (let i = 0; i < 3; i += 1) put(`later${i}`, 'q', undefined);"
        "s.overwrite({ id: 'soon0', pk: 'p', ttl: -1 }, s.get('soon0', 'p'));"
        "const now = Date.now();"
        "return [s.count(now), s.count(now + 11000), s.count(now + 61000), s.docs._data.size];"
    )
    # now all 18; past 10 s the four short ones left (soon0 was rewritten to never expire);
    # past 60 s the container's default too; the documents themselves are all still held
    assert counts == [18, 14, 11, 18]


def test_a_document_is_kept_as_its_json_and_read_back_exactly() -> None:
    """In-process: a document is kept as its JSON, Latin-1 text as one string (a byte a
    character in V8), text beyond Latin-1 as its UTF-8 bytes (V8 would keep the string at two
    bytes a character), from a write as from a snapshot's line; read back, each parses to what
    was written, whatever the width of its characters."""
    kept = in_process(
        "const account = new internals.Account('localhost', 0);"
        "account.databases.create({ id: 'db' });"
        "const db = account.database('db');"
        "db.collections.create({ id: 'c', partitionKey: { paths: ['/pk'] } });"
        "const s = new store.Store(db.collection('c'));"
        r"const texts = { ascii: 'plain', latin1: 'na\u00efve caf\u00e9 \u00ff\u0080',"
        r" wide: '\u2018q\u2019 \u65e5\u672c', astral: '\ud83d\ude00',"
        r" control: 'a\u0000b\n', lone: '\ud800 alone' };"
        "const out = {};"
        "for (const [name, text] of Object.entries(texts)) {"
        " const body = { id: name, pk: name, text, nested: { [text]: [text] } };"
        " s.insert(body);"
        " const back = s.get(name, name);"
        " const item = s.docs._data.get(back._rid);"
        " const line = Buffer.from('x' + item.text() + 'y', 'utf8');"
        " const again = store.compactJsonOf(line, 1, line.length - 1);"
        " out[name] = { form: Buffer.isBuffer(item.json) ? 'bytes' : 'string',"
        "  same: back.text === text && back.nested[text][0] === text,"
        "  snapshot: (Buffer.isBuffer(again) ? 'bytes' : 'string')"
        "   + (JSON.parse(again.toString('utf8')).text === text) }; }"
        "return out;"
    )
    assert kept == {
        name: {
            "form": "bytes" if name in ("wide", "astral") else "string",
            "same": True,
            "snapshot": ("bytes" if name in ("wide", "astral") else "string") + "true",
        }
        for name in ("ascii", "latin1", "wide", "astral", "control", "lone")
    }


def test_a_query_answers_the_same_each_time_and_its_rows_are_its_own() -> None:
    """The documents the engine reads are parsed once and kept for the next query (in-process:
    the main thread's, once the query's cost is known): each answer is the same, a row changed
    after it was answered does not show in the next answer, and what a UDF (user code) does to
    the documents it is given does not reach another query."""
    answers = in_process(
        "const account = new internals.Account('localhost', 0);"
        "account.databases.create({ id: 'db' });"
        "const db = account.database('db');"
        "db.collections.create({ id: 'c', partitionKey: { paths: ['/pk'] } });"
        "db.collection('c').userDefinedFunctions.create({ id: 'touch',"
        " body: 'function (d) { d.touched = true; return true; }' });"
        "const s = new store.Store(db.collection('c'));"
        "for (let i = 0; i < 20; i += 1) {"
        " const body = { id: `d${i}`, pk: 'p', n: i, tags: ['a', `t${i}`], o: { x: i } };"
        " s.insert(body); }"
        "const scope = { pk: null, range: null, epk: null, ranges: [] };"
        "const run = async q => (await queryrun.runAll(s, q, { parameters: [], scope })).result;"
        "const out = [];"
        "for (const q of ['SELECT * FROM c', 'SELECT c.id, t FROM c JOIN t IN c.tags',"
        " 'SELECT VALUE c.id FROM c WHERE udf.touch(c)', 'SELECT * FROM c']) {"
        " for (let r = 0; r < 3; r += 1) {"
        "  const rows = await run(q); out.push(JSON.stringify(rows));"
        "  for (const row of rows) if (row && typeof row === 'object') {"
        "   row.changed = true; if (row.o) row.o.x = -1; } } }"
        "return out;"
    )
    for query in range(4):
        assert len(set(answers[3 * query : 3 * query + 3])) == 1, query
    assert answers[-1] == answers[0]
    assert all(marker not in answers[-1] for marker in ("changed", '"x":-1', "touched"))


def test_the_indexes_follow_every_kind_of_write(container: ContainerProxy) -> None:
    """Built by the first query, then kept in step: create, replace, upsert, patch, delete,
    a transactional batch (and its rollback), expiry and a partition key's deletion."""
    for i in range(4):
        container.create_item(doc(f"d{i}", "p1", kind="x"))
    container.create_item(doc("other", "p2", kind="x"))
    selected = "SELECT VALUE c.id FROM c WHERE c.kind = 'x'"

    def kind_x() -> list[str]:
        found = sorted(
            query(container, selected, partition_key=None, enable_cross_partition_query=True)
        )
        # exact: every document read is answered (none left behind in the index)
        assert metrics_of(container)["retrievedDocumentCount"] == str(len(found))
        return found

    assert kind_x() == ["d0", "d1", "d2", "d3", "other"]
    container.replace_item("d0", doc("d0", "p1", kind="y"))
    container.upsert_item(doc("d1", "p1", kind="y"))
    container.upsert_item(doc("n0", "p1", kind="x"))
    container.patch_item("d2", "p1", [{"op": "set", "path": "/kind", "value": "z"}])
    container.delete_item("d3", "p1")
    container.execute_item_batch(
        [("create", (doc("b0", "p1", kind="x"),)), ("upsert", (doc("n0", "p1", kind="w"),))],
        partition_key="p1",
    )
    with pytest.raises(CosmosBatchOperationError):  # rolled back: b1 never was
        container.execute_item_batch(
            [("create", (doc("b1", "p1", kind="x"),)), ("create", (doc("b0", "p1", kind="x"),))],
            partition_key="p1",
        )
    assert kind_x() == ["b0", "other"]
    container.create_item(doc("gone", "p1", kind="x", ttl=1))
    container.delete_all_items_by_partition_key("p2")
    assert kind_x() == ["b0", "gone"]
    wait_for(lambda: kind_x() == ["b0"], "'gone' expired and swept past its 1 s time to live")


def test_a_policy_change_drops_what_it_no_longer_indexes(
    database: DatabaseProxy, app: ContainerProxy
) -> None:
    assert len(query(app, "SELECT VALUE c.id FROM c WHERE c.type = 'contact'")) == CONTACTS
    assert metrics_of(app)["retrievedDocumentCount"] == str(CONTACTS)
    database.replace_container(
        app,
        partition_key=PartitionKey(path=PK_PATH),
        default_ttl=-1,
        indexing_policy={"excludedPaths": [{"path": "/type/?"}]},
    )
    assert len(query(app, "SELECT VALUE c.id FROM c WHERE c.type = 'contact'")) == CONTACTS
    assert metrics_of(app)["retrievedDocumentCount"] == str(CONTACTS + EVENTS)
    assert specs(index_metrics_of(app)["PotentialSingleIndexes"]) == ["/type/?"]


def test_pages_resume_where_the_last_one_stopped(app: ContainerProxy) -> None:
    """Each page reads on from the last one's place: across the pages the documents read add
    up to what was answered plus at most one per page (where a page stopped), never the pages
    times what the filter selects."""
    for sql in (
        "SELECT c.id FROM c WHERE c.type = 'event'",
        "SELECT c.id FROM c WHERE c.n >= 0 ORDER BY c.n DESC",
        "SELECT c.id FROM c",
    ):
        pages = app.query_items(
            sql, partition_key="p1", max_item_count=3, populate_query_metrics=True
        ).by_page()
        answered: list[str] = []
        read = 0
        count = 0
        for page in pages:
            answered += [row["id"] for row in page]
            read += int(metrics_of(app)["retrievedDocumentCount"])
            count += 1
        assert len(answered) == len(set(answered)), sql
        assert read <= len(answered) + count, (sql, read, count)
    ids = [
        r["id"] for r in app.query_items("SELECT c.id FROM c ORDER BY c.n DESC", partition_key="p1")
    ]
    assert ids[0] == f"e{EVENTS - 1}" and ids[-1] == "c0"


def test_the_stats_route_says_what_the_endpoint_holds(
    cosmos: Target, database: DatabaseProxy, other_database: DatabaseProxy
) -> None:
    """Local only: the process's memory (after a full collection when asked), how many
    documents it keeps (in every container, or in one database's: another's are not counted),
    and how late its main thread ran since the last call."""
    if cosmos.local is None:
        pytest.skip("the stats route is the local endpoint's")
    container = database.create_container(unique("m"), partition_key=PartitionKey(path=PK_PATH))
    for i in range(5):
        container.create_item(doc(f"m{i}", "p1", text="x" * 1000))
    beside = other_database.create_container(unique("o"), partition_key=PartitionKey(path=PK_PATH))
    for i in range(2):
        beside.create_item(doc(f"o{i}", "p1"))
    cosmos.local.stats()  # the main thread's lateness measured from now on
    container.read_item("m0", "p1")
    held = cosmos.local.stats(collect=True)
    memory = held["memory"]
    assert memory["rss"] >= memory["heapUsed"] > 0
    assert {"heapTotal", "external", "arrayBuffers"} <= memory.keys()
    assert held["eventLoop"]["samples"] > 0
    assert 0 <= held["eventLoop"]["p50Ms"] <= held["eventLoop"]["maxMs"]
    assert held["documents"] >= 7  # every container's (other tests' too, on a shared endpoint)
    # one database's: what the test counts while other tests write elsewhere on the endpoint
    assert cosmos.local.stats(database=database.id)["documents"] == 5
    assert cosmos.local.stats(database=other_database.id)["documents"] == 2
    database.delete_container(container)
    assert cosmos.local.stats(database=database.id)["documents"] == 0
    assert cosmos.local.stats(database=other_database.id)["documents"] == 2
    assert cosmos.local.stats(database=unique("none"))["documents"] == 0


#: A UDF that holds the thread evaluating it for a twentieth of LOOPBACK a call, without using
#: the CPU: a chunk of 20 documents, LOOPBACK in all (the read's time to be answered in).
SLOW_MS = math.ceil(LOOPBACK * 1000 / 20)
SLOW = (
    "function (x) {"
    f" Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, {SLOW_MS}); return true; }}"
)


def test_a_point_read_is_answered_while_a_long_query_runs(
    cosmos: Target, container: ContainerProxy
) -> None:
    """The engine evaluates a query in the endpoint's query threads, not in the one that
    answers requests: a point read sent while a query spends LOOPBACK in one chunk of its
    documents (a UDF that waits) is answered before the query (in the main thread it would
    wait for that chunk)."""
    if cosmos.local is None:
        pytest.skip("the UDF waits with Atomics, the local endpoint's JavaScript")
    container.scripts.create_user_defined_function({"id": "slow", "body": SLOW})
    for i in range(20):  # one chunk of the engine's (32 at most)
        container.create_item(doc(f"s{i}", "p1"))
    container.create_item(doc("target", "p2"))
    database = container.container_link.split("/")[1]  # dbs/<database>/colls/<container>
    other = cosmos.client().get_database_client(database).get_container_client(container.id)
    answered: list[str] = []

    def long_query() -> None:  # on a client of its own
        found = list(
            other.query_items(
                "SELECT VALUE COUNT(1) FROM c WHERE udf.slow(c.id)", partition_key="p1"
            )
        )
        answered.append(f"query {found}")

    query_thread = threading.Thread(target=long_query)
    query_thread.start()
    try:
        time.sleep(0.5)  # the query's request under way (its chunk takes LOOPBACK)
        container.read_item("target", "p2")
        answered.append("read")
    finally:
        query_thread.join(timeout=LOOPBACK + SHORT)
    assert answered == ["read", "query [20]"]


@pytest.fixture(autouse=True)
def unhurried_pages(request: pytest.FixtureRequest, cosmos: Target) -> Iterator[None]:
    """A page of these tests ends by its size, not by the page's 1 s time budget, which a
    loaded machine runs out of (a partial page, as in Azure: the metrics the tests read are
    then the next page's; make test at a load average of 14 saw it). The budget is set for the
    test's database only: the endpoint serves other tests at the same time (the run's workers),
    whose pages keep the endpoint's budget. The budget's own tests set theirs
    (`small_budget`)."""
    if cosmos.local is None or "database" not in request.fixturenames:
        yield  # the in-process tests ask the endpoint nothing
        return
    database: DatabaseProxy = request.getfixturevalue("database")
    with budget(cosmos, 60_000, database=database.id):
        yield


@contextmanager
def budget(cosmos: Target, ms: int, **scope: str) -> Iterator[None]:
    """The page budget of a database's queries (or a container's: ``database=``,
    ``container=``) set to ``ms`` while the block runs; then the endpoint's again."""
    control(cosmos.endpoint, "PUT", "_emulators/queries", {"budgetMs": ms, **scope})
    try:
        yield
    finally:
        control(cosmos.endpoint, "DELETE", "_emulators/queries", scope)


@pytest.fixture
def small_budget(cosmos: Target, database: DatabaseProxy) -> Iterator[None]:
    """Pages end after their first slice: as a query whose budget runs out in Azure (the
    test's database's queries)."""
    if cosmos.local is None:
        pytest.skip("the page budget is the local endpoint's")
    with budget(cosmos, 0, database=database.id):
        yield


@pytest.mark.usefixtures("small_budget")
def test_a_page_out_of_time_is_answered_in_part_and_the_sdk_reads_on(
    container: ContainerProxy,
) -> None:
    """Every answer comes with what it read so far and a continuation; the SDK follows it:
    rows, ORDER BY and aggregates across partitions (the plan's partial results) all whole."""
    for first in (0, 100, 200, 300):
        container.execute_item_batch(
            [
                ("create", (doc(f"a{i:03}", "p1" if i < 300 else "p2", n=i, type="t"),))
                for i in range(first, first + 100)
            ],
            partition_key="p1" if first < 300 else "p2",
        )
    pages = list(container.query_items("SELECT VALUE c.n FROM c", partition_key="p1").by_page())
    assert len(pages) > 1  # ended by the budget, not by a page size
    assert sorted(cast(int, n) for page in pages for n in page) == list(range(300))

    def values(sql: str) -> list[Any]:
        return list(container.query_items(sql, enable_cross_partition_query=True))

    assert values("SELECT VALUE c.n FROM c ORDER BY c.n DESC") == list(range(399, -1, -1))
    assert values("SELECT VALUE COUNT(1) FROM c WHERE LOWER(c.type) = 't'") == [400]
    assert values("SELECT VALUE SUM(c.n) FROM c") == [sum(range(400))]


def test_a_budget_set_for_a_database_or_a_container_holds_only_there(
    cosmos: Target, database: DatabaseProxy, other_database: DatabaseProxy
) -> None:
    """Local only: the page budget set for a container, or for a database, ends the pages of
    the queries there (after their first slice, with none); the queries of another container
    of the database, whose budget is the database's (60 s here, `unhurried_pages`), answer in
    one page. The endpoint's own budget is left as it was."""
    if cosmos.local is None:
        pytest.skip("the page budget is the local endpoint's")
    key = PartitionKey(path=PK_PATH)
    cut = database.create_container(unique("cut"), partition_key=key)
    whole = database.create_container(unique("whole"), partition_key=key)
    elsewhere = other_database.create_container(unique("else"), partition_key=key)
    for container in (cut, whole, elsewhere):
        for first in (0, 100, 200):
            container.execute_item_batch(
                [("create", (doc(f"a{i:03}", "p1", n=i),)) for i in range(first, first + 100)],
                partition_key="p1",
            )
    before = control(cosmos.endpoint, "GET", "_emulators/queries")["budgetMs"]

    def pages(container: ContainerProxy) -> int:
        answer = container.query_items("SELECT VALUE c.n FROM c", partition_key="p1").by_page()
        found = [list(page) for page in answer]
        assert sorted(cast(int, n) for page in found for n in page) == list(range(300))
        return len(found)

    with (
        budget(cosmos, 0, database=database.id, container=cut.id),
        budget(cosmos, 0, database=other_database.id),
    ):
        assert control(cosmos.endpoint, "GET", "_emulators/queries")["budgetMs"] == before
        assert pages(cut) > 1
        assert pages(elsewhere) > 1
        assert pages(whole) == 1
    assert pages(cut) == 1  # the database's budget again
