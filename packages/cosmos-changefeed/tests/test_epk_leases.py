"""EPK (version-1) leases, which .NET writes only after a merge and for the children of such a
lease: funcstack's endpoint never merges, so the store is given the leases .NET leaves after
one (``PartitionSynchronizerCore.HandlePartitionGoneAsync``: a version-0 lease whose range merged
becomes an EPK lease over its own range, from its continuation), over a partition that holds
more than each lease's range. The processor reads each from its etag, scoped to its range, and
when the partition splits under a lease the lease is replaced by EPK children that tile it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import ContainerProxy
from deadlines import LOOPBACK, SHORT

from cosmos_changefeed import ChangeFeedProcessor, Lease, LeaseContext, lease_prefix
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._ranges import EpkRange

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]
MID = "10000000000000000000000000000000"


def epk_of(container: ContainerProxy, pk: str) -> str:
    return str(container.feed_range_from_partition_key(pk)["Range"]["min"])


def test_epk_leases_left_by_a_merge_are_read_in_their_range_and_split_into_epk_children(
    cosmos: CosmosEndpoint, make_container: MakeContainer
) -> None:
    monitored, leases = make_container(2), make_container(path="/id")
    database = monitored.container_link.split("/")[1]
    reader = CosmosFeedSource(monitored)
    first, second = reader.ranges()
    prefix = lease_prefix("merged", reader.account_endpoint, reader.container_rid())
    monitored.create_item({"id": "before", "pk": "before"})
    # each range's own "now" (each physical partition has its own LSNs)
    etag, etag_second = (
        reader.read(Lease(id="x", lease_token=r.id, feed_range=r.range), None, "Now").etag
        for r in (first, second)
    )
    assert etag and etag_second
    # what .NET leaves when ranges [min, MID) and [MID, max) of the first partition merged into it
    halves = [EpkRange(first.range.min, MID), EpkRange(MID, first.range.max)]
    for half in halves:
        leases.create_item(
            {
                "id": f"{prefix}..{half.token}",
                "version": 1,
                "LeaseToken": half.token,
                "FeedRange": half.to_lease_json(),
                "Owner": None,
                "ContinuationToken": etag,
                "properties": {"from": "merge"},
                "Mode": "Incremental Feed",
                "timestamp": None,
            }
        )
    leases.create_item(
        {
            "id": f"{prefix}..{second.id}",
            "version": 0,
            "LeaseToken": second.id,
            "FeedRange": second.range.to_lease_json(),
            "Owner": None,
            "ContinuationToken": etag_second,
            "properties": {},
            "timestamp": None,
            "Mode": "Incremental Feed",
        }
    )
    leases.create_item({"id": f"{prefix}.info"})

    delivered: list[tuple[str, dict[str, Any]]] = []

    def handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        delivered.extend((context.lease_token, doc) for doc in changes)

    def written(count: int, start: int = 0) -> set[str]:
        ids = set()
        for i in range(start, start + count):
            monitored.create_item({"id": f"d{i}", "pk": f"d{i}"})
            ids.add(f"d{i}")
        return ids

    def wait(ids: set[str]) -> None:
        deadline = time.monotonic() + SHORT
        while not {doc["id"] for _, doc in delivered} >= ids:
            assert time.monotonic() < deadline
            time.sleep(0.05)

    with ChangeFeedProcessor(
        monitored,
        leases,
        processor_name="merged",
        instance_name="one",
        handler=handler,
        poll_delay=0.1,
        lease_acquire_interval=0.3,
    ) as processor:
        processor.wait_until_listening(LOOPBACK)
        first_batch = written(40)
        wait(first_batch)
        ranges = {
            lease.lease_token: lease.feed_range
            for lease in map(Lease.from_document, leases.read_all_items())
            if lease.feed_range
        }
        for token, doc in delivered:
            assert ranges[token] is not None
            epk = epk_of(monitored, doc["pk"])
            assert ranges[token].min <= epk < ranges[token].max, (
                f"{doc['id']} read by lease {token}"
            )
        assert {token for token, _ in delivered} == {halves[0].token, halves[1].token, second.id}
        children = cosmos.split(database, monitored.id, first.id)
        split_at = next(
            p.min_inclusive
            for p in cosmos.physical_partitions(database, monitored.id)
            if p.id == children[1]
        )
        spanning = next(h for h in halves if h.min < split_at < h.max)
        kept = next(h for h in halves if h is not spanning)
        tiles = [EpkRange(spanning.min, split_at), EpkRange(split_at, spanning.max)]
        second_batch = written(40, start=40)
        wait(second_batch)
        deadline = time.monotonic() + SHORT
        while set(processor.owned_leases) != {kept.token, second.id, *(t.token for t in tiles)}:
            assert time.monotonic() < deadline, processor.owned_leases
            time.sleep(0.05)
    assert "before" not in {doc["id"] for _, doc in delivered}
    stored = {
        lease.lease_token: lease
        for lease in map(Lease.from_document, leases.read_all_items())
        if lease.lease_token
    }
    assert spanning.token not in stored, "the lease over the split point stayed"
    for tile in tiles:
        child = stored[tile.token]
        assert child.version == 1 and child.feed_range == tile
        assert child.properties == {"from": "merge"} and child.continuation
    assert stored[kept.token].version == 1  # within one partition: "redirected", it stays
    assert stored[second.id].version == 0
    everything = first_batch | second_batch
    assert {doc["id"] for _, doc in delivered} >= everything
