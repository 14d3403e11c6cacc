"""A lease moved by balancing is handed over, never taken from under its owner
(``_handover``): the request written into the lease without touching .NET's fields, seen by
the owner at its next write, honoured by a release to the instance that asked -- the batch in
flight handled and checkpointed first, in both processors; .NET's updates drop the request."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any, cast

import pytest
from deadlines import SHORT, wait_for
from inprocess import Delivered, fleet, write

from cosmos_changefeed import InMemoryLeaseStore, Lease, LeaseContext, LeaseLostError
from cosmos_changefeed._drive import drive
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._leases import format_time
from cosmos_changefeed._protocol import Flow, LeaseManager
from cosmos_changefeed._ranges import EpkRange
from cosmos_changefeed._splits import ChildLease
from cosmos_changefeed.testing import InMemoryFeed

NO_READER = cast(CosmosFeedSource, None)
T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
#: While a batch is in flight: the newcomer's balancing rounds and the owner's renewals of the
#: lease asked for that go by before the test looks whether the lease moved.
ROUNDS, RENEWALS = 20, 5


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def pass_(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def manager(name: str, clock: Clock) -> LeaseManager:
    return LeaseManager("proc", name, partition_key_path="/id", mode="LatestVersion", clock=clock)


def run(store: InMemoryLeaseStore, flow: Flow) -> Any:
    return drive(flow, store, NO_READER, lambda _s: None)


def owned_by_a() -> tuple[InMemoryLeaseStore, Clock, Lease]:
    store, clock = InMemoryLeaseStore(), Clock()
    made = run(store, manager("a", clock).create_lease(ChildLease(EpkRange.full(), "0"), None))
    return store, clock, run(store, manager("a", clock).acquire(made))


def stored(store: InMemoryLeaseStore) -> dict[str, Any]:
    return store.read("proc..0", "proc..0") or {}


def test_a_request_writes_the_request_alone() -> None:
    """Owner and timestamp stay: the request neither takes the lease nor delays its expiry."""
    store, clock, _mine = owned_by_a()
    before = stored(store)
    clock.pass_(5)
    run(store, manager("b", clock).request(Lease.from_document(before)))
    after = stored(store)
    assert after["handOver"] == {"to": "b", "requested": format_time(clock.now)}
    drop = ("handOver", "_etag", "_ts")
    assert {k: v for k, v in after.items() if k not in drop} == {
        k: v for k, v in before.items() if k not in drop
    }


def test_the_owner_sees_the_request_at_its_next_write_and_keeps_it() -> None:
    """The request changed the etag: the owner's renewal is refused (412), reads the lease
    again and renews that -- the request kept, now in the owner's hands."""
    store, clock, mine = owned_by_a()
    run(store, manager("b", clock).request(Lease.from_document(stored(store))))
    renewed = run(store, manager("a", clock).renew(mine))
    assert renewed.hand_over is not None and renewed.hand_over.to == "b"
    assert renewed.owner == "a" and stored(store)["handOver"]["to"] == "b"


def test_a_release_hands_the_lease_to_the_instance_that_asked_with_its_checkpoint() -> None:
    store, clock, mine = owned_by_a()
    run(store, manager("b", clock).request(Lease.from_document(stored(store))))
    released = run(store, manager("a", clock).release(mine, '"42"'))
    assert released.owner == "b" and released.hand_over is None
    assert stored(store)["ContinuationToken"] == '"42"' and stored(store)["handOver"] is None


def test_a_release_without_a_live_request_clears_the_owner() -> None:
    store, clock, mine = owned_by_a()
    run(store, manager("b", clock).request(Lease.from_document(stored(store))))
    clock.pass_(61)  # the request is older than the expiration interval: void
    assert run(store, manager("a", clock).release(mine)).owner is None


def test_a_second_instance_cannot_ask_for_a_lease_asked_for() -> None:
    store, clock, _ = owned_by_a()
    listed = Lease.from_document(stored(store))
    run(store, manager("b", clock).request(listed))
    with pytest.raises(LeaseLostError, match="already asked for by 'b'"):
        run(store, manager("c", clock).request(listed))


def test_acquiring_a_lease_clears_its_request() -> None:
    store, clock, _ = owned_by_a()
    run(store, manager("b", clock).request(Lease.from_document(stored(store))))
    clock.pass_(61)  # a is gone: the lease expired
    taken = run(store, manager("c", clock).acquire(Lease.from_document(stored(store))))
    assert taken.owner == "c" and taken.hand_over is None


def test_dotnets_update_drops_the_request_and_the_mark() -> None:
    """.NET writes only its fields: a lease it renews has no ``handOver`` -- it does not hand
    over (``Lease.hands_over`` False), so an instance under its share takes from it."""
    store, clock, mine = owned_by_a()
    run(store, manager("b", clock).request(Lease.from_document(stored(store))))
    dotnet = manager("a", clock)
    dotnet.hands_over = False
    renewed = run(store, dotnet.renew(mine))
    assert "handOver" not in stored(store)
    assert not renewed.hands_over and renewed.hand_over is None


def test_a_lease_listed_expired_but_renewed_since_is_not_taken() -> None:
    """An owner late with its renewal (throttled) renews it after another instance listed it
    as expired: the acquisition, refused on the etag, reads it again and finds it renewed."""
    store, clock, mine = owned_by_a()
    clock.pass_(61)
    listed = Lease.from_document(stored(store))  # expired, as listed
    run(store, manager("a", clock).renew(mine))
    with pytest.raises(LeaseLostError, match="renewed by 'a' since"):
        run(store, manager("c", clock).acquire(listed))
    assert stored(store)["Owner"] == "a"


# -- a move hands the batch in flight over -----------------------------------------------------


def test_a_joining_instance_gets_a_lease_only_after_its_batch_in_flight_is_checkpointed() -> None:
    """Two leases, their owner inside a batch of each (its handler held); a second instance
    joins and asks for one. It does not get it while the owner's batch is in flight; once the
    handler returns, the owner checkpoints the batch and hands the lease over, and the newcomer
    reads on from that checkpoint: no change given twice, never two instances inside one
    lease's handler. (The aio processor, in virtual time: tests/test_scale.py.)

    The leases expire only after ``SHORT`` (not ``FAST``'s 0.6 s): only an expiry lets a lease
    move without its hand-over, and an owner's renewal late by more than 0.6 s on a loaded
    machine is an expiry -- the move it let happen is no defect. So a move seen while the
    batch is in flight is a hand-over broken, whatever the machine's speed; and the wait in
    flight is counted in the newcomer's rounds and the owner's renewals, not in seconds."""
    feed, held = InMemoryFeed(2), threading.Event()
    inside: dict[str, set[str]] = {"0": set(), "1": set()}
    overlaps: list[tuple[str, set[str]]] = []
    lock = threading.Lock()
    delivered = Delivered()

    def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        token, me = context.lease_token, context.instance_name
        with lock:
            if inside[token] - {me}:
                overlaps.append((token, set(inside[token])))
            inside[token].add(me)
        if me == "first":
            held.wait(SHORT)
        with lock:
            inside[token].discard(me)
        delivered(context, changes)

    slow_expiry = {"lease_expiration_interval": SHORT}
    with fleet("sync", feed) as f:
        try:
            first = f.processor("first", handle, **slow_expiry).start()
            first.wait_until_listening()
            wait_for(lambda: first.owned_leases == ["0", "1"], "the first instance takes both")
            before = write(feed, keys=20, per_key=2)
            wait_for(lambda: inside["0"] | inside["1"], "a batch in flight")
            second = f.processor("second", handle, **slow_expiry).start()
            second.wait_until_listening()
            asked = wait_for(
                lambda: [
                    t
                    for t, x in f.stored().items()
                    if x.hand_over is not None or x.owner != "first"
                ],
                "the newcomer asks for a lease",
            )[0]
            # rounds and renewals go by, however long they take on this machine
            rounds, renewals = second.processor._rounds, {f.stored()[asked].last_updated}

            def gone_by() -> bool:
                renewals.add(f.stored()[asked].last_updated)
                return second.processor._rounds >= rounds + ROUNDS and len(renewals) > RENEWALS

            wait_for(gone_by, f"{ROUNDS} rounds of the newcomer's, {RENEWALS} renewals", SHORT)
            assert second.owned_leases == [], "the lease moved while its batch was in flight"
            assert f.owner(asked) == "first", "the lease moved while its batch was in flight"
        finally:
            held.set()  # a failure above leaves no handler waiting (nor its lease's thread)
        wait_for(
            lambda: len(first.owned_leases) == 1 and len(second.owned_leases) == 1,
            "the lease handed over once its batch was checkpointed",
        )
        after = write(feed, keys=20, per_key=2, start=2)
        wait_for(lambda: delivered.ids >= set(before) | set(after), "every change delivered")
    assert overlaps == [], "two instances inside one lease's handler"
    twice = sorted(doc for doc in delivered.ids if delivered.count(doc) > 1)
    assert twice == [], f"given twice by the move: {twice}"
    delivered.assert_in_order_per_partition_key()
