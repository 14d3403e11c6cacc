"""The Idempotency-Key's part of the write path's suite, on aggregates (the transaction's is in
its own part)."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from cosmos_outbox.aggregates import AggregateService, Recorded, Versioned
from cosmos_outbox.documents import EVENT_TYPE, IDEMPOTENCY_TYPE
from cosmos_outbox.errors import AlreadyExistsError, IdempotencyKeyReusedError
from cosmos_outbox_testing.contracts._worlds import (
    AggregateExample,
    AggregateSuite,
    StoreWorld,
    answered,
    events_of,
    key_of,
    saved,
    types_in,
)


class IdempotencyContract(AggregateSuite):
    """Idempotency-Key records: written in the batch of the change they answer for, so a
    request's change and its record commit together or not at all; a retry, even one racing the
    first, answers from the record and writes nothing; a key past its TTL is a new key. Run on
    the service (`AggregateService`) over the world's unit of work."""

    def service(self, world: StoreWorld, example: AggregateExample) -> AggregateService[Any]:
        return world.service(example.type())

    def created(self, world: StoreWorld, example: AggregateExample, key: Any) -> Versioned[Any]:
        """A new aggregate, created with `key` (its first request: written)."""
        result = self.service(world, example).create_idempotent(example.new, key=key)
        assert isinstance(result, Versioned)
        return result

    def test_a_keys_record_is_written_in_the_batch_of_its_change(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        key = key_of("create-1", status=201)
        aggregate = self.created(world, example, key).aggregate
        assert aggregate.id == key.aggregate_id(0)  # derived from the key
        docs = world.documents(aggregate.id)
        assert sorted(d["type"] for d in docs) == sorted(
            [aggregate.aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE]
        )
        [record] = [d for d in docs if d["type"] == IDEMPOTENCY_TYPE]
        assert record["id"] == key.record_id and "create-1" not in str(record)
        assert record["ttl"] == world.idempotency_ttl_seconds > 0
        assert record["answer"] == {
            "status": 201,
            "location": f"/contract/{aggregate.id}",
            "body": {"id": aggregate.id, "version": 1},
        }
        stored = next(d for d in docs if d["type"] == aggregate.aggregate_type)
        if "_lsn" in stored:  # one transaction: the record adds none to the change feed
            assert {d["_lsn"] for d in docs} == {stored["_lsn"]}
        with world.uow() as uow:
            read = uow.recorded(aggregate.id, key.record_id)
        assert read is not None
        assert (read.fingerprint, read.version, read.answer) == (
            key.fingerprint,
            1,
            key.answer(aggregate),
        )

    def test_a_second_record_of_a_key_fails_the_whole_batch(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        key = key_of("change-1")
        with world.uow() as uow:  # the key used by an earlier request (that changed nothing)
            uow.remember(key.record(uow.repository(type(aggregate)).get(aggregate.id)))
            uow.commit()
        with world.uow() as uow:
            loaded = uow.repository(type(aggregate)).get(aggregate.id)
            example.change(loaded)  # a valid change, with its event...
            uow.remember(key.record(loaded))  # ...recording the key again
            with pytest.raises(AlreadyExistsError):
                uow.commit()
        assert len(events_of(world, aggregate.id)) == 1  # neither the change nor its event
        with world.uow() as uow:
            assert uow.repository(type(aggregate)).get(aggregate.id).version == 1

    def test_a_keys_record_without_a_change_is_written_alone(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        key = key_of("no-op")
        result = self.service(world, example).change_idempotent(
            aggregate.id, lambda a: None, key=key
        )
        assert isinstance(result, Versioned)
        assert types_in(world, aggregate.id) == sorted(
            [aggregate.aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE]
        )
        again = self.service(world, example).change_idempotent(
            aggregate.id, lambda a: None, key=key
        )
        assert isinstance(again, Recorded)
        assert answered(key, again) == answered(key, result)

    def test_an_unknown_key_has_no_record(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        with world.uow() as uow:
            assert uow.recorded(aggregate.id, key_of("unknown").record_id) is None

    def test_a_retry_answers_as_the_first_without_writing(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        service = self.service(world, example)
        create = key_of("retried-create", status=201)
        first = self.created(world, example, create)
        aggregate_id = first.aggregate.id
        retry = service.create_idempotent(example.new, key=create)
        assert isinstance(retry, Recorded)
        assert answered(create, retry) == answered(create, first)
        change = key_of("retried-change")
        changed = service.change_idempotent(aggregate_id, example.change, key=change)
        # the retry carries the If-Match of the first: it no longer matches, yet it answers
        stale = first.etag
        again = service.change_idempotent(
            aggregate_id, example.change, key=change, precondition=lambda etag: etag == stale
        )
        assert isinstance(again, Recorded)
        assert answered(change, again) == answered(change, changed)
        assert [e["version"] for e in events_of(world, aggregate_id)] == [1, 2]

    def test_the_same_key_for_another_request_is_refused_and_writes_nothing(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        service = self.service(world, example)
        first = self.created(world, example, key_of("k", request="A"))
        before = world.documents(first.aggregate.id)
        with pytest.raises(IdempotencyKeyReusedError):
            service.create_idempotent(example.new, key=key_of("k", request="B"))
        with pytest.raises(IdempotencyKeyReusedError):
            service.change_idempotent(
                first.aggregate.id, example.change, key=key_of("k", request="B")
            )
        assert world.documents(first.aggregate.id) == before

    def test_racing_creates_with_one_key_write_once_and_answer_alike(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        key = key_of("racing-create", status=201)
        both_built = world.gate(2)
        builds = itertools.count()

        def build() -> Any:
            aggregate = example.new()
            if next(builds) < 2:  # neither commits before both have built theirs
                return both_built.meet(aggregate)
            return aggregate

        service = self.service(world, example)
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda _: service.create_idempotent(build, key=key), range(2)))
        assert sorted(type(r).__name__ for r in results) == ["Recorded", "Versioned"]
        assert answered(key, results[0]) == answered(key, results[1])
        aggregate_id = key.aggregate_id(0)
        assert types_in(world, aggregate_id) == sorted(
            [example.type().aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE]
        )

    def test_racing_changes_with_one_key_write_once_and_answer_alike(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        key = key_of("racing-change")
        both_loaded = world.gate(2)
        changes = itertools.count()

        def change(loaded: Any) -> Any:
            example.change(loaded)
            if next(changes) < 2:  # both read the same version before either commits
                return both_loaded.meet(None)
            return None

        service = self.service(world, example)
        with ThreadPoolExecutor(2) as pool:
            results = list(
                pool.map(
                    lambda _: service.change_idempotent(aggregate.id, change, key=key), range(2)
                )
            )
        assert sorted(type(r).__name__ for r in results) == ["Recorded", "Versioned"]
        assert answered(key, results[0]) == answered(key, results[1])
        assert [e["version"] for e in events_of(world, aggregate.id)] == [1, 2]

    def test_a_key_past_its_ttl_is_a_new_key(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        service = self.service(world, example)
        create = key_of("expiring", status=201)
        first = self.created(world, example, create)
        world.expire(first.aggregate.id, create.record_id)
        # The id the key derives is taken: the key takes the next one, a new aggregate.
        second = service.create_idempotent(example.new, key=create)
        assert isinstance(second, Versioned)
        assert second.aggregate.id == create.aggregate_id(1) != first.aggregate.id
        third = service.create_idempotent(example.new, key=create)
        assert isinstance(third, Recorded)
        assert answered(create, third) == answered(create, second)
        change = key_of("expiring-change")
        service.change_idempotent(second.aggregate.id, example.change, key=change)
        world.expire(second.aggregate.id, change.record_id)
        again = service.change_idempotent(second.aggregate.id, lambda a: None, key=change)
        assert isinstance(again, Versioned)  # evaluated afresh, as a new request
