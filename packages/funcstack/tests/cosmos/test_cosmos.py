"""Conformance of a Cosmos DB endpoint through the synchronous azure-cosmos SDK.

Only documented Cosmos DB behaviour is asserted, so the suite also runs against the
official emulator (COSMOS_ENDPOINT / COSMOS_KEY).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from azure.core.paging import PageIterator
from azure.cosmos import ContainerProxy, DatabaseProxy, PartitionKey, exceptions
from azure.cosmos.partition_key import NonePartitionKeyValue

from funcstack.cosmos._control import control
from funcstack.deadlines import SHORT, wait_for

from .conftest import PK_PATH, UNCHANGED, Target, doc, unique

pytestmark = [
    pytest.mark.integration,
    pytest.mark.conformance,
]


def ids(items: Any) -> list[str]:
    return [str(i["id"]) for i in items]


def change_feed_etag(container: ContainerProxy) -> str:
    return str(container.client_connection.last_response_headers["etag"])


# ----------------------------------------------------------------- databases / containers


def test_create_if_not_exists_is_idempotent_and_keeps_settings(database: DatabaseProxy) -> None:
    name = unique("c")
    first = database.create_container_if_not_exists(
        name, partition_key=PartitionKey(path=PK_PATH), default_ttl=-1
    )
    again = database.create_container_if_not_exists(
        name, partition_key=PartitionKey(path=PK_PATH), default_ttl=-1
    )
    props = again.read()
    assert first.id == again.id == name
    assert props["partitionKey"]["paths"] == [PK_PATH]
    assert props["defaultTtl"] == -1


# ----------------------------------------------------------------- point operations


def test_point_operations_and_status_codes(container: ContainerProxy) -> None:
    created = container.create_item(doc("a", "p1", v=1))
    assert created["_etag"]
    read = container.read_item("a", partition_key="p1")
    assert read["v"] == 1 and read["_etag"] == created["_etag"]

    with pytest.raises(exceptions.CosmosResourceExistsError) as conflict:
        container.create_item(doc("a", "p1", v=9))
    assert conflict.value.status_code == 409

    with pytest.raises(exceptions.CosmosResourceNotFoundError) as missing:
        container.read_item("missing", partition_key="p1")
    assert missing.value.status_code == 404
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item("a", partition_key="other-partition")
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.replace_item("missing", doc("missing", "p1"))
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.delete_item("missing", partition_key="p1")

    replaced = container.replace_item(
        "a", doc("a", "p1", v=2), etag=created["_etag"], match_condition=UNCHANGED
    )
    assert replaced["v"] == 2 and replaced["_etag"] != created["_etag"]
    with pytest.raises(exceptions.CosmosAccessConditionFailedError) as stale:
        container.replace_item(
            "a", doc("a", "p1", v=3), etag=created["_etag"], match_condition=UNCHANGED
        )
    assert stale.value.status_code == 412
    with pytest.raises(exceptions.CosmosAccessConditionFailedError):
        container.delete_item(
            "a", partition_key="p1", etag=created["_etag"], match_condition=UNCHANGED
        )
    assert container.read_item("a", partition_key="p1")["v"] == 2

    upserted = container.upsert_item(doc("a", "p1", v=4))
    assert upserted["v"] == 4
    assert container.upsert_item(doc("b", "p1", v=1))["v"] == 1
    with pytest.raises(exceptions.CosmosAccessConditionFailedError):
        container.upsert_item(
            doc("a", "p1", v=5), etag=replaced["_etag"], match_condition=UNCHANGED
        )

    patched = container.patch_item(
        "b", partition_key="p1", patch_operations=[{"op": "set", "path": "/v", "value": 7}]
    )
    assert patched["v"] == 7

    container.delete_item(
        "a", partition_key="p1", etag=upserted["_etag"], match_condition=UNCHANGED
    )
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item("a", partition_key="p1")
    assert sorted(ids(container.read_all_items())) == ["b"]


def test_conditional_patch_takes_any_alias_and_answers_412_when_unmet(
    container: ContainerProxy,
) -> None:
    container.create_item(doc("c", "p1", n=1))
    set_n = [{"op": "set", "path": "/n", "value": 2}]
    for predicate in ("from root where root.n = 5", "FROM c WHERE c.n = 5"):
        with pytest.raises(exceptions.CosmosAccessConditionFailedError) as unmet:
            container.patch_item(
                "c", partition_key="p1", patch_operations=set_n, filter_predicate=predicate
            )
        assert unmet.value.status_code == 412
    patched = container.patch_item(
        "c",
        partition_key="p1",
        patch_operations=set_n,
        filter_predicate="from root where root.n = 1",
    )
    assert patched["n"] == 2


def test_items_addressed_by_their_properties_and_minimal_responses(
    container: ContainerProxy,
) -> None:
    created = container.create_item(doc("d", "p1", v=1))
    # an item dict addresses the document by its _self link (resource ids, not names)
    assert container.read_item(created, partition_key="p1")["v"] == 1
    replaced = container.replace_item(created, doc("d", "p1", v=2))
    assert replaced["v"] == 2
    # no_response=True: the service answers writes with headers only
    assert container.create_item(doc("e", "p1"), no_response=True) == {}
    assert container.upsert_item(doc("e", "p1", v=3), no_response=True) == {}
    assert container.read_item("e", partition_key="p1")["v"] == 3


def test_a_replace_naming_another_id_renames_the_document(container: ContainerProxy) -> None:
    # a document's id is settable, not immutable: replace by the old id with a new id in
    # the body renames it, alone or in a batch; an id taken in the partition is a conflict
    container.create_item(doc("old", "p1", v=1))
    container.create_item(doc("taken", "p1"))
    container.replace_item("old", doc("new", "p1", v=2))
    assert container.read_item("new", partition_key="p1")["v"] == 2
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item("old", partition_key="p1")
    with pytest.raises(exceptions.CosmosResourceExistsError):
        container.replace_item("new", doc("taken", "p1", v=3))
    container.execute_item_batch([("replace", ("new", doc("newer", "p1", v=4)))], "p1")
    assert sorted(ids(container.read_all_items())) == ["newer", "taken"]
    # a failed batch puts the old name back
    with pytest.raises(exceptions.CosmosBatchOperationError):
        container.execute_item_batch(
            [
                ("replace", ("newer", doc("newest", "p1"))),
                ("create", (doc("taken", "p1"),)),
            ],
            "p1",
        )
    assert sorted(ids(container.read_all_items())) == ["newer", "taken"]


def test_delete_all_items_of_one_partition_key(container: ContainerProxy) -> None:
    for item in (doc("f1", "gone"), doc("f2", "gone"), doc("f3", "kept")):
        container.create_item(item)
    container.delete_all_items_by_partition_key("gone")
    assert ids(container.read_all_items()) == ["f3"]


def test_same_id_in_two_partitions_are_two_documents(container: ContainerProxy) -> None:
    container.create_item(doc("same", "p1", v=1))
    container.create_item(doc("same", "p2", v=2))
    assert container.read_item("same", partition_key="p1")["v"] == 1
    assert container.read_item("same", partition_key="p2")["v"] == 2


# ----------------------------------------------------------------- transactional batch


def test_batch_applies_all_operation_kinds(container: ContainerProxy) -> None:
    existing = container.create_item(doc("e", "p1", v=1))
    container.create_item(doc("gone", "p1"))
    container.create_item(doc("patch-me", "p1", v=1))
    results = container.execute_item_batch(
        batch_operations=[
            ("create", (doc("n1", "p1", v=1),)),
            ("upsert", (doc("n2", "p1", v=1),)),
            ("replace", ("e", doc("e", "p1", v=2)), {"if_match_etag": existing["_etag"]}),
            ("read", ("e",)),
            ("delete", ("gone",)),
            ("patch", ("patch-me", [{"op": "incr", "path": "/v", "value": 5}])),
            ("upsert", (doc("e", "p1", v=3),)),
        ],
        partition_key="p1",
    )
    assert [r["statusCode"] for r in results] == [201, 201, 200, 200, 204, 200, 200]
    assert results[0]["resourceBody"]["id"] == "n1"
    assert results[3]["resourceBody"]["v"] == 2
    assert container.read_item("e", partition_key="p1")["v"] == 3
    assert container.read_item("patch-me", partition_key="p1")["v"] == 6
    assert sorted(ids(container.read_all_items())) == ["e", "n1", "n2", "patch-me"]


@pytest.mark.parametrize(
    ("failing_op", "status"),
    [
        (("create", (doc("dup", "p1"),)), 409),
        (("replace", ("dup", doc("dup", "p1", v=2)), {"if_match_etag": '"stale"'}), 412),
        (("replace", ("missing", doc("missing", "p1"))), 404),
        (("delete", ("missing",)), 404),
        (("read", ("missing",)), 404),
    ],
)
def test_batch_is_atomic_on_failure(
    container: ContainerProxy, failing_op: tuple[Any, ...], status: int
) -> None:
    container.create_item(doc("dup", "p1", v=1))
    with pytest.raises(exceptions.CosmosBatchOperationError) as err:
        container.execute_item_batch(
            batch_operations=[
                ("create", (doc("first", "p1"),)),
                ("upsert", (doc("dup", "p1", v=99),)),
                failing_op,
                ("create", (doc("last", "p1"),)),
            ],
            partition_key="p1",
        )
    assert err.value.error_index == 2
    assert [int(r["statusCode"]) for r in err.value.operation_responses] == [424, 424, status, 424]
    assert ids(container.read_all_items()) == ["dup"]
    assert container.read_item("dup", partition_key="p1")["v"] == 1


def test_batch_of_more_than_100_operations_is_rejected(container: ContainerProxy) -> None:
    ops = [("create", (doc(f"d{i}", "p1"),)) for i in range(101)]
    with pytest.raises(exceptions.CosmosHttpResponseError):
        container.execute_item_batch(batch_operations=ops, partition_key="p1")
    assert list(container.read_all_items()) == []


def test_batch_of_100_operations_succeeds(container: ContainerProxy) -> None:
    ops = [("create", (doc(f"d{i}", "p1"),)) for i in range(100)]
    results = container.execute_item_batch(batch_operations=ops, partition_key="p1")
    assert len(results) == 100
    assert len(list(container.read_all_items())) == 100


# ----------------------------------------------------------------- change feed


def test_change_feed_from_beginning_latest_version_in_modification_order(
    container: ContainerProxy,
) -> None:
    # the order is guaranteed within a logical partition
    container.create_item(doc("a", "p1", v=1))
    container.create_item(doc("b", "p1", v=1))
    container.upsert_item(doc("a", "p1", v=2))
    container.create_item(doc("gone", "p1"))
    container.delete_item("gone", partition_key="p1")
    items = list(container.query_items_change_feed(start_time="Beginning"))
    assert ids(items) == ["b", "a"]
    assert items[1]["v"] == 2


def test_change_feed_continuation_returns_only_newer_changes(container: ContainerProxy) -> None:
    container.create_item(doc("a", "p1"))
    assert ids(container.query_items_change_feed(start_time="Beginning")) == ["a"]
    token = change_feed_etag(container)
    assert ids(container.query_items_change_feed(continuation=token)) == []
    token = change_feed_etag(container)
    container.create_item(doc("b", "p1"))
    container.upsert_item(doc("a", "p1", v=2))
    assert ids(container.query_items_change_feed(continuation=token)) == ["b", "a"]
    token = change_feed_etag(container)
    assert ids(container.query_items_change_feed(continuation=token)) == []


def test_change_feed_from_now(container: ContainerProxy) -> None:
    container.create_item(doc("before", "p1"))
    assert list(container.query_items_change_feed(start_time="Now")) == []
    token = change_feed_etag(container)
    container.create_item(doc("after", "p1"))
    assert ids(container.query_items_change_feed(continuation=token)) == ["after"]


def test_change_feed_from_point_in_time(container: ContainerProxy) -> None:
    container.create_item(doc("old", "p1"))
    time.sleep(1.2)  # time passing: the start time travels with one-second precision
    start = datetime.now(UTC)
    container.create_item(doc("new", "p1"))
    assert ids(container.query_items_change_feed(start_time=start)) == ["new"]


def test_change_feed_pages_by_max_item_count(container: ContainerProxy) -> None:
    for i in range(7):
        container.create_item(doc(f"d{i}", "p1"))
    feed = container.query_items_change_feed(start_time="Beginning", max_item_count=3)
    pages = [list(p) for p in feed.by_page()]
    flat = [i for p in pages for i in ids(p)]
    assert flat == [f"d{i}" for i in range(7)]
    assert all(len(p) <= 3 for p in pages)
    assert len([p for p in pages if p]) >= 3


def test_change_feed_partition_key_scope(container: ContainerProxy) -> None:
    container.create_item(doc("a", "p1"))
    container.create_item(doc("b", "p2"))
    container.create_item(doc("c", "p1"))
    assert ids(container.query_items_change_feed(partition_key="p1", start_time="Beginning")) == [
        "a",
        "c",
    ]
    token = change_feed_etag(container)
    container.create_item(doc("d", "p2"))
    container.create_item(doc("e", "p1"))
    assert ids(container.query_items_change_feed(continuation=token)) == ["e"]


def test_change_feed_partition_key_scope_on_a_hash_v1_container(database: DatabaseProxy) -> None:
    # a version 1 container: the SDK scopes the feed by the key's V1 effective partition key
    # (a hash plus the key itself; strings cut to 100 characters, numbers, booleans)
    container = database.create_container_if_not_exists(
        unique("v1"), partition_key=PartitionKey(path=PK_PATH, version=1)
    )
    keys: list[Any] = ["short", "long" + "a" * 150, 1000, 1111.1, True]
    for n, key in enumerate(keys):
        container.create_item({"id": f"k{n}", PK_PATH[1:]: key})
        container.create_item({"id": f"k{n}-again", PK_PATH[1:]: key})
    for n, key in enumerate(keys):
        feed = container.query_items_change_feed(partition_key=key, start_time="Beginning")
        assert ids(feed) == [f"k{n}", f"k{n}-again"], key


def test_hash_v1_places_each_key_where_the_sdks_feed_range_of_it_is(
    database: DatabaseProxy,
) -> None:
    # a version 1 container: the change feed scoped to the feed range the SDK computes for a key
    # (its V1 EPK) holds that key's documents and no other. A number hashes as its double, as
    # the service and the .NET SDK hash it: -0.0 is not 0, -1.0 not 2**32 - 1, 2**40 not 0, and
    # -5 is -5.0. The keys asked are floats: azure-cosmos hashes a Python int by its low 32 bits
    # (4.17), so its feed range of -5 or 2**40 is not where the service keeps that key.
    container = database.create_container_if_not_exists(
        unique("v1"), partition_key=PartitionKey(path=PK_PATH, version=1)
    )
    numbers: list[Any] = [0, -0.0, 7, 2**32 - 1, 1.5, -1.5, -0.25, 1111.1, -1.0, 1e300, 5e-324]
    numbers += [float(n) for n in [-(2**31), -(2**40), 2**32, 2**40, 2**53, 2**60, -(2**60)]]
    others: list[Any] = ["", "short", "é" * 60, "日本" * 40, "😀" * 30, True, False, None]
    groups: list[list[Any]] = [[key] for key in [*numbers, *others, NonePartitionKeyValue]]
    groups.append([-5.0, -5])
    groups.append(["a" * 100, "a" * 101])  # V1 keeps the first 100 characters of a string
    for g, keys in enumerate(groups):
        for n, key in enumerate(keys):
            item: dict[str, Any] = {"id": f"g{g}-{n}"}
            if key is not NonePartitionKeyValue:
                item[PK_PATH[1:]] = key
            container.create_item(item)
    misplaced: dict[str, list[str]] = {}
    for g, keys in enumerate(groups):
        feed_range = container.feed_range_from_partition_key(keys[0])
        found = ids(
            container.query_items_change_feed(feed_range=feed_range, start_time="Beginning")
        )
        if sorted(found) != [f"g{g}-{n}" for n in range(len(keys))]:
            misplaced[repr(keys[0])] = found
    assert not misplaced, str(misplaced)


def test_change_feed_scoped_to_documents_without_a_partition_key_value(
    container: ContainerProxy,
) -> None:
    # no value at the key path is "undefined", a key of its own (not null)
    container.create_item({"id": "none"})
    container.create_item({"id": "null", PK_PATH[1:]: None})
    container.create_item(doc("set", "p1"))
    feed = container.query_items_change_feed(
        partition_key=NonePartitionKeyValue, start_time="Beginning"
    )
    assert ids(feed) == ["none"]


def test_change_feed_feed_range_scope(container: ContainerProxy) -> None:
    for i in range(4):
        container.create_item(doc(f"d{i}", f"p{i}"))
    ranges = list(container.read_feed_ranges())
    assert ranges
    seen: list[str] = []
    for feed_range in ranges:
        feed = container.query_items_change_feed(feed_range=feed_range, start_time="Beginning")
        seen += ids(feed)
    assert sorted(seen) == ["d0", "d1", "d2", "d3"]


def test_batch_changes_appear_in_change_feed(container: ContainerProxy) -> None:
    container.execute_item_batch(
        batch_operations=[
            ("create", (doc("c1", "p1", type="contact"),)),
            ("create", (doc("e1", "p1", type="domainEvent", ttl=600),)),
        ],
        partition_key="p1",
    )
    assert sorted(ids(container.query_items_change_feed(start_time="Beginning"))) == ["c1", "e1"]


# ----------------------------------------------------------------- TTL


def test_item_ttl_expires_from_reads_queries_and_change_feed(container: ContainerProxy) -> None:
    container.create_item(doc("short", "p1", ttl=1))
    container.create_item(doc("forever", "p1", ttl=-1))
    container.create_item(doc("default", "p1"))

    def expired() -> bool:
        try:
            container.read_item("short", partition_key="p1")
        except exceptions.CosmosResourceNotFoundError:
            return True
        return False

    wait_for(expired, "'short' gone once its 1 s time to live ran out", every=0.25)
    assert sorted(ids(container.query_items("SELECT * FROM c", partition_key="p1"))) == [
        "default",
        "forever",
    ]
    assert sorted(ids(container.query_items_change_feed(start_time="Beginning"))) == [
        "default",
        "forever",
    ]


def test_container_default_ttl_applies_to_items(database: DatabaseProxy) -> None:
    container = database.create_container_if_not_exists(
        unique("c"), partition_key=PartitionKey(path=PK_PATH), default_ttl=1
    )
    container.create_item(doc("x", "p1"))
    container.create_item(doc("keep", "p1", ttl=-1))
    wait_for(
        lambda: ids(container.read_all_items()) == ["keep"],
        "'x' gone once the container's 1 s time to live ran out",
        every=0.25,
    )


def test_replace_container_changes_ttl_and_keeps_items(database: DatabaseProxy) -> None:
    container = database.create_container_if_not_exists(
        unique("c"), partition_key=PartitionKey(path=PK_PATH)
    )
    container.create_item(doc("kept", "p1"))
    replaced = database.replace_container(
        container, partition_key=PartitionKey(path=PK_PATH), default_ttl=-1
    )
    assert replaced.read()["defaultTtl"] == -1
    assert ids(replaced.read_all_items()) == ["kept"]


def test_item_ttl_ignored_without_container_ttl(database: DatabaseProxy) -> None:
    container = database.create_container_if_not_exists(
        unique("c"), partition_key=PartitionKey(path=PK_PATH)
    )
    container.create_item(doc("x", "p1", ttl=1))
    time.sleep(2.2)  # a non-event: past its time to live and a sweep, it is still there
    assert container.read_item("x", partition_key="p1")["id"] == "x"


# ----------------------------------------------------------------- queries


def test_query_partition_scope_and_cross_partition(container: ContainerProxy) -> None:
    for i in range(6):
        container.create_item(doc(f"d{i}", f"p{i % 2}", n=i))
    scoped = container.query_items("SELECT * FROM c ORDER BY c.n", partition_key="p1")
    assert ids(scoped) == ["d1", "d3", "d5"]
    param = container.query_items(
        "SELECT * FROM c WHERE c.n >= @n ORDER BY c.n",
        parameters=[{"name": "@n", "value": 2}],
        partition_key="p0",
    )
    assert ids(param) == ["d2", "d4"]
    everything = container.query_items(
        "SELECT * FROM c WHERE c.type = 'none' OR c.n >= 0", enable_cross_partition_query=True
    )
    assert sorted(ids(everything)) == [f"d{i}" for i in range(6)]


def test_a_where_of_nested_groups_is_answered(container: ContainerProxy) -> None:
    """The package's SQL parser backtracks (PEG.js without its results cache): six nested
    groups took 10 s to parse, twelve would not end, and the endpoint answered nothing
    meanwhile. The service parses them at once; sqlparser.js loads the parser with the cache."""
    container.create_item(doc("g1", "p1", n=1, s="b"))
    container.create_item(doc("g2", "p1", n=2, s="a"))
    query = (
        "SELECT VALUE c.id FROM c WHERE ((((((((((((((c.n = 1)))))))))))))"  # 12 groups
        " AND ((c.s = 'b') OR (NOT (c.n > 3))))"
    )
    # a bound, so that a parse which does not end fails the test instead of hanging the suite
    found = container.query_items(query, partition_key="p1", timeout=SHORT)
    assert list(cast(Any, found)) == ["g1"]


def test_query_distinct_offset_limit_and_keyword_like_names(container: ContainerProxy) -> None:
    for i in range(6):
        container.create_item(doc(f"q{i}", f"p{i % 2}", group=i // 2, value1=i))
    distinct = container.query_items(
        "SELECT DISTINCT VALUE c['group'] FROM c ORDER BY c['group']",
        enable_cross_partition_query=True,
    )
    assert list(cast(Any, distinct)) == [0, 1, 2]  # VALUE rows are not dicts
    page = container.query_items(
        "SELECT VALUE c.id FROM c ORDER BY c.id OFFSET @skip LIMIT 2",
        parameters=[{"name": "@skip", "value": 1}],
        enable_cross_partition_query=True,
    )
    assert list(cast(Any, page)) == ["q1", "q2"]
    # distinct by value: field order does not matter; pages of one item each
    pages = container.query_items(
        "SELECT DISTINCT c['group'] FROM c",
        enable_cross_partition_query=True,
        max_item_count=1,
    ).by_page()
    assert [list(p) for p in pages] == [[{"group": 0}], [{"group": 1}], [{"group": 2}]]
    # a property whose name starts with a keyword, a parameter named like one
    found = container.query_items(
        "SELECT VALUE c.id FROM c WHERE c.value1 = @value",
        parameters=[{"name": "@value", "value": 4}],
        enable_cross_partition_query=True,
    )
    assert list(cast(Any, found)) == ["q4"]


def test_query_metrics_when_asked(container: ContainerProxy) -> None:
    container.create_item(doc("m1", "p1"))
    container.create_item(doc("m2", "p1"))
    list(
        container.query_items(
            "SELECT * FROM c WHERE c.id = 'm1'", partition_key="p1", populate_query_metrics=True
        )
    )
    header = container.client_connection.last_response_headers["x-ms-documentdb-query-metrics"]
    metrics = dict(pair.split("=") for pair in header.split(";"))
    # id is always indexed: the document is found from the index, the other is never read
    assert metrics["retrievedDocumentCount"] == "1"
    assert metrics["outputDocumentCount"] == "1"
    # the service writes every time as a decimal with two places ("0.47"), never a word or "-1"
    assert re.fullmatch(r"\d+\.\d{2}", metrics["totalExecutionTimeInMs"])
    assert float(metrics["VMExecutionTimeInMs"]) <= float(metrics["totalExecutionTimeInMs"])


def test_reads_carry_the_session_token_of_the_write_before(container: ContainerProxy) -> None:
    container.create_item(doc("s1", "p1"))
    written = container.client_connection.last_response_headers["x-ms-session-token"]
    sent: dict[str, str] = {}
    container.read_item(
        "s1",
        partition_key="p1",
        raw_response_hook=lambda response: sent.update(response.http_request.headers),
    )
    assert sent.get("x-ms-session-token") == written
    # a delete is a write of its own: a newer session token
    container.delete_item("s1", partition_key="p1")
    deleted = container.client_connection.last_response_headers["x-ms-session-token"]
    assert deleted != written


def test_a_continuation_token_of_another_container_starts_from_the_beginning(
    container: ContainerProxy,
) -> None:
    container.create_item(doc("t1", "p1"))
    pages = container.query_items("SELECT * FROM c", partition_key="p1").by_page(
        continuation_token="-RID:~a0NPAOszCpOChB4AAAAAAA==#RT:1#TRC:2#ISV:2#IEO:65567#QCF:8"
    )
    assert [ids(p) for p in pages] == [["t1"]]
    with pytest.raises(exceptions.CosmosHttpResponseError) as garbage:
        list(
            container.query_items("SELECT * FROM c", partition_key="p1").by_page(
                continuation_token="not a token"
            )
        )
    assert garbage.value.status_code == 400


def test_cross_partition_queries_that_need_merging_run_from_the_sdks_query_plan(
    container: ContainerProxy,
) -> None:
    # as the service's gateway: ORDER BY, TOP, OFFSET/LIMIT, DISTINCT and aggregates across
    # partitions are refused (400, sub-status 1004), the SDK fetches the plan, queries each
    # range with the plan's rewritten query and merges (ordering, TOP, aggregates) itself
    for i in range(6):
        container.create_item(doc(f"o{i}", f"p{i % 3}", n=i, tag=i % 2))
    per_range: list[str] = []  # the plan's rewritten queries go to a partition key range

    def hook(response: Any) -> None:
        if "x-ms-documentdb-partitionkeyrangeid" in response.http_request.headers:
            per_range.append(response.http_request.headers["x-ms-documentdb-partitionkeyrangeid"])

    def run(query: str, **kwargs: Any) -> list[Any]:
        return list(
            cast(
                Any,
                container.query_items(
                    query, enable_cross_partition_query=True, raw_response_hook=hook, **kwargs
                ),
            )
        )

    assert ids(run("SELECT * FROM c ORDER BY c.n DESC")) == [f"o{i}" for i in range(5, -1, -1)]
    assert run("SELECT TOP 2 VALUE c.id FROM c ORDER BY c.n") == ["o0", "o1"]
    assert run("SELECT c.id, c.n AS x FROM c ORDER BY c.n OFFSET 4 LIMIT 5") == [
        {"id": "o4", "x": 4},
        {"id": "o5", "x": 5},
    ]
    assert run("SELECT DISTINCT VALUE c.tag FROM c ORDER BY c.tag DESC") == [1, 0]
    assert run("SELECT DISTINCT VALUE c.tag FROM c ORDER BY c.tag OFFSET 1 LIMIT 1") == [1]
    assert run(
        "SELECT VALUE AVG(c.n) FROM c WHERE c.tag = @t", parameters=[{"name": "@t", "value": 1}]
    ) == [3]
    assert run("SELECT VALUE COUNT(1) FROM c") == [6]
    # over no documents the SDK's merge of MAX yields None (the gateway itself answers [])
    assert run("SELECT VALUE MAX(c.n) FROM c WHERE c.n > 100") == [None]
    assert per_range == ["0"] * 8
    with pytest.raises(exceptions.CosmosHttpResponseError) as composed:
        run("SELECT VALUE COUNT(1) + 5 FROM c")
    assert composed.value.status_code == 400
    # one partition key: served as it is, no plan
    assert run("SELECT VALUE MAX(c.n) FROM c WHERE c.n > 100", partition_key="p0") == []
    assert run("SELECT * FROM c WHERE c.n = 1") and per_range == ["0"] * 8


@pytest.mark.parametrize(
    "query",
    [
        "SELECT TOP @top * FROM c",  # a TOP parameter that is not a non-negative integer
        "SELECT * FROM c ORDER BY c.n OFFSET 1",
        "SELECT VALUE MAX(c.n FROM c",
        "SELECT VALUE COUNT(1) + 5 FROM c",
        "SELECT c.n FROM c GROUP BY c.n",
    ],
)
def test_malformed_or_unsupported_cross_partition_queries_are_400(
    container: ContainerProxy, query: str
) -> None:
    container.create_item(doc("m", "p1", n=1))
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        list(
            container.query_items(
                query,
                parameters=[{"name": "@top", "value": "ten"}],
                enable_cross_partition_query=True,
            )
        )
    assert refused.value.status_code == 400


def test_cross_partition_aggregates_need_value(container: ContainerProxy) -> None:
    container.create_item(doc("a1", "p1"))
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        list(container.query_items("SELECT COUNT(1) FROM c", enable_cross_partition_query=True))
    assert refused.value.status_code == 400
    counted = container.query_items(
        "SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True
    )
    assert list(cast(Any, counted)) == [1]


def test_query_paging_with_continuation_token(container: ContainerProxy) -> None:
    for i in range(7):
        container.create_item(doc(f"d{i}", "p1", n=i))
    query = "SELECT * FROM c ORDER BY c.n"
    pager = cast(
        PageIterator[dict[str, Any]],
        container.query_items(query, partition_key="p1", max_item_count=3).by_page(),
    )
    first = list(next(pager))
    assert ids(first) == ["d0", "d1", "d2"]
    token = pager.continuation_token
    assert token
    rest: list[str] = []
    for page in container.query_items(query, partition_key="p1", max_item_count=3).by_page(token):
        page_items = list(page)
        assert len(page_items) <= 3
        rest += ids(page_items)
    assert rest == ["d3", "d4", "d5", "d6"]


def test_cross_partition_query_paging_with_continuation_token(container: ContainerProxy) -> None:
    # the shape of the app's contact list: a filter, no ORDER BY (the gateway serves it;
    # with ORDER BY the SDK merges from a plan and, as against Azure, its page token skips
    # what it buffered: azure-sdk-for-python#37230)
    for i in range(7):
        container.create_item(doc(f"d{i}", f"p{i % 3}", n=i, type="contact"))
    container.create_item(doc("event", "p0", n=99, type="domainEvent"))
    query = "SELECT c.id, c.n FROM c WHERE c.type = 'contact'"
    seen: list[str] = []
    token: str | None = None
    for _ in range(10):
        pager = cast(
            PageIterator[dict[str, Any]],
            container.query_items(
                query, enable_cross_partition_query=True, max_item_count=3
            ).by_page(token),
        )
        page = list(next(pager, []))
        assert len(page) <= 3
        seen += ids(page)
        token = pager.continuation_token
        if not token:
            break
    assert sorted(seen) == [f"d{i}" for i in range(7)]


def test_document_over_2_mb_is_rejected(container: ContainerProxy) -> None:
    with pytest.raises(exceptions.CosmosHttpResponseError) as err:
        container.create_item(doc("big", "p1", blob="x" * (2 * 1024 * 1024 + 1)))
    assert err.value.status_code == 413


def test_throttled_requests_are_retried_by_the_sdk(
    cosmos: Target, database: DatabaseProxy, container: ContainerProxy
) -> None:
    if cosmos.local is None:
        pytest.skip("fault injection is a feature of the local endpoint")
    # the faults name the test's container: other tests use the endpoint at the same time
    local, db, coll = cosmos.local, database.id, container.id
    local.inject_fault(
        429, count=2, retry_after_ms=5, methods=["POST"], database=db, container=coll
    )
    assert container.create_item(doc("a", "p1"))["id"] == "a"
    local.inject_fault(429, count=100, retry_after_ms=1, database=db, container=coll)
    try:
        with pytest.raises(exceptions.CosmosHttpResponseError) as err:
            container.read_item("a", partition_key="p1")
        assert err.value.status_code == 429
    finally:
        local.clear_faults(database=db, container=coll)
    assert container.read_item("a", partition_key="p1")["id"] == "a"


def test_a_fault_for_a_database_or_a_container_is_taken_by_its_requests_only(
    cosmos: Target, database: DatabaseProxy, other_database: DatabaseProxy
) -> None:
    """Local only: a fault injected for a database (or one of its containers) fails only the
    requests on it; another database's (container's) pass and leave its count as it was; a
    scoped clear clears only that scope's faults."""
    if cosmos.local is None:
        pytest.skip("fault injection is a feature of the local endpoint")
    key = PartitionKey(path=PK_PATH)
    faulted = database.create_container(unique("f"), partition_key=key)
    beside = database.create_container(unique("b"), partition_key=key)
    elsewhere = other_database.create_container(unique("e"), partition_key=key)
    for proxy in (faulted, beside, elsewhere):
        proxy.create_item(doc("a", "p1"))

    def pending() -> list[dict[str, Any]]:
        faults: list[dict[str, Any]] = control(cosmos.endpoint, "GET", "_emulators/faults")[
            "faults"
        ]
        return [f for f in faults if f["database"] in (database.id, other_database.id)]

    local = cosmos.local
    local.inject_fault(503, count=50, database=other_database.id)
    local.inject_fault(503, count=50, database=database.id, container=faulted.id)
    try:
        assert beside.read_item("a", partition_key="p1")["id"] == "a"
        assert [(f["container"], f["count"]) for f in pending()] == [(None, 50), (faulted.id, 50)]
        with pytest.raises(exceptions.CosmosHttpResponseError) as err:
            faulted.read_item("a", partition_key="p1")
        assert err.value.status_code == 503
        [database_fault, container_fault] = pending()  # the SDK tries a read again on a 503
        assert database_fault["count"] == 50 and 0 < container_fault["count"] < 50
        local.clear_faults(database=database.id, container=faulted.id)
        assert [f["database"] for f in pending()] == [other_database.id]
        assert faulted.read_item("a", partition_key="p1")["id"] == "a"
        with pytest.raises(exceptions.CosmosHttpResponseError) as err:
            elsewhere.read_item("a", partition_key="p1")
        assert err.value.status_code == 503
    finally:
        local.clear_faults(database=other_database.id)
        local.clear_faults(database=database.id, container=faulted.id)
    assert pending() == []
    assert elsewhere.read_item("a", partition_key="p1")["id"] == "a"


#: Text of every width JSON carries: ASCII, Latin-1 (kept by V8 at a byte a character),
#: beyond it (curly quotes, CJK: two bytes a character in V8), beyond the BMP (an emoji, a
#: surrogate pair), control characters, and a lone surrogate (valid JSON, escaped).
TEXTS = {
    "ascii": "plain",
    "latin1": "naïve café ÿ \u0080\u00a0",
    "wide": "\u2018quoted\u2019 \u65e5\u672c\u8a9e \u20ac",
    "astral": "\U0001f600 \U0001d11e",
    "control": "tab\tnew\nline\u0000nul \u001f \u007f",
    "lone": "\ud800 alone",
}


def test_text_of_every_width_round_trips_exactly(container: ContainerProxy) -> None:
    """A document's strings come back as written, by every way of writing and of reading
    (the endpoint keeps a document as its JSON: Latin-1 text as a string, anything else as its
    UTF-8 bytes): created, batched, patched; read, queried (also selected by a value beyond
    Latin-1, through the index), and in the change feed."""
    written = doc("texts", "p\u00e9", **TEXTS, nested={"keys": {"\u00e9\u2018\U0001f600": TEXTS}})
    container.create_item(written)
    latin = doc("latin-only", "p\u00e9", text=TEXTS["latin1"])
    container.execute_item_batch([("create", (latin,))], partition_key="p\u00e9")
    container.patch_item(
        "latin-only", "p\u00e9", [{"op": "add", "path": "/added", "value": TEXTS["astral"]}]
    )

    def mine(item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if not k.startswith("_")}

    assert mine(container.read_item("texts", "p\u00e9")) == written
    assert mine(container.read_item("latin-only", "p\u00e9")) == {
        **latin,
        "added": TEXTS["astral"],
    }
    found = list(
        container.query_items(
            "SELECT * FROM c WHERE c.wide = @wide",
            parameters=[{"name": "@wide", "value": TEXTS["wide"]}],
            enable_cross_partition_query=True,
        )
    )
    assert [mine(i) for i in found] == [written]
    values: list[Any] = list(
        container.query_items(
            "SELECT VALUE [c.ascii, c.latin1, c.wide, c.astral, c.control, c.lone] FROM c "
            "WHERE c.id = 'texts'",
            partition_key="p\u00e9",
        )
    )
    assert values == [list(TEXTS.values())]
    feed = {i["id"]: mine(i) for i in container.query_items_change_feed(start_time="Beginning")}
    assert feed["texts"] == written
    assert feed["latin-only"]["added"] == TEXTS["astral"]
