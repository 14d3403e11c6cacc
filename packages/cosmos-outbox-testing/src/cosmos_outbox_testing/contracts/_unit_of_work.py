"""The unit of work's part of the write path's suite: one atomic batch per aggregate (the
aggregate and its events, in its partition), conditioned on the etag it was read with, within
Cosmos DB's limits before the round trip; every change has its event."""

from __future__ import annotations

import pytest

from cosmos_outbox.aggregates import Aggregate
from cosmos_outbox.documents import EVENT_TYPE, envelope_and_data
from cosmos_outbox.errors import (
    AlreadyExistsError,
    BatchTooLargeError,
    NotFoundError,
    PreconditionFailedError,
    UnrecordedChangeError,
)
from cosmos_outbox_testing.contracts._worlds import (
    AggregateExample,
    AggregateSuite,
    StoreWorld,
    events_of,
    saved,
)


class UnitOfWorkContract(AggregateSuite):
    """The unit of work and its repositories: one atomic batch per aggregate (the aggregate and
    its events, in its partition), conditioned on the etag it was read with."""

    def test_commit_writes_the_aggregate_and_its_event_in_one_partition(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        docs = world.documents(aggregate.id)
        assert sorted(d["type"] for d in docs) == sorted([aggregate.aggregate_type, EVENT_TYPE])
        event = next(d for d in docs if d["type"] == EVENT_TYPE)
        assert event["partitionKey"] == aggregate.id
        assert event["aggregateType"] == aggregate.aggregate_type
        assert event["source"] == aggregate.source()
        stored = envelope_and_data(event)
        assert stored[f"{aggregate.aggregate_type}Id"] == aggregate.id
        assert stored["action"] == example.actions[0]
        assert stored["version"] == 1
        assert event["ttl"] > 0

    def test_reads_back_exactly_what_was_committed_with_an_etag(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        with world.uow() as uow:
            loaded = uow.repository(type(aggregate)).get(aggregate.id)
            assert uow.repository(type(aggregate)).etag(aggregate.id)
        assert loaded.model_dump() == aggregate.model_dump()
        assert loaded.events == []

    def test_nothing_is_written_without_commit(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = example.new()
        with world.uow() as uow:
            uow.repository(type(aggregate)).add(aggregate)
        assert world.documents(aggregate.id) == []
        with world.uow() as uow, pytest.raises(NotFoundError):
            uow.repository(type(aggregate)).get(aggregate.id)

    def test_a_missing_aggregate_is_not_found_by_its_type_and_id(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        with world.uow() as uow, pytest.raises(NotFoundError) as info:
            uow.repository(example.type()).get("no-such-aggregate")
        assert info.value.aggregate_type == example.type().aggregate_type
        assert info.value.aggregate_id == "no-such-aggregate"

    def test_a_unit_of_work_has_one_repository_per_aggregate_type(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        with world.uow() as uow:
            assert uow.repository(example.type()) is uow.repository(example.type())

    def test_a_change_replaces_the_aggregate_and_adds_one_event(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        with world.uow() as uow:
            repository = uow.repository(type(aggregate))
            loaded = repository.get(aggregate.id)
            before = repository.etag(aggregate.id)
            example.change(loaded)
            uow.commit(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            assert repository.etag(aggregate.id) != before
        events = events_of(world, aggregate.id)
        assert [e["action"] for e in events] == list(example.actions)
        assert [e["version"] for e in events] == [1, 2]
        assert events[0]["traceparent"] is None
        assert events[1]["traceparent"].startswith("00-0af7651916cd43dd")
        with world.uow() as uow:
            reloaded = uow.repository(type(aggregate)).get(aggregate.id)
        assert reloaded.model_dump() == loaded.model_dump()
        assert reloaded.version == 2

    def test_a_stale_etag_is_refused_and_nothing_is_written(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        first, second = world.uow(), world.uow()
        a = first.repository(type(aggregate)).get(aggregate.id)
        b = second.repository(type(aggregate)).get(aggregate.id)
        example.change(a)
        first.commit()
        example.change(b)
        with pytest.raises(PreconditionFailedError):
            second.commit()
        with world.uow() as uow:
            assert uow.repository(type(aggregate)).get(aggregate.id).model_dump() == (
                a.model_dump()
            )
        assert len(events_of(world, aggregate.id)) == 2  # created + the first writer's only

    def test_a_failing_operation_leaves_nothing_of_the_change_written(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = example.new()
        event_id = aggregate.events[0].id
        # A document with the event's id already in the partition: the event's create fails.
        world.plant({"id": event_id, "partitionKey": aggregate.id, "type": "blocker", "ttl": -1})
        _refused(world, aggregate, AlreadyExistsError)
        assert [d["type"] for d in world.documents(aggregate.id)] == ["blocker"]
        with world.uow() as uow, pytest.raises(NotFoundError):
            uow.repository(type(aggregate)).get(aggregate.id)

    def test_creating_an_existing_aggregate_conflicts(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        twin = example.new()
        twin.id = aggregate.id
        _refused(world, twin, AlreadyExistsError)

    def test_an_unchanged_aggregate_writes_nothing(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        before = _stored(world, aggregate)
        with world.uow() as uow:
            uow.repository(type(aggregate)).get(aggregate.id)
            uow.commit()
        assert _stored(world, aggregate) == before

    def test_a_change_without_its_event_is_refused_and_nothing_is_written(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        before = _stored(world, aggregate)
        with world.uow() as uow:
            loaded = uow.repository(type(aggregate)).get(aggregate.id)
            example.change(loaded)
            loaded.collect_events()  # the state changed; its event is gone
            with pytest.raises(UnrecordedChangeError) as info:
                uow.commit()
        assert (info.value.aggregate_type, info.value.aggregate_id) == (
            aggregate.aggregate_type,
            aggregate.id,
        )
        assert info.value.fields
        assert _stored(world, aggregate) == before

    def test_a_new_aggregate_without_an_event_is_refused(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = example.new()
        aggregate.collect_events()
        _refused(world, aggregate, UnrecordedChangeError)
        assert world.documents(aggregate.id) == []

    def test_an_event_of_one_aggregate_is_no_aggregate_of_another(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        event_id = events_of(world, aggregate.id)[0]["id"]
        world.plant(
            {"id": event_id, "partitionKey": event_id, "type": EVENT_TYPE, "data": {}, "ttl": -1}
        )
        with world.uow() as uow, pytest.raises(NotFoundError):
            uow.repository(type(aggregate)).get(event_id)

    def test_a_change_past_the_batch_limits_is_refused_before_the_round_trip(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        """100 events and the aggregate: 101 operations, one more than a transactional batch
        takes. The write path refuses it, saying what to do, before Cosmos DB is asked; nothing
        is written, and the aggregate keeps its events."""
        aggregate = example.new()
        recorded = type(aggregate.events[0])
        for _ in range(99):
            aggregate.record(recorded)
        with world.uow() as uow:
            uow.repository(type(aggregate)).add(aggregate)
            with pytest.raises(BatchTooLargeError, match=r"101 operations \(the aggregate"):
                uow.commit()
            assert len(aggregate.events) == 100  # kept for the unit of work's next commit
        assert world.documents(aggregate.id) == []


def _refused(
    world: StoreWorld, aggregate: Aggregate, error: type[Exception], match: str | None = None
) -> None:
    """`aggregate`, added in a unit of work, is refused at the commit with `error`."""
    with world.uow() as uow:
        uow.repository(type(aggregate)).add(aggregate)
        with pytest.raises(error, match=match):
            uow.commit()


def _stored(world: StoreWorld, aggregate: Aggregate) -> list[tuple[str, str]]:
    """The documents of `aggregate`'s partition, by id and etag."""
    return sorted((d["id"], d["_etag"]) for d in world.documents(aggregate.id))
