"""The processor's behaviour, in-process on the in-memory feed and lease store, each scenario on
the sync and on the aio processor (``inprocess.Fleet``): every change delivered at least once
and in order per partition key; balancing, stealing and takeover after expiry; a checkpoint
after each batch the handler returned from, none for one it raised on; a failing handler
retried on its lease while the others flow; a stop that releases the leases; splits into
version-0 children, merges into EPK leases, and EPK leases split again; start positions; the
all-versions-and-deletes mode; and the estimator's lag equal to what is pending."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from deadlines import LOOPBACK, SHORT
from inprocess import FAST, FLAVOURS, STEADY, Delivered, Flavour, eventually, fleet, write

from cosmos_changefeed import (
    ChangeFeedEstimator,
    Continuation,
    Failure,
    InMemoryLeaseStore,
    LeaseContext,
    StartFrom,
)
from cosmos_changefeed.testing import InMemoryFeed, InMemoryFeedSource

pytestmark = pytest.mark.parametrize("flavour", FLAVOURS)


def test_two_instances_share_the_leases_deliver_every_change_and_checkpoint_it(
    flavour: Flavour,
) -> None:
    """Each lease's checkpoint, once both instances stopped, is where the last batch its owner
    was given ends (a lease moved in the 2/2 rebalance is handed over: its former owner's last
    batch checkpointed before the new owner reads; a lease stolen by .NET's balancing may be
    given once more by its former owner, uncheckpointed: the next test)."""
    feed = InMemoryFeed(4)
    with fleet(flavour, feed) as f:
        delivered = Delivered(owner_of=f.owner)
        members = [f.processor(f"i{n}", delivered, max_items=7).start() for n in range(2)]
        for member in members:
            member.wait_until_listening()
        ids = write(feed, keys=12, per_key=10)
        eventually(lambda: delivered.ids >= set(ids))
        eventually(
            lambda: (
                [len(m.owned_leases) for m in members] == [2, 2]
                and sorted(t for m in members for t in m.owned_leases) == ["0", "1", "2", "3"]
            )
        )
        for member in members:
            member.stop()
        stored = f.stored()
    delivered.assert_in_order_per_partition_key()
    assert all(len(changes) <= 7 for _, changes in delivered.batches)
    assert sorted(stored) == ["0", "1", "2", "3"]
    assert all(lease.owner is None for lease in stored.values()), "not released at the stop"
    positions = {token: lease.continuation for token, lease in stored.items()}
    assert positions == delivered.owners_positions()


def test_a_stolen_leases_former_owner_gives_its_batch_in_flight_but_cannot_checkpoint_it(
    flavour: Flavour,
) -> None:
    """The race a steal makes -- .NET's balancing's (the thief runs it: ``balancing="dotnet"``;
    this package's asks for a lease and has it handed over, ``tests/test_handover.py``): a
    lease is stolen while its owner waits between two reads; the thief gives the lease's
    changes and checkpoints them; the former owner, which learns of the steal only at its next
    renewal or checkpoint, reads once more from where it was and gives that batch -- after the
    thief's last (at least once) -- and its checkpoint is refused: the lease stays where the
    thief checkpointed it. Made deterministic: the former owner paused (``Frozen``: its reads
    and writes fail, as a process stalled under load) while the thief steals and drains the
    lease, and its renewal too rare to come before its next read."""
    feed, rare_renewal = (
        InMemoryFeed(2),
        {"lease_renew_interval": 30.0, "lease_expiration_interval": 60.0},
    )
    with fleet(flavour, feed) as f:
        delivered = Delivered(owner_of=f.owner)
        former = f.processor("former", delivered, max_items=7, **rare_renewal).start()
        former.wait_until_listening()
        eventually(lambda: former.owned_leases == ["0", "1"])
        # its first reads found the leases empty and kept their start in them (keep_start):
        # frozen before that write, it would learn of the steal from the write's retry and
        # give nothing more, never reaching the race this test is about
        eventually(lambda: all(p is not None for p in f.positions().values()))
        former.switch.freeze()
        thief = f.processor(
            "thief", delivered, max_items=7, balancing="dotnet", **rare_renewal
        ).start()
        thief.wait_until_listening()
        [token] = thief.owned_leases
        ids = write(feed, keys=12, per_key=5)
        end = f'"{feed.lsn(token)}"'
        assert feed.lsn(token) > 7, "the stolen lease needs more than one batch"
        eventually(lambda: f.positions()[token] == end)  # the thief gave it all and checkpointed
        former.switch.thaw()

        def formers() -> list[str | None]:
            return [
                c.continuation
                for c, _ in list(delivered.batches)
                if c.lease_token == token and c.instance_name == "former"
            ]

        # its checkpoint refused, it stops (its next batch is read, not given); were its
        # checkpoint taken, it would go on giving the lease's batches again
        eventually(lambda: token not in former.owned_leases or len(formers()) > 1)
        eventually(lambda: delivered.ids >= set(ids))
        positions = f.positions()
    delivered.assert_in_order_per_partition_key()
    assert formers() == ['"7"'], "the former owner went on after its batch in flight"
    # the last batch given on the lease is the former owner's, not the checkpoint (what the
    # test above asserted until this race broke it)
    assert delivered.last_positions()[token] == '"7"'
    assert positions[token] == end, "the former owner's checkpoint was not refused"
    assert delivered.owners_positions()[token] == end


def test_a_joining_instance_is_handed_its_share_and_nothing_is_lost(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(4), Delivered()
    with fleet(flavour, feed) as f:
        first = f.processor("first", delivered).start()
        first.wait_until_listening()
        eventually(lambda: len(first.owned_leases) == 4)
        before = write(feed, keys=10, per_key=3)
        second = f.processor("second", delivered).start()
        eventually(lambda: len(first.owned_leases) == 2 and len(second.owned_leases) == 2)
        after = write(feed, keys=10, per_key=3, start=3)
        eventually(lambda: delivered.ids >= set(before) | set(after))
    delivered.assert_in_order_per_partition_key()


def test_a_failing_handler_is_retried_on_its_lease_while_the_others_flow(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(2), Delivered()
    failures: list[str] = []
    errors: list[Failure] = []

    def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        if context.lease_token == "0" and len(failures) < 5:
            failures.append(context.lease_token)
            raise RuntimeError("the downstream is away")
        delivered(context, changes)

    with fleet(flavour, feed) as f:
        member = f.processor("only", handle, on_error=errors.append).start()
        member.wait_until_listening()
        ids = write(feed, keys=8, per_key=3)
        eventually(lambda: "1" in delivered.tokens())
        eventually(lambda: len(failures) >= 2)
        assert "0" not in delivered.tokens()
        # at most its start, kept when its first read found nothing: not past the failed batch
        assert f.stored()["0"].continuation in (None, '"0"'), "a failed batch was checkpointed"
        eventually(lambda: delivered.ids >= set(ids))
    assert len(failures) == 5
    assert [(e.lease_token, e.attempt) for e in errors] == [("0", n) for n in range(1, 6)]
    delivered.assert_in_order_per_partition_key()


def test_a_stop_releases_the_leases_and_another_instance_takes_them_before_expiry(
    flavour: Flavour,
) -> None:
    feed, delivered = InMemoryFeed(2), Delivered()
    slow = {"lease_expiration_interval": SHORT}  # taken within LOOPBACK: before expiry
    with fleet(flavour, feed) as f:
        first = f.processor("first", delivered, **slow).start()
        first.wait_until_listening()
        second = f.processor("second", delivered, **slow).start()
        eventually(lambda: len(first.owned_leases) == 1 and len(second.owned_leases) == 1)
        first.stop()
        # released: unowned, or already the second's (its acquire can come before this read)
        assert {lease.owner for lease in f.stored().values()} <= {"second", None}
        eventually(lambda: len(second.owned_leases) == 2, within=LOOPBACK)
        ids = write(feed, keys=6, per_key=2)
        eventually(lambda: delivered.ids >= set(ids))


def test_a_dead_instances_leases_are_taken_after_expiry_from_their_checkpoints(
    flavour: Flavour,
) -> None:
    feed, delivered = InMemoryFeed(3), Delivered()
    with fleet(flavour, feed) as f:
        doomed = f.processor("doomed", delivered).start()
        doomed.wait_until_listening()
        first = write(feed, keys=30, per_key=2)  # to every partition: each lease checkpoints
        eventually(lambda: delivered.ids >= set(first))
        eventually(lambda: delivered.last_positions() == f.positions())  # all checkpointed
        doomed.switch.freeze()  # its process is gone: no renewal, no release, no checkpoint
        # its last writes of its leases (not the freeze: a renewal late on a loaded machine
        # wrote one earlier): none is taken before it expires, however soon the heir comes
        last_written = {token: lease.last_updated for token, lease in f.stored().items()}
        acquired: dict[str, dt.datetime] = {}

        def came(token: str) -> None:
            acquired.setdefault(token, dt.datetime.now(dt.UTC))

        heir = f.processor("heir", delivered, on_lease_acquired=came).start()
        second = write(feed, keys=30, per_key=2, start=2)
        eventually(lambda: len(heir.owned_leases) == 3, within=SHORT)
        eventually(lambda: delivered.ids >= set(second), within=SHORT)
    expiration = dt.timedelta(seconds=FAST["lease_expiration_interval"])
    early = {t: acquired[t] - w for t, w in last_written.items() if acquired[t] - w < expiration}
    assert not early, f"taken before the leases expired: {early}"
    # the heir read on from the checkpoints: no change of the first round given twice
    assert all(delivered.count(item) == 1 for item in first)


def test_a_split_replaces_the_lease_by_version_0_children_that_start_where_it_was(
    flavour: Flavour,
) -> None:
    feed, delivered = InMemoryFeed(2), Delivered()
    with fleet(flavour, feed) as f:
        member = f.processor("only", delivered, max_items=5, **STEADY).start()
        member.wait_until_listening()
        before = write(feed, keys=10, per_key=3)
        eventually(lambda: delivered.ids >= set(before))
        children = feed.split("0")
        after = write(feed, keys=10, per_key=3, start=3)
        eventually(lambda: delivered.ids >= set(before) | set(after))
        eventually(lambda: member.owned_leases == sorted(["1", *children]))
        stored = f.stored()
    delivered.assert_in_order_per_partition_key()
    assert sorted(stored) == sorted(["1", *children])
    ranges = {r.id: r.range for r in feed.ranges()}
    for child in children:
        assert stored[child].version == 0 and stored[child].continuation
        assert stored[child].feed_range == ranges[child]
    assert all(delivered.count(item) == 1 for item in after), "given twice after the split"


def test_a_merge_turns_the_leases_into_epk_leases_and_loses_nothing(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(3), Delivered()
    with fleet(flavour, feed) as f:
        member = f.processor("only", delivered, max_items=4, **STEADY).start()
        member.wait_until_listening()
        before = write(feed, keys=12, per_key=2)
        eventually(lambda: delivered.ids >= set(before))
        old = {r.id: r.range for r in feed.ranges()}
        merged = feed.merge("0", "1")
        after = write(feed, keys=12, per_key=3, start=2)
        eventually(lambda: delivered.ids >= set(before) | set(after))
        epk_tokens = {old["0"].token, old["1"].token}
        eventually(lambda: set(member.owned_leases) == {*epk_tokens, "2"})
        stored = f.stored()
    delivered.assert_in_order_per_partition_key()
    assert merged not in stored, "a lease for the merged range: the EPK leases cover it"
    for token in epk_tokens:
        assert stored[token].version == 1 and stored[token].continuation
    assert {stored[t].feed_range for t in epk_tokens} == {old["0"], old["1"]}
    assert all(delivered.count(item) == 1 for item in after), "given twice after the merge"


def test_epk_leases_split_again_into_epk_children_that_tile_them(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(2), Delivered()
    with fleet(flavour, feed) as f:
        member = f.processor("only", delivered).start()
        member.wait_until_listening()
        old = {r.id: r.range for r in feed.ranges()}
        merged = feed.merge("0", "1")
        first = write(feed, keys=10, per_key=2)
        eventually(lambda: delivered.ids >= set(first))
        eventually(lambda: set(member.owned_leases) == {old["0"].token, old["1"].token})
        inside = old["0"].min + "08"  # in the first old range (its EPKs are 32 hex digits)
        low, high = feed.split(merged, at=inside.ljust(32, "0"))
        second = write(feed, keys=10, per_key=2, start=2)
        eventually(lambda: delivered.ids >= set(second))
        ranges = {r.id: r.range for r in feed.ranges()}
        cut = ranges[high].min
        eventually(lambda: len(member.owned_leases) == 3)
        stored = f.stored()
    delivered.assert_in_order_per_partition_key()
    spanning = next(rng for rng in old.values() if rng.min < cut < rng.max)
    tokens = {lease.feed_range for lease in stored.values()}
    assert spanning not in tokens, "the lease across the split stayed"
    assert all(lease.version == 1 for lease in stored.values())
    pieces = sorted(r for r in tokens if r is not None and spanning.min <= r.min < spanning.max)
    assert [(p.min, p.max) for p in pieces] == [(spanning.min, cut), (cut, spanning.max)]
    assert ranges[low].max == cut


def test_an_instance_whose_ranges_predate_a_split_takes_a_child_lease_as_it_is(
    flavour: Flavour,
) -> None:
    feed, delivered = InMemoryFeed(1), Delivered()
    with fleet(flavour, feed) as f:
        seeder = f.processor("seeder", delivered).start()
        seeder.wait_until_listening()
        stale = f.processor("stale", delivered)
        assert [r.id for r in stale.ranges()] == ["0"]  # its source's view, kept from now on
        children = feed.split("0")
        eventually(lambda: sorted(f.stored()) == sorted(children))
        seeder.stop()
        assert [r.id for r in stale.ranges()] == ["0"], "the view is not stale"
        ids = write(feed, keys=8, per_key=1)
        stale.start()
        eventually(lambda: delivered.ids >= set(ids))
        eventually(lambda: stale.owned_leases == sorted(children))
        assert sorted(f.stored()) == sorted(children)
        assert all(lease.version == 0 for lease in f.stored().values())


@pytest.mark.parametrize("start_from", ["beginning", "time", "now"])
def test_a_lease_without_a_checkpoint_starts_at_the_beginning_a_time_or_now(
    flavour: Flavour, start_from: str
) -> None:
    moment = dt.datetime.now(dt.UTC)
    clock = [moment - dt.timedelta(seconds=60)]
    feed, delivered = InMemoryFeed(2, clock=lambda: clock[0]), Delivered()
    old = write(feed, keys=4, per_key=1)
    clock[0] = moment - dt.timedelta(seconds=20)
    recent = write(feed, keys=4, per_key=1, start=1)
    clock[0] = moment
    start: StartFrom = {"beginning": "beginning", "now": "now"}.get(  # type: ignore[assignment]
        start_from, moment - dt.timedelta(seconds=30)
    )
    with fleet(flavour, feed) as f:
        member = f.processor("x", delivered, start_from=start).start()
        member.wait_until_listening()
        late = write(feed, keys=2, per_key=1, start=10)
        eventually(lambda: delivered.ids >= set(late))
    got = delivered.ids - set(late)
    expected = {"beginning": set(old) | set(recent), "time": set(recent), "now": set()}
    assert got == expected[start_from]


def test_a_restart_resumes_from_the_checkpoints_and_gives_nothing_again(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(2), Delivered()
    with fleet(flavour, feed) as f:
        first = f.processor("one", delivered, start_from="beginning", **STEADY).start()
        ids = write(feed, keys=6, per_key=3)
        eventually(lambda: delivered.ids >= set(ids))
        first.stop()
        more = write(feed, keys=6, per_key=1, start=3)
        again = f.processor("one", delivered, start_from="beginning", **STEADY).start()
        eventually(lambda: delivered.ids >= set(more))
        again.stop()
    assert all(delivered.count(item) == 1 for item in ids + more)


def test_a_change_written_once_every_instance_listens_is_delivered(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(4), Delivered()
    with fleet(flavour, feed) as f:
        members = [f.processor(f"i{n}", delivered).start() for n in range(3)]
        for member in members:
            member.wait_until_listening()
        assert all(lease.owner for lease in f.stored().values()), "a lease without an owner"
        ids = write(feed, keys=8, per_key=1)
        eventually(lambda: delivered.ids >= set(ids))


def test_a_delete_reaches_an_all_versions_and_deletes_handler_as_a_delete(
    flavour: Flavour,
) -> None:
    feed, delivered = InMemoryFeed(2), Delivered()
    with fleet(flavour, feed) as f:
        member = f.processor("avad", delivered, mode="AllVersionsAndDeletes").start()
        member.wait_until_listening()
        feed.upsert({"id": "a", "pk": "x", "v": 1})
        feed.upsert({"id": "a", "pk": "x", "v": 2})
        feed.delete("a", "x")

        def changes() -> list[dict[str, Any]]:
            return [change for _, batch in delivered.batches for change in batch]

        eventually(lambda: len(changes()) == 3)
        stored = f.stored()
    assert [c["metadata"]["operationType"] for c in changes()] == ["create", "replace", "delete"]
    assert changes()[2]["metadata"]["id"] == "a"
    assert {lease.mode for lease in stored.values()} == {"Full-Fidelity Feed"}


def test_the_estimated_lag_of_each_lease_is_what_is_pending(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(4), Delivered()
    with fleet(flavour, feed) as f:
        member = f.processor("p", delivered).start()
        member.wait_until_listening()
        handled = write(feed, keys=40, per_key=1)  # to every partition: each lease checkpoints
        eventually(lambda: delivered.ids >= set(handled))
        eventually(lambda: all(lease.continuation for lease in f.stored().values()))
        member.stop()
        pending = write(feed, keys=13, per_key=3, start=1)
        estimator = ChangeFeedEstimator(
            InMemoryFeedSource(feed), InMemoryLeaseStore(documents=f.leases), processor_name="p"
        )
        states = estimator.get_estimates()
        previews = estimator.get_pending(max_changes=1_000)
    assert sum(state.estimated_lag for state in states) == len(pending)
    assert {p.lease_token: p.estimated_lag for p in previews} == {
        p.lease_token: len(p.changes) for p in previews
    }


def test_a_processor_started_from_the_feeds_pull_model_continuation_reads_what_follows(
    flavour: Flavour,
) -> None:
    feed, delivered = InMemoryFeed(3), Delivered()
    before = write(feed, keys=9, per_key=2)
    saved = Continuation(feed.continuation_token())  # as azure-cosmos's pull model leaves it
    after = write(feed, keys=9, per_key=2, start=2)
    with fleet(flavour, feed) as f:
        f.processor("p", delivered, start_from=saved).start()
        eventually(lambda: delivered.ids >= set(after))
    assert not delivered.ids & set(before)
