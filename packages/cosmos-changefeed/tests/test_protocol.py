"""The lease protocol's updates (``_protocol.LeaseManager``), driven against the in-memory store:
every update a replace on the etag last seen, .NET's retry on 412 on the lease read afresh, a
lost lease never overwritten, a release that leaves another owner's lease alone."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any, cast

import pytest

from cosmos_changefeed import InMemoryLeaseStore, Lease, LeaseLostError
from cosmos_changefeed._drive import drive
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._protocol import (
    RETRIES_ON_CONFLICT,
    Flow,
    LeaseManager,
    ListDocuments,
    ReadRanges,
    Sleep,
)
from cosmos_changefeed._ranges import EpkRange, PartitionKeyRange
from cosmos_changefeed._splits import ChildLease

NO_READER = cast(CosmosFeedSource, None)  # these flows never read the monitored container
T0 = dt.datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=dt.UTC)


def manager(name: str) -> LeaseManager:
    return LeaseManager(
        "proc", name, partition_key_path="/id", mode="LatestVersion", clock=lambda: T0
    )


def run(store: InMemoryLeaseStore, flow: Flow) -> Any:
    return drive(flow, store, NO_READER, lambda _s: None)


def new_lease(store: InMemoryLeaseStore) -> Lease:
    lease = run(store, manager("a").create_lease(ChildLease(EpkRange.full(), "0"), None))
    assert lease is not None
    return cast(Lease, lease)


def test_acquiring_stamps_the_owner_and_the_time_as_dotnet_writes_it() -> None:
    store = InMemoryLeaseStore()
    acquired = run(store, manager("a").acquire(new_lease(store)))
    stored = store.read("proc..0", "proc..0")
    assert stored is not None
    assert stored["Owner"] == "a" and stored["timestamp"] == "2026-01-01T12:00:00.5Z"
    assert acquired.etag == stored["_etag"]


def test_a_lease_taken_since_it_was_chosen_is_not_acquired() -> None:
    store = InMemoryLeaseStore()
    seen = new_lease(store)
    run(store, manager("b").acquire(seen))
    with pytest.raises(LeaseLostError, match="taken over by owner 'b'"):
        run(store, manager("a").acquire(seen))
    assert Lease.from_document(store.read("proc..0", "proc..0") or {}).owner == "b"


def test_a_checkpoint_after_another_instance_took_the_lease_is_refused() -> None:
    store = InMemoryLeaseStore()
    mine = run(store, manager("a").acquire(new_lease(store)))
    theirs = Lease.from_document(store.read("proc..0", "proc..0") or {})
    run(store, manager("b").acquire(theirs.evolve(owner="a")))
    with pytest.raises(LeaseLostError):
        run(store, manager("a").checkpoint(mine, '"42"'))
    assert (store.read("proc..0", "proc..0") or {})["ContinuationToken"] is None


def test_an_update_meeting_412_is_applied_again_to_the_lease_read_afresh() -> None:
    store = InMemoryLeaseStore()
    mine = run(store, manager("a").acquire(new_lease(store)))
    run(store, manager("a").renew(mine))  # the etag `mine` holds is stale now
    moved = run(store, manager("a").checkpoint(mine, '"7"'))
    assert moved.continuation == '"7"' and moved.owner == "a"


class AlwaysChanged(InMemoryLeaseStore):
    """A store where someone else writes the lease just before each of our replaces."""

    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        current = self.documents.read(str(document["id"]), partition_key)
        assert current is not None
        self.documents.replace(current, partition_key, None)
        self.attempts = getattr(self, "attempts", 0) + 1
        return super().replace(document, partition_key, etag)


def test_after_five_retries_on_412_the_lease_is_lost() -> None:
    store = AlwaysChanged()
    lease = new_lease(store)
    with pytest.raises(LeaseLostError, match="after 5 retries"):
        run(store, manager("a").acquire(lease))
    assert store.attempts == RETRIES_ON_CONFLICT + 1


def test_a_release_clears_the_owner_but_leaves_another_instances_lease_and_a_deleted_one() -> None:
    store = InMemoryLeaseStore()
    mine = run(store, manager("a").acquire(new_lease(store)))
    run(store, manager("a").release(mine))
    assert (store.read("proc..0", "proc..0") or {})["Owner"] is None
    taken = run(
        store, manager("b").acquire(Lease.from_document(store.read("proc..0", "proc..0") or {}))
    )
    with pytest.raises(LeaseLostError):
        run(store, manager("a").release(mine))
    assert (store.read("proc..0", "proc..0") or {})["Owner"] == "b"
    run(store, manager("b").delete(taken))
    run(store, manager("b").release(taken))  # gone: nothing to release


DOTNET_FIELDS = [
    "id",
    "version",
    "LeaseToken",
    "FeedRange",
    "Owner",
    "ContinuationToken",
    "properties",
    "timestamp",
    "Mode",
]


def test_an_updated_lease_keeps_the_fields_dotnet_keeps_and_drops_others() -> None:
    """.NET's fields in .NET's order, then this package's own (``handOver``: null, or a
    request to hand the lease over); anything else dropped, as .NET drops it. A manager that
    updates as .NET does (``hands_over = False``) writes .NET's fields alone."""
    store = InMemoryLeaseStore()
    lease = new_lease(store)
    doc = store.read(lease.id, lease.id) or {}
    store.replace({**doc, "extra": "not a lease field"}, lease.id, None)
    run(store, manager("a").acquire(Lease.from_document(store.read(lease.id, lease.id) or {})))
    stored = store.read(lease.id, lease.id) or {}
    assert "extra" not in stored  # .NET reads a lease into its class and writes that back
    assert [k for k in stored if not k.startswith("_")] == [*DOTNET_FIELDS, "handOver"]
    assert stored["handOver"] is None
    dotnet = manager("b")
    dotnet.hands_over = False
    run(store, dotnet.renew(Lease.from_document(stored).evolve(owner="b")))
    assert [k for k in store.read(lease.id, lease.id) or {} if not k.startswith("_")] == (
        DOTNET_FIELDS
    )


RANGES = [
    PartitionKeyRange("0", EpkRange("", "80")),
    PartitionKeyRange("1", EpkRange("80", "FF")),
]


def step(store: InMemoryLeaseStore, flow: Flow, on_sleep: Callable[[], None] = lambda: None) -> Any:
    """Drive ``flow`` by hand: the store's operations on ``store``, the ranges given, a sleep
    calling ``on_sleep`` (what another instance does meanwhile)."""
    result: Any = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as done:
            return done.value
        if isinstance(op, ReadRanges):
            result = RANGES
        elif isinstance(op, Sleep):
            on_sleep()
            result = None
        else:
            result = drive(_once(op), store, NO_READER, lambda _s: None)


def _once(op: Any) -> Flow:
    return (yield op)


def test_the_store_is_initialised_once_by_the_instance_holding_its_lock() -> None:
    store = InMemoryLeaseStore()
    one, two = manager("one"), manager("two")
    store.create({"id": "proc.lock", "ttl": 30}, "proc.lock")  # one holds the lock

    def one_finishes() -> None:
        store.delete("proc.lock", "proc.lock")
        assert step(store, one.initialize()) == 2  # creates the leases and .info

    assert step(store, two.initialize(), on_sleep=one_finishes) == 0
    ids = sorted(doc["id"] for doc in store.list_documents("proc"))
    assert ids == ["proc..0", "proc..1", "proc.info"]  # the lock deleted, no lease twice
    assert step(store, one.initialize()) == 0  # initialised: nothing more


def listings(store: InMemoryLeaseStore, flow: Flow) -> tuple[Any, list[str]]:
    """``step(store, flow)``, and the prefixes it listed, in order."""
    listed: list[str] = []
    result: Any = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as done:
            return done.value, listed
        if isinstance(op, ListDocuments):
            listed.append(op.prefix)
        result = RANGES if isinstance(op, ReadRanges) else step(store, _once(op))


def test_a_store_with_nothing_of_the_old_prefix_to_adopt_is_not_listed_again() -> None:
    """Nothing of 1.0's prefix to adopt: the store is as listed, not listed again before the
    leases are created."""
    store, one = InMemoryLeaseStore(), manager("one")
    created, listed = listings(store, one.initialize(adopt="old"))
    assert created == 2 and one.adopted == 0
    assert listed == ["proc..", "old.."]
    ids = sorted(doc["id"] for doc in store.list_documents("proc"))
    assert ids == ["proc..0", "proc..1", "proc.info"]


def test_a_store_with_leases_of_the_old_prefix_adopts_them_and_lists_the_store_again() -> None:
    store, one = InMemoryLeaseStore(), manager("one")
    old = LeaseManager("old", "a", partition_key_path="/id", mode="LatestVersion", clock=lambda: T0)
    assert run(store, old.create_lease(ChildLease(RANGES[0].range, "0"), "12")) is not None
    created, listed = listings(store, one.initialize(adopt="old"))
    assert one.adopted == 1 and created == 1  # range 1's lease; range 0's adopted
    assert listed == ["proc..", "old..", "proc.."]
    adopted = store.read("proc..0", "proc..0")
    assert adopted is not None and Lease.from_document(adopted).continuation == "12"
