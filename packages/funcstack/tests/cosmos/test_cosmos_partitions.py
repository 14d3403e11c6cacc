"""Physical partitions and live splits of the local Cosmos DB endpoint, through the synchronous
azure-cosmos SDK: a container of 4 partition key ranges, split while it is written and read.

What holds in Azure holds here: a change feed resumed from a continuation taken before a split
loses nothing and repeats nothing; documents keep their order per partition key, and only that;
a query paged across a split returns every document once; a request naming the parent range
answers 410 with sub-status 1002; /pkranges lists the children with their parent; point
operations and batches land in the child that holds their key. The ranges kept across a
restart: test_persistence.py's (on its writes' state, whose restarts are what it checks).
Splits are local-only calls (Azure splits on its own), so these tests need the local endpoint.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey, exceptions

from funcstack.cosmos import CosmosControlError, CosmosEndpoint
from funcstack.cosmos._tls import local_tls
from funcstack.deadlines import LOOPBACK, SHORT

from .conftest import PK_PATH, doc, unique

pytestmark = [
    pytest.mark.integration,
    pytest.mark.conformance,
]

PARTITIONS_HEADER = "x-funcstack-physical-partitions"
KEYS = [f"key-{i}" for i in range(8)]


def four_ranges(database: DatabaseProxy) -> ContainerProxy:
    """A container laid out in 4 physical partitions (the local endpoint's create header)."""
    return database.create_container(
        unique("c"), partition_key=PartitionKey(path=PK_PATH), headers={PARTITIONS_HEADER: "4"}
    )


def ranges(container: ContainerProxy) -> list[tuple[str, str]]:
    """The container's physical partitions as the SDK's routing map has them, fresh."""
    found = []
    for feed_range in container.read_feed_ranges(force_refresh=True):
        epk = feed_range["Range"]
        found.append((str(epk["min"]), str(epk["max"])))
    return sorted(found)


def range_of(container: ContainerProxy) -> str:
    """The partition key range the last response named."""
    return str(
        container.client_connection.last_response_headers["x-ms-documentdb-partitionkeyrangeid"]
    )


def write(container: ContainerProxy, key: str, seq: int) -> str:
    """Create the ``seq``-th document of ``key``; the range the endpoint says holds it."""
    container.create_item(doc(f"{key}-{seq:04d}", key, seq=seq))
    return range_of(container)


def continuation_ranges(token: str | None) -> int:
    """How many feed ranges a change feed continuation (the SDK's base64 JSON) holds."""
    assert token is not None
    state = json.loads(base64.b64decode(token))
    return len(state["continuation"]["continuation"])


def read_change_feed(
    container: ContainerProxy, token: str | None, max_items: int = 25
) -> tuple[list[dict[str, Any]], str | None]:
    """What a poller reads from ``token`` (None: the beginning): pages of at most
    ``max_items`` until the SDK finds nothing new in any range; the items and the continuation
    to go on from. (A continuation is taken once the iterator ran dry: before, the ranges it
    has not reached yet hold no token, and the SDK cannot read that continuation back.)"""
    if token is None:
        pages = container.query_items_change_feed(
            start_time="Beginning", max_item_count=max_items
        ).by_page()
    else:
        pages = container.query_items_change_feed(
            continuation=token, max_item_count=max_items
        ).by_page()
    items = [item for page in pages for item in page]
    # a read that found nothing at all hands out no continuation: go on from the same one
    handed = pages.continuation_token  # type: ignore[attr-defined]
    return items, str(handed) if handed is not None else token


def values(rows: Any) -> list[int]:
    """The numbers a SELECT VALUE query returns."""
    return [int(row) for row in rows]


def check_order_per_key(items: list[dict[str, Any]]) -> None:
    seen: dict[str, list[int]] = {}
    for item in items:
        seen.setdefault(str(item["partitionKey"]), []).append(int(item["seq"]))
    for key, seqs in seen.items():
        assert seqs == sorted(seqs), f"{key} out of order: {seqs}"


def raw(
    endpoint: str, method: str, path: str, headers: dict[str, str], body: Any = None
) -> tuple[int, Any, Any]:
    """One request to the endpoint as the SDKs send it (the local endpoint checks no key):
    status, JSON body (None when empty), headers."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - the local endpoint
        f"{endpoint.rstrip('/')}/{path}",
        data=data,
        method=method,
        headers={"x-ms-version": "2020-07-15", **headers},
    )
    context = ssl.create_default_context(cafile=str(local_tls().ca_file))  # verified
    try:
        with urllib.request.urlopen(request, context=context, timeout=LOOPBACK) as response:  # noqa: S310
            answer = response.read()
            return response.status, json.loads(answer) if answer else None, response.headers
    except urllib.error.HTTPError as exc:
        answer = exc.read()
        return exc.code, json.loads(answer) if answer else None, exc.headers


def pkranges(endpoint: str, path: str, etag: str | None = None) -> tuple[int, Any, str]:
    """GET a container's /pkranges as the SDK's routing map cache reads it (an incremental
    feed, If-None-Match: the etag of its last read): status, body, etag."""
    headers = {"A-IM": "Incremental feed"}
    if etag is not None:
        headers["If-None-Match"] = etag
    status, body, answered = raw(endpoint, "GET", f"{path}/pkranges", headers)
    return status, body, str(answered["etag"])


# ----------------------------------------------------------------- layout


def test_a_container_declared_with_four_partitions_has_four_ranges_that_tile_the_space(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    layout = ranges(container)
    assert len(layout) == 4
    assert layout[0][0] == "" and layout[-1][1] == "FF"
    assert all(layout[i][1] == layout[i + 1][0] for i in range(3))  # no gap, no overlap
    holders = {write(container, key, 0) for key in KEYS}
    assert len(holders) > 1  # the keys spread over the ranges
    # a query across them is served one range per answer, as the service's gateway serves it
    answers: list[Any] = []
    found = list(
        container.query_items(
            "SELECT * FROM c",
            enable_cross_partition_query=True,
            response_hook=lambda headers, _: answers.append(headers),
        )
    )
    assert len(found) == len(KEYS)
    answered = [str(a["x-ms-documentdb-partitionkeyrangeid"]) for a in answers]
    assert len(answered) == len(set(answered))  # one answer per range, each range once
    assert holders <= set(answered) <= {"0", "1", "2", "3"}
    counts = {p.id: p.documents for p in local.physical_partitions(database.id, container.id)}
    assert sorted(counts) == ["0", "1", "2", "3"] and sum(counts.values()) == len(KEYS)
    # each document lies in the range that holds its key's EPK, as the SDK's routing map says
    for key in KEYS:
        container.read_item(f"{key}-0000", partition_key=key)
        held = range_of(container)
        routed = container.client_connection._routing_map_provider.get_overlapping_ranges(  # type: ignore[no-untyped-call]
            container.container_link,
            [PartitionKey(path=PK_PATH)._get_epk_range_for_partition_key(key)],
            {},
        )
        assert [r["id"] for r in routed] == [held]


def test_throughput_lays_out_and_splits_partitions_as_the_service(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    small = database.create_container(unique("c"), partition_key=PartitionKey(path=PK_PATH))
    assert len(ranges(small)) == 1  # 400 RU/s: one partition
    big = database.create_container(
        unique("c"), partition_key=PartitionKey(path=PK_PATH), offer_throughput=30000
    )
    assert len(ranges(big)) == 5  # one per 6,000 RU/s, as a new container in Azure
    for i, key in enumerate(KEYS * 4):
        write(big, key, i)
    big.replace_throughput(60000)  # past 10,000 RU/s per partition: the service splits
    assert len(ranges(big)) == 6
    assert sum(p.documents for p in local.physical_partitions(database.id, big.id)) == 32


# ----------------------------------------------------------------- the change feed


def test_the_change_feed_resumed_from_before_a_split_loses_and_repeats_nothing(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    per_key = 25
    for key in KEYS:  # some documents before anything is read
        write(container, key, 0)
    items, before_split = read_change_feed(container, None)  # the continuation before the split
    assert len(items) == len(KEYS)

    halfway = threading.Event()
    written: list[str] = []
    # a client of its own: the SDK hands a page's continuation out of the client's
    # last_response_headers, which a write on the same client from another thread replaces
    writing = CosmosClient(local.endpoint, local.key, **local.client_options())
    target = writing.get_database_client(database.id).get_container_client(container.id)

    def writer() -> None:
        for seq in range(1, per_key):
            for key in KEYS:
                target.create_item(doc(f"{key}-{seq:04d}", key, seq=seq))
                written.append(f"{key}-{seq:04d}")
            if seq == per_key // 2:
                halfway.set()

    seen: list[dict[str, Any]] = []
    reader_token: list[str | None] = [before_split]

    failed: list[BaseException] = []

    def reader() -> None:  # polls while the documents are written and the range is split
        try:
            while len(seen) < (per_key - 1) * len(KEYS):
                more, reader_token[0] = read_change_feed(container, reader_token[0])
                seen.extend(more)
                if not more:
                    time.sleep(0.02)
        except BaseException as exc:  # the test says so, not a thread's warning
            failed.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader, daemon=True)]
    for t in threads:
        t.start()
    assert halfway.wait(SHORT), f"half the documents written: {len(written)} in {SHORT:g} s"
    children = local.split(database.id, container.id)  # the range holding the most documents
    threads[0].join(SHORT)
    threads[1].join(SHORT)
    writing.close()
    assert not failed, f"the reader failed: {failed[0]!r}"
    assert not threads[1].is_alive(), f"the reader saw {len(seen)} of {len(written)}"
    ids = [str(i["id"]) for i in seen]
    assert len(ids) == len(set(ids)), "a document came twice"
    assert sorted(ids) == sorted(written)
    check_order_per_key(seen)
    assert len(children) == 2
    assert continuation_ranges(reader_token[0]) == 5  # the SDK went on with both children

    # read again from the continuation taken before the split: the same, once each
    again, _ = read_change_feed(container, before_split, max_items=50)
    assert sorted(str(i["id"]) for i in again) == sorted(written)
    check_order_per_key(again)


def test_order_holds_per_partition_key_and_only_that(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    by_range: dict[str, list[str]] = {}
    for key in KEYS:
        by_range.setdefault(write(container, key, 0), []).append(key)
    for seq in (1, 2):
        for key in KEYS:
            write(container, key, seq)
    assert len(by_range) > 1, "the keys all lie in one physical partition"
    # write one document in the last range, then one in the first: written in that order
    last, first = max(by_range), min(by_range)
    order = [f"{by_range[last][0]}-0100", f"{by_range[first][0]}-0100"]
    container.create_item(doc(order[0], by_range[last][0], seq=100))
    container.create_item(doc(order[1], by_range[first][0], seq=100))
    items, _ = read_change_feed(container, None, max_items=100)
    check_order_per_key(items)
    fed = [str(i["id"]) for i in items]
    # across keys in different physical partitions, the feed does not follow the writes
    assert fed.index(order[1]) < fed.index(order[0])


def test_read_feed_ranges_and_pkranges_after_a_split(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    for seq, key in enumerate(KEYS * 3):
        write(container, key, seq)
    path = f"dbs/{database.id}/colls/{container.id}"
    status, body, etag = pkranges(local.endpoint, path)
    assert status == 200 and [r["id"] for r in body["PartitionKeyRanges"]] == ["0", "1", "2", "3"]
    assert pkranges(local.endpoint, path, etag)[0] == 304  # nothing new since

    before = ranges(container)
    parent = "2"
    children = local.split(database.id, container.id, parent)
    assert children == ["4", "5"]

    # the incremental read the SDK's cache does: the children only, naming their parent
    status, body, new_etag = pkranges(local.endpoint, path, etag)
    assert status == 200 and new_etag != etag
    listed = body["PartitionKeyRanges"]
    assert [(r["id"], r["parents"]) for r in listed] == [("4", ["2"]), ("5", ["2"])]
    old = {str(i): r for i, r in enumerate(before)}
    assert listed[0]["minInclusive"] == old[parent][0]
    assert listed[0]["maxExclusive"] == listed[1]["minInclusive"]
    assert listed[1]["maxExclusive"] == old[parent][1]
    assert pkranges(local.endpoint, path, new_etag)[0] == 304

    after = ranges(container)
    assert len(after) == 5
    assert set(before) - set(after) == {old[parent]}  # only the parent's span is cut in two
    assert sum(p.documents for p in local.physical_partitions(database.id, container.id)) == 24
    # a container's settings replaced: its partitions stay, and its body never shows them
    replaced = database.replace_container(
        container, partition_key=PartitionKey(path=PK_PATH), default_ttl=60
    )
    assert ranges(replaced) == after
    assert not [k for k in replaced.read() if "artition" in k and k != "partitionKey"]


def test_a_request_naming_a_split_range_answers_410_with_sub_status_1002(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    for seq, key in enumerate(KEYS):
        write(container, key, seq)
    path = f"dbs/{database.id}/colls/{container.id}/docs"
    change_feed = {"A-IM": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": "1"}
    query = {
        "x-ms-documentdb-isquery": "true",
        "content-type": "application/query+json",
        "x-ms-documentdb-partitionkeyrangeid": "1",
    }
    status, body, _ = raw(local.endpoint, "GET", path, change_feed)
    assert status == 200
    held = len(body["Documents"])
    status, body, _ = raw(local.endpoint, "POST", path, query, {"query": "SELECT * FROM c"})
    assert status == 200 and len(body["Documents"]) == held  # the range serves its own

    children = local.split(database.id, container.id, "1")
    for method, headers, payload in (
        ("GET", change_feed, None),
        ("POST", query, {"query": "SELECT * FROM c"}),
    ):
        status, body, answered = raw(local.endpoint, method, path, headers, payload)
        assert (status, answered["x-ms-substatus"]) == (410, "1002")
        assert body["code"] == "Gone"
        assert f"'1' was split into {', '.join(children)}" in body["message"]
    for child in children:  # the children serve the parent's documents between them
        status, body, _ = raw(
            local.endpoint,
            "GET",
            path,
            {**change_feed, "x-ms-documentdb-partitionkeyrangeid": child},
        )
        held -= len(body["Documents"]) if status == 200 else 0
    assert held == 0
    with pytest.raises(CosmosControlError, match="No live partition key range '1'"):
        local.split(database.id, container.id, "1")


# ----------------------------------------------------------------- queries


#: The whole container as a feed range (the shape read_feed_ranges() gives each range).
WHOLE = {"Range": {"min": "", "max": "FF", "isMinInclusive": True, "isMaxInclusive": False}}


def test_a_query_paged_across_a_split_returns_every_document_once(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    for seq in range(10):
        for key in KEYS:
            write(container, key, seq)
    total = 10 * len(KEYS)
    feed_ranges = list(container.read_feed_ranges())
    # paged over the whole container's feed range; the range of the first page split after it
    pages = container.query_items("SELECT * FROM c", feed_range=WHOLE, max_item_count=5).by_page()
    first = [str(i["id"]) for i in next(pages)]
    token = pages.continuation_token  # type: ignore[attr-defined]
    assert token and len(first) == 5
    # and through the gateway, which serves it one range per answer, paged the same way
    gateway = container.query_items(
        "SELECT * FROM c", enable_cross_partition_query=True, max_item_count=7
    ).by_page()
    gateway_first = [str(i["id"]) for i in next(gateway)]
    gateway_token = gateway.continuation_token  # type: ignore[attr-defined]

    container.read_item(first[0], partition_key=first[0].rsplit("-", 1)[0])
    local.split(database.id, container.id, range_of(container))

    rest = [
        str(i["id"])
        for page in container.query_items(
            "SELECT * FROM c", feed_range=WHOLE, max_item_count=5
        ).by_page(token)
        for i in page
    ]
    ids = first + rest
    assert len(ids) == len(set(ids)) == total
    gateway_rest = [
        str(i["id"])
        for page in container.query_items(
            "SELECT * FROM c", enable_cross_partition_query=True, max_item_count=7
        ).by_page(gateway_token)
        for i in page
    ]
    assert len(gateway_first + gateway_rest) == len({*gateway_first, *gateway_rest}) == total

    # queries the SDK merges from each range, on the routing map it cached before the split
    ordered = [
        int(i["seq"])
        for i in container.query_items(
            "SELECT * FROM c ORDER BY c.seq", enable_cross_partition_query=True
        )
    ]
    assert ordered == sorted(ordered) and len(ordered) == total
    assert values(
        container.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True)
    ) == [total]
    assert values(
        container.query_items("SELECT VALUE SUM(c.seq) FROM c", enable_cross_partition_query=True)
    ) == [45 * len(KEYS)]
    # each feed range read before the split still holds what it held
    counted = 0
    for feed_range in feed_ranges:
        counted += sum(
            values(container.query_items("SELECT VALUE COUNT(1) FROM c", feed_range=feed_range))
        )
    assert counted == total
    one_key = [
        int(i["seq"])
        for i in container.query_items("SELECT * FROM c ORDER BY c.seq", partition_key=KEYS[0])
    ]
    assert one_key == list(range(10))


# ----------------------------------------------------------------- point operations


def test_point_reads_and_batches_after_a_split_land_in_the_child(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    holders = {key: write(container, key, 0) for key in KEYS}
    busiest = max(local.physical_partitions(database.id, container.id), key=lambda p: p.documents)
    moved = [key for key, held in holders.items() if held == busiest.id]
    children = local.split(database.id, container.id, busiest.id)
    landed = set()
    for key in moved:
        assert container.read_item(f"{key}-0000", partition_key=key)["seq"] == 0
        child = range_of(container)
        assert child in children
        result = container.execute_item_batch(
            [
                ("create", (doc(f"{key}-0001", key, seq=1),)),
                ("upsert", (doc(f"{key}-0000", key, seq=0, touched=True),)),
            ],
            partition_key=key,
        )
        assert [r["statusCode"] for r in result] == [201, 200]
        headers = container.client_connection.last_response_headers
        assert headers["x-ms-documentdb-partitionkeyrangeid"] == child
        assert str(headers["x-ms-session-token"]).startswith(f"{child}:")
        landed.add(child)
    assert landed <= set(children)
    counts = {p.id: p.documents for p in local.physical_partitions(database.id, container.id)}
    assert busiest.id not in counts
    assert sum(counts[c] for c in children) == 2 * len(moved)


# ----------------------------------------------------------------- the Python API


def test_split_names_what_it_cannot_do(local: CosmosEndpoint, database: DatabaseProxy) -> None:
    container = four_ranges(database)
    with pytest.raises(
        CosmosControlError, match=r"No live partition key range '9'.*live: 0, 1, 2, 3"
    ):
        local.split(database.id, container.id, "9")
    with pytest.raises(CosmosControlError, match="No container 'nope' in database"):
        local.split(database.id, "nope")
    with pytest.raises(CosmosControlError, match="No database 'nowhere'"):
        local.physical_partitions("nowhere", container.id)
    with pytest.raises(exceptions.CosmosHttpResponseError, match=PARTITIONS_HEADER):
        database.create_container(
            unique("c"), partition_key=PartitionKey(path=PK_PATH), headers={PARTITIONS_HEADER: "0"}
        )
    # an empty range is cut in the middle of the hash space it covers
    assert local.split(database.id, container.id, "0") == ["4", "5"]
    assert len(ranges(container)) == 5
