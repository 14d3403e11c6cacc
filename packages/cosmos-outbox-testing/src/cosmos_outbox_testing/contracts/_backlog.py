"""The backlog estimator's suite: what the relay has not yet relayed, counted as the change feed
estimator counts it (changes, i.e. transactions, that carry an event, after each lease's
checkpoint) with the creation time of the first, from the start of the feed while the relay
has no lease yet."""

from __future__ import annotations

import time

from cosmos_outbox.ports import LeaseBacklog
from cosmos_outbox_testing.contracts._worlds import BacklogWorld, Suite, finished, unique


def _commit(world: BacklogWorld, *, events: int, document: bool = True) -> list[str]:
    """One transaction in a partition of its own: a document of the app's own and `events`
    published events (none: a change that carries no event); the events' ids."""
    partition = unique("customer")
    with world.store_world.transaction(partition, entity="customer") as tx:
        if document:
            tx.create({"id": f"booking-{partition}", "type": "booking", "seats": 2})
        for number in range(events):
            tx.publish("BookingNoted", {"number": number})
        return list(tx.commit().events)


class BacklogEstimatorContract(Suite[BacklogWorld]):
    """The backlog estimator, sync or async (`BacklogWorld`): its estimate of the relay's
    leases over the container a store world writes to."""

    @staticmethod
    def estimate(world: BacklogWorld) -> list[LeaseBacklog]:
        return list(finished(world.store_world, world.estimator.estimate()))

    def test_nothing_written_nothing_pending(self, world: BacklogWorld) -> None:
        leases = self.estimate(world)
        assert all(isinstance(lease, LeaseBacklog) for lease in leases)
        assert sum(lease.pending for lease in leases) == 0
        assert all(lease.oldest_created_at is None for lease in leases)

    def test_each_transaction_with_events_is_one_pending_change_from_the_start(
        self, world: BacklogWorld
    ) -> None:
        before = time.time()
        for events in (1, 2, 1):
            _commit(world, events=events)
        leases = self.estimate(world)
        assert sum(lease.pending for lease in leases) == 3  # transactions, not events
        oldest = [lease.oldest_created_at for lease in leases if lease.pending]
        assert oldest and all(
            at is not None and before - 5 <= at <= time.time() + 5 for at in oldest
        )
        assert len({lease.lease for lease in leases}) == len(leases)

    def test_a_change_that_carries_no_event_is_not_pending(self, world: BacklogWorld) -> None:
        _commit(world, events=0)
        _commit(world, events=1)
        assert sum(lease.pending for lease in self.estimate(world)) == 1

    def test_what_the_relay_checkpointed_is_no_longer_pending(self, world: BacklogWorld) -> None:
        _commit(world, events=1)
        _commit(world, events=1)
        world.checkpoint()
        leases = self.estimate(world)
        assert leases and sum(lease.pending for lease in leases) == 0
        assert all(lease.oldest_created_at is None for lease in leases)
        after = time.time()
        _commit(world, events=1)
        leases = self.estimate(world)
        assert sum(lease.pending for lease in leases) == 1
        [oldest] = [lease.oldest_created_at for lease in leases if lease.pending]
        assert oldest is not None and oldest >= after - 5  # the new change's, not the first's

    def test_the_pending_events_are_named_until_the_relay_checkpointed_them(
        self, world: BacklogWorld
    ) -> None:
        """What the journey of an event reads: an event among a lease's pending ids is not
        relayed yet; a lease read to the end of its feed says its ids are all of them."""
        first = _commit(world, events=2)
        leases = self.estimate(world)
        assert set(first) <= {i for lease in leases for i in lease.pending_ids}
        assert all(lease.pending_ids_complete for lease in leases)  # a short backlog: all read
        world.checkpoint()
        later = _commit(world, events=1)
        named = {i for lease in self.estimate(world) for i in lease.pending_ids}
        assert set(later) <= named and not set(first) & named
