"""Merges of physical partitions, through the unmodified azure-cosmos SDK, as Azure's partition
merge shows them to a client ("Merge partitions in Azure Cosmos DB", learn.microsoft.com; the
SDK's FeedRangeCompositeContinuation "merge" branch): adjacent ranges replaced by one that
lists them in `parents`; a request naming a merged range answers 410 with sub-status 1002; the
SDK reads on in the merged range, scoped by EPK to the range it had, from the continuation it
held (latest version and all versions and deletes): nothing lost, nothing repeated; the merged
range's LSNs go on from the highest of its parents'; queries and point operations find every
document. Merges are local-only calls (Azure merges through its control plane)."""

from __future__ import annotations

from typing import Any

import pytest
from azure.cosmos import ContainerProxy, DatabaseProxy

from funcstack.cosmos import CosmosControlError, CosmosEndpoint

from .conftest import doc
from .test_cosmos_all_versions import ALL, handed
from .test_cosmos_lsns import token_lsn
from .test_cosmos_partitions import four_ranges, pkranges, ranges, raw, read_change_feed, write

pytestmark = [
    pytest.mark.integration,
    pytest.mark.conformance,
]

KEYS = [f"key-{i}" for i in range(16)]


def all_versions_since(container: ContainerProxy, token: str) -> list[dict[str, Any]]:
    return list(container.query_items_change_feed(continuation=token))  # its mode: the token's


def test_the_sdk_reads_on_across_a_merge_with_nothing_lost_or_repeated(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    path = f"dbs/{database.id}/colls/{container.id}"
    holder = {key: write(container, key, 0) for key in KEYS}
    busy = next(key for key in KEYS if holder[key] == "2")
    for extra in range(5):  # range 2 ahead of range 1: the merged range goes on from 2's LSN
        container.upsert_item(doc(f"{busy}-0000", busy, seq=0, extra=extra))
    assert list(container.query_items_change_feed(mode=ALL)) == []
    everything = handed(container)
    _, _, routing_etag = pkranges(local.endpoint, path)
    seen, token = read_change_feed(container, None)
    assert len(seen) == len(KEYS)
    lsn_before = {r: sum(1 for k in KEYS if holder[k] == r) for r in set(holder.values())}
    lsn_before["2"] += 5

    merged = local.merge(database.id, container.id, ["1", "2"])
    assert merged == "4"
    # the routing map's incremental read: the merged range, naming both in its parents
    status, body, _ = pkranges(local.endpoint, path, routing_etag)
    assert status == 200
    [new] = body["PartitionKeyRanges"]
    assert new["id"] == "4" and new["parents"] == ["1", "2"]
    # a request naming a merged range: 410 / 1002, naming what replaced it
    status, body, headers = raw(
        local.endpoint,
        "GET",
        f"{path}/docs",
        {"A-IM": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": "1"},
    )
    assert (status, headers["x-ms-substatus"]) == (410, "1002") and "merged into 4" in body[
        "message"
    ]
    assert len(ranges(container)) == 3

    for key in KEYS:
        landed = write(container, key, 1)
        assert landed == (merged if holder[key] in ("1", "2") else holder[key])
        if landed == merged:  # its LSNs go on from the highest of its parents'
            assert token_lsn(container)[1] > max(lsn_before["1"], lsn_before["2"])
    container.delete_item(f"{KEYS[0]}-0000", partition_key=KEYS[0])

    items, _ = read_change_feed(container, token)
    assert sorted(i["id"] for i in items) == sorted(f"{k}-0001" for k in KEYS)
    versions = all_versions_since(container, everything)
    created = sorted(
        c["current"]["id"] for c in versions if c["metadata"]["operationType"] == "create"
    )
    assert created == sorted(f"{k}-0001" for k in KEYS)
    deleted = [c["metadata"]["id"] for c in versions if c["metadata"]["operationType"] == "delete"]
    assert deleted == [f"{KEYS[0]}-0000"]
    # every document found by a query across the ranges and by its key
    query = "SELECT VALUE c.id FROM c"
    found = [str(i) for i in container.query_items(query, enable_cross_partition_query=True)]
    assert sorted(found) == sorted([f"{k}-0001" for k in KEYS] + [f"{k}-0000" for k in KEYS[1:]])
    for key in KEYS:
        assert container.read_item(f"{key}-0001", partition_key=key)["partitionKey"] == key


def test_only_adjacent_live_ranges_merge(local: CosmosEndpoint, database: DatabaseProxy) -> None:
    container = four_ranges(database)
    for key in KEYS:
        container.create_item(doc(f"{key}-0", key))
    with pytest.raises(CosmosControlError, match="not adjacent"):
        local.merge(database.id, container.id, ["0", "2"])
    with pytest.raises(CosmosControlError, match="No live partition key range '9'"):
        local.merge(database.id, container.id, ["0", "9"])
    merged = local.merge(database.id, container.id, None)  # the two holding the fewest
    live = local.physical_partitions(database.id, container.id)
    assert len(live) == 3 and merged in {p.id for p in live}
    assert sum(p.documents for p in live) == len(KEYS)
    whole = local.merge(database.id, container.id, [p.id for p in live])
    [one] = local.physical_partitions(database.id, container.id)
    assert one.id == whole and (one.min_inclusive, one.max_exclusive) == ("", "FF")
    assert sorted(one.parents)[:4] == ["0", "1", "2", "3"]
    with pytest.raises(CosmosControlError, match="one physical partition"):
        local.merge(database.id, container.id, None)
