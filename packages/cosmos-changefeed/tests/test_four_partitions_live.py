"""The processor and the estimator live on funcstack's Cosmos DB endpoint with 4 physical
partitions, in Azure's shape (two instances of one processor, the unmodified SDK), where the
endpoint behaves as Azure does for them:

* an LSN per physical partition: with K changes pending and the processors stopped, the
  estimator's lag sums to K and each lease's is its own range's pending changes (with one LSN
  for the whole account, as funcstack had, it read 3-4x K);
* the all-versions-and-deletes feed: a delete reaches the handler as a delete (its id, its
  partition key, whether a time to live expired), after the versions before it;
* a merge of physical partitions: the leases of the merged ranges become EPK leases (.NET's
  version 1, over each old range) and every change written before, during and after the merge
  is delivered, in order per partition key, a change given twice only where its lease was
  taken over.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import ContainerProxy

from cosmos_changefeed import (
    ChangeFeedEstimator,
    ChangeFeedProcessor,
    Lease,
    LeaseContext,
    Mode,
    StartFrom,
)
from cosmos_changefeed._ranges import EpkRange

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]
RANGE_HEADER = "x-ms-documentdb-partitionkeyrangeid"
#: Short enough for seconds-long tests, long enough that no lease expires under load.
INTERVALS: dict[str, float] = {
    "poll_delay": 0.1,
    "lease_acquire_interval": 0.3,
    "lease_renew_interval": 1.0,
    "lease_expiration_interval": 20.0,
}


class Deliveries:
    """What the handlers of every instance were given, with the instance and the lease."""

    def __init__(self) -> None:
        self.given: list[tuple[str, str, dict[str, Any]]] = []
        self.acquired: list[tuple[float, str, str]] = []  # (when, instance, lease token)

    def handler(self, instance: str) -> Callable[[LeaseContext, list[dict[str, Any]]], None]:
        def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
            self.given.extend((instance, context.lease_token, change) for change in changes)

        return handle

    def on_acquired(self, instance: str) -> Callable[[str], None]:
        return lambda token: self.acquired.append((time.monotonic(), instance, token))


def wait_for(condition: Callable[[], bool], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def database_of(container: ContainerProxy) -> str:
    return container.container_link.split("/")[1]


@contextmanager
def instances(
    monitored: ContainerProxy,
    leases: ContainerProxy,
    deliveries: Deliveries,
    *,
    start_from: StartFrom = "beginning",
    mode: Mode = "LatestVersion",
) -> Iterator[list[ChangeFeedProcessor]]:
    """Two instances of one processor, listening, each holding two of the four leases."""
    with ExitStack() as stack:
        started = [
            stack.enter_context(
                ChangeFeedProcessor(
                    monitored,
                    leases,
                    processor_name="live",
                    instance_name=name,
                    handler=deliveries.handler(name),
                    start_from=start_from,
                    mode=mode,
                    on_lease_acquired=deliveries.on_acquired(name),
                    **INTERVALS,  # type: ignore[arg-type]
                )
            )
            for name in ("a", "b")
        ]
        for processor in started:
            processor.wait_until_listening(timeout=60)
        wait_for(lambda: sorted(len(p.owned_leases) for p in started) == [2, 2])
        for processor in started:
            processor.wait_until_listening(timeout=60)
        yield started


def create(container: ContainerProxy, doc_id: str, key: str, **fields: Any) -> str:
    """Create a document; the partition key range the endpoint says holds it (from its own
    answer: the processors' reads share the client)."""
    answered: dict[str, str] = {}
    container.create_item(
        {"id": doc_id, "pk": key, **fields},
        response_hook=lambda headers, _: answered.update(headers),
    )
    return answered[RANGE_HEADER]


def test_with_k_changes_pending_the_estimator_reads_k_and_each_lease_its_own(
    make_container: MakeContainer,
) -> None:
    monitored, leases = make_container(4), make_container(path="/id", ttl=True)
    deliveries = Deliveries()
    with instances(monitored, leases, deliveries):
        for i in range(40):
            create(monitored, f"seen-{i}", f"k{i}")
        wait_for(lambda: len({c["id"] for _, _, c in deliveries.given}) == 40)
        estimator = ChangeFeedEstimator(monitored, leases, processor_name="live")
        wait_for(lambda: estimator.estimated_lag() == 0)  # each batch checkpointed
    k = 37
    pending = Counter(create(monitored, f"pending-{i}", f"k{i % 23}") for i in range(k))
    assert len(pending) == 4  # every partition has some

    states = estimator.get_estimates()
    assert sum(state.estimated_lag for state in states) == k
    assert {state.lease_token: state.estimated_lag for state in states} == pending
    assert all(state.instance_name is None for state in states)  # stopped: released
    for found in estimator.get_pending(max_changes=100):
        assert found.complete and len(found.changes) == pending[found.lease_token]
        assert found.estimated_lag == len(found.changes)


def test_a_delete_reaches_an_all_versions_and_deletes_handler_as_a_delete(
    make_container: MakeContainer,
) -> None:
    monitored, leases = make_container(4, ttl=True), make_container(path="/id", ttl=True)
    deliveries = Deliveries()
    keys = [f"k{i}" for i in range(8)]
    with instances(monitored, leases, deliveries, start_from="now", mode="AllVersionsAndDeletes"):
        for key in keys:
            create(monitored, f"{key}-doc", key, n=0)
            monitored.upsert_item({"id": f"{key}-doc", "pk": key, "n": 1})
            monitored.delete_item(f"{key}-doc", partition_key=key)
        create(monitored, "short-lived", "k0", ttl=1)
        wait_for(lambda: len(deliveries.given) == 3 * len(keys) + 2)

    per_key: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for _, _, change in deliveries.given:
        metadata = change["metadata"]
        if metadata["operationType"] == "delete":
            key = metadata["partitionKey"]["pk"]
            per_key[key].append(("delete", (metadata["id"], metadata["timeToLiveExpired"])))
            assert change["current"] == {}  # as the service gives it
        else:
            key = change["current"]["pk"]
            per_key[key].append((metadata["operationType"], change["current"]["id"]))
    for key in keys:
        versions = [("create", f"{key}-doc"), ("replace", f"{key}-doc")]
        deleted = ("delete", (f"{key}-doc", False))
        expected = [*versions, deleted]
        if key == "k0":
            expected += [("create", "short-lived"), ("delete", ("short-lived", True))]
        assert per_key[key] == expected


def test_a_merge_leaves_epk_leases_and_loses_nothing(
    cosmos: CosmosEndpoint, make_container: MakeContainer
) -> None:
    monitored, leases = make_container(4), make_container(path="/id", ttl=True)
    database = database_of(monitored)
    spans = {
        p.id: EpkRange(p.min_inclusive, p.max_exclusive)
        for p in cosmos.physical_partitions(database, monitored.id)
    }
    deliveries = Deliveries()
    keys = [f"k{i}" for i in range(16)]
    written: list[tuple[str, int]] = []

    def write(seqs: range) -> None:
        for seq in seqs:
            for key in keys:
                create(monitored, f"{key}-{seq}", key, seq=seq)
                written.append((key, seq))

    with instances(monitored, leases, deliveries):
        balanced = time.monotonic()
        write(range(0, 6))  # the processors read while the ranges merge
        merged = cosmos.merge(database, monitored.id, ["1", "2"])
        write(range(6, 12))
        wanted = {f"{key}-{seq}" for key, seq in written}
        wait_for(lambda: {c["id"] for _, _, c in deliveries.given} >= wanted)

    stored = {
        lease.lease_token: lease
        for lease in map(Lease.from_document, leases.read_all_items())
        if lease.lease_token
    }
    # the merged ranges' leases: EPK leases over each old range, as .NET leaves them
    epk = {token: lease for token, lease in stored.items() if lease.version == 1}
    assert sorted(lease.feed_range for lease in epk.values()) == [spans["1"], spans["2"]]  # type: ignore[type-var]
    assert all(lease.continuation for lease in epk.values())
    assert {t for t, lease in stored.items() if lease.version == 0} == {"0", "3"}
    assert merged not in stored  # no lease of the merged range's own: the EPK leases tile it

    # every change delivered, in order per partition key; twice only where a lease was taken over
    seen: dict[str, int] = defaultdict(lambda: -1)
    counts = Counter(change["id"] for _, _, change in deliveries.given)
    taken_over = {token for when, _, token in deliveries.acquired if when > balanced}
    for _, token, change in deliveries.given:
        key, seq = change["pk"], change["seq"]
        if seq > seen[key]:
            assert seq == seen[key] + 1, f"{key}: a gap before {seq}"
            seen[key] = seq
        if counts[change["id"]] > 1:
            assert token in taken_over, f"{change['id']} given twice by lease {token}"
    assert dict(seen) == dict.fromkeys(keys, 11)
