"""The all-versions-and-deletes change feed (`mode="AllVersionsAndDeletes"`, `A-IM:
Full-Fidelity Feed`) through the unmodified azure-cosmos SDK, as Azure serves it ("Change feed
modes in Azure Cosmos DB", Parse the response object): every create, replace and delete in the
order they were written, each with its metadata (`operationType`, `lsn`, `crts`,
`previousImageLSN`; a delete's `id`, `partitionKey` and `timeToLiveExpired`, an empty
`current`); a
time-to-live expiry as a delete; one transaction's changes at one LSN; only from "now" or a
continuation; nothing of a failed batch; across a split of a range."""

from __future__ import annotations

from typing import Any, Final

import pytest
from azure.cosmos import ContainerProxy, DatabaseProxy, PartitionKey
from azure.cosmos.exceptions import CosmosBatchOperationError

from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import wait_for

from .conftest import PK_PATH, doc, unique
from .test_cosmos_partitions import four_ranges, raw

pytestmark = [
    pytest.mark.integration,
    pytest.mark.conformance,
]

ALL: Final = "AllVersionsAndDeletes"


def handed(container: ContainerProxy) -> str:
    """The continuation the SDK hands out after a read (its last answer's etag: its own
    continuation, every range's etag in it)."""
    return str(container.client_connection.last_response_headers["etag"])


def now(container: ContainerProxy, **scope: Any) -> str:
    """The continuation of an all-versions read from now (nothing read yet)."""
    assert list(container.query_items_change_feed(mode=ALL, **scope)) == []
    return handed(container)


def since(container: ContainerProxy, token: str) -> tuple[list[dict[str, Any]], str]:
    """Every change after ``token``, and the continuation to go on from."""
    changes = list(container.query_items_change_feed(continuation=token))  # its mode: the token's
    return changes, handed(container)


def summary(change: dict[str, Any]) -> tuple[str, str]:
    metadata = change["metadata"]
    deleted = metadata["operationType"] == "delete"
    return str(metadata["operationType"]), str(
        metadata["id"] if deleted else change["current"]["id"]
    )


def test_creates_replaces_and_deletes_come_with_their_metadata(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    token = now(container)
    keyed = now(container, partition_key="p")
    container.create_item(doc("a", "p", n=1))
    container.upsert_item(doc("a", "p", n=2))
    container.patch_item("a", "p", [{"op": "set", "path": "/n", "value": 3}])
    container.create_item(doc("b", "q"))
    container.delete_item("b", partition_key="q")
    container.upsert_item(doc("c", "p"))
    container.execute_item_batch(
        [("create", (doc("d", "p"),)), ("delete", ("c",))], partition_key="p"
    )
    container.delete_item("a", partition_key="p")

    changes, _ = since(container, token)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for change in changes:
        metadata = change["metadata"]
        deleted = metadata["operationType"] == "delete"
        key = (
            metadata["partitionKey"]["partitionKey"]
            if deleted
            else change["current"]["partitionKey"]
        )
        by_key.setdefault(str(key), []).append(change)
    # each partition key's changes in the order they were written, every version of each
    assert [summary(c) for c in by_key["p"]] == [
        ("create", "a"),
        ("replace", "a"),
        ("replace", "a"),
        ("create", "c"),
        ("create", "d"),
        ("delete", "c"),
        ("delete", "a"),
    ]
    assert [summary(c) for c in by_key["q"]] == [("create", "b"), ("delete", "b")]
    p = by_key["p"]
    assert [c["current"]["n"] for c in p[:3]] == [1, 2, 3]
    lsns = [c["metadata"]["lsn"] for c in p]
    assert lsns == sorted(lsns) and lsns[4] == lsns[5]  # the batch: one transaction, one LSN
    assert "previousImageLSN" not in p[0]["metadata"]
    assert [c["metadata"]["previousImageLSN"] for c in p[1:3]] == lsns[:2]
    deleted = p[6]["metadata"]
    assert deleted == {
        "operationType": "delete",
        "lsn": lsns[6],
        "crts": deleted["crts"],
        "previousImageLSN": lsns[2],  # the version it deleted
        "id": "a",
        "partitionKey": {"partitionKey": "p"},
        "timeToLiveExpired": False,
    }
    assert p[6]["current"] == {} and "previous" not in p[6]  # an empty current, no previous
    assert all(isinstance(c["metadata"]["crts"], int) for c in changes)
    assert "_lsn" not in p[0]["current"] and p[0]["current"]["_rid"]
    # a feed range of one partition key: its changes only
    assert [summary(c) for c in since(container, keyed)[0]] == [summary(c) for c in p]


def test_a_time_to_live_expiry_reaches_the_feed_as_a_delete(
    local: CosmosEndpoint, container: ContainerProxy
) -> None:
    token = now(container)
    container.create_item({**doc("short", "p"), "ttl": 1})
    changes: list[dict[str, Any]] = []

    def expired() -> bool:
        found, _ = since(container, token)
        changes[:] = found
        return len(found) == 2

    wait_for(expired, "the expiry of 'short' (its 1 s time to live) in the feed")
    assert [summary(c) for c in changes] == [("create", "short"), ("delete", "short")]
    assert changes[1]["metadata"]["timeToLiveExpired"] is True
    assert changes[1]["metadata"]["previousImageLSN"] == changes[0]["metadata"]["lsn"]


def test_it_starts_from_now_or_a_continuation_only(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = database.create_container(unique("c"), partition_key=PartitionKey(path=PK_PATH))
    for i in range(3):
        container.create_item(doc(f"x{i}", "p"))
    path = f"dbs/{database.id}/colls/{container.id}/docs"
    feed = {
        "A-IM": "Full-Fidelity Feed",
        "x-ms-cosmos-changefeed-wire-format-version": "2021-09-15",
    }
    # from the beginning or a time: refused, as the service refuses them
    assert raw(local.endpoint, "GET", path, feed)[0] == 400
    at = {"If-Modified-Since": "Thu, 01 Jan 2026 00:00:00 GMT"}
    assert raw(local.endpoint, "GET", path, {**feed, **at})[0] == 400
    # now: nothing, and the range's LSN as the etag
    status, _, headers = raw(local.endpoint, "GET", path, {**feed, "If-None-Match": "*"})
    assert (status, headers["etag"]) == (304, '"3"')
    # a continuation from before the changes were kept: refused, as one past the retention
    status, body, _ = raw(local.endpoint, "GET", path, {**feed, "If-None-Match": '"1"'})
    assert status == 400 and "LSN 1" in body["message"]
    # the latest-version feed reads from there as ever
    latest = {"A-IM": "Incremental feed", "If-None-Match": '"1"'}
    status, body, _ = raw(local.endpoint, "GET", path, latest)
    assert status == 200 and [d["id"] for d in body["Documents"]] == ["x1", "x2"]


def test_a_failed_batch_leaves_nothing_in_the_feed(
    local: CosmosEndpoint, container: ContainerProxy
) -> None:
    container.create_item(doc("taken", "p"))
    token = now(container)
    with pytest.raises(CosmosBatchOperationError):
        container.execute_item_batch(
            [("create", (doc("new", "p"),)), ("create", (doc("taken", "p"),))], partition_key="p"
        )
    container.create_item(doc("later", "p"))
    changes, _ = since(container, token)
    assert [summary(c) for c in changes] == [("create", "later")]


def test_a_continuation_reads_on_across_a_split(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    keys = [f"key-{i}" for i in range(12)]
    for key in keys:
        container.create_item(doc(f"{key}-a", key))
    token = now(container)
    for key in keys:
        container.upsert_item(doc(f"{key}-a", key, n=1))
    before, token = since(container, token)
    local.split(database.id, container.id, None)
    for key in keys:
        container.delete_item(f"{key}-a", partition_key=key)
    after, _ = since(container, token)
    assert sorted(summary(c) for c in before) == sorted(("replace", f"{k}-a") for k in keys)
    assert sorted(summary(c) for c in after) == sorted(("delete", f"{k}-a") for k in keys)
