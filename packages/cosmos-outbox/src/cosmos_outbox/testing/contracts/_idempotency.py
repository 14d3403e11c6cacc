"""The Idempotency-Key suite."""

from __future__ import annotations

import abc
import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from cosmos_outbox._documents import EVENT_TYPE, IDEMPOTENCY_TYPE
from cosmos_outbox._idempotency import Recorded
from cosmos_outbox._service import Versioned
from cosmos_outbox._sync import AggregateService
from cosmos_outbox.errors import AlreadyExistsError, IdempotencyKeyReusedError
from cosmos_outbox.testing.contracts._worlds import (
    AggregateExample,
    StoreWorld,
    answered,
    claim_of_key,
    events_of,
    saved,
    types_in,
)


class IdempotencyContract:
    """Idempotency-Key records: claimed in the batch of the change they answer for, so a
    request's change and its claim commit together or not at all; a retry, even one racing the
    first, answers from the record and writes nothing; a key past its TTL is a new key. Run on
    the service (`AggregateService`) over the world's unit of work."""

    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> StoreWorld: ...

    @pytest.fixture
    @abc.abstractmethod
    def example(self) -> AggregateExample: ...

    def service(self, world: StoreWorld, example: AggregateExample) -> AggregateService[Any]:
        return world.service(example.type())

    def test_a_claim_is_written_in_the_batch_of_its_change(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        claim = claim_of_key("create-1", status=201)
        result = self.service(world, example).create_idempotent(example.new, claim=claim)
        assert isinstance(result, Versioned)
        aggregate = result.aggregate
        assert aggregate.id == claim.aggregate_id(0)  # derived from the key
        docs = world.documents(aggregate.id)
        assert sorted(d["type"] for d in docs) == sorted(
            [aggregate.aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE]
        )
        [record] = [d for d in docs if d["type"] == IDEMPOTENCY_TYPE]
        assert record["id"] == claim.record_id and "create-1" not in str(record)
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
            read = uow.recorded(aggregate.id, claim.record_id)
        assert read is not None
        assert (read.fingerprint, read.version, read.answer) == (
            claim.fingerprint,
            1,
            claim.answer(aggregate),
        )

    def test_a_second_claim_of_a_key_fails_the_whole_batch(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        claim = claim_of_key("change-1")
        with world.uow() as uow:  # the key claimed by an earlier request (that changed nothing)
            uow.claim(claim.record(uow.repository(type(aggregate)).get(aggregate.id)))
            uow.commit()
        with world.uow() as uow:
            loaded = uow.repository(type(aggregate)).get(aggregate.id)
            example.change(loaded)  # a valid change, with its event...
            uow.claim(claim.record(loaded))  # ...claiming the key again
            with pytest.raises(AlreadyExistsError):
                uow.commit()
        assert len(events_of(world, aggregate.id)) == 1  # neither the change nor its event
        with world.uow() as uow:
            assert uow.repository(type(aggregate)).get(aggregate.id).version == 1

    def test_a_claim_without_a_change_is_written_alone(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        claim = claim_of_key("no-op")
        result = self.service(world, example).change_idempotent(
            aggregate.id, lambda a: None, claim=claim
        )
        assert isinstance(result, Versioned)
        assert types_in(world, aggregate.id) == sorted(
            [aggregate.aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE]
        )
        again = self.service(world, example).change_idempotent(
            aggregate.id, lambda a: None, claim=claim
        )
        assert isinstance(again, Recorded)
        assert answered(claim, again) == answered(claim, result)

    def test_an_unknown_key_has_no_record(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        with world.uow() as uow:
            assert uow.recorded(aggregate.id, claim_of_key("unknown").record_id) is None

    def test_a_retry_answers_as_the_first_without_writing(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        service = self.service(world, example)
        create = claim_of_key("retried-create", status=201)
        first = service.create_idempotent(example.new, claim=create)
        assert isinstance(first, Versioned)
        aggregate_id = first.aggregate.id
        retry = service.create_idempotent(example.new, claim=create)
        assert isinstance(retry, Recorded)
        assert answered(create, retry) == answered(create, first)
        change = claim_of_key("retried-change")
        changed = service.change_idempotent(aggregate_id, example.change, claim=change)
        # the retry carries the If-Match of the first: it no longer matches, yet it answers
        stale = first.etag
        again = service.change_idempotent(
            aggregate_id, example.change, claim=change, precondition=lambda etag: etag == stale
        )
        assert isinstance(again, Recorded)
        assert answered(change, again) == answered(change, changed)
        assert [e["version"] for e in events_of(world, aggregate_id)] == [1, 2]

    def test_the_same_key_for_another_request_is_refused_and_writes_nothing(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        service = self.service(world, example)
        first = service.create_idempotent(example.new, claim=claim_of_key("k", request="A"))
        assert isinstance(first, Versioned)
        before = world.documents(first.aggregate.id)
        with pytest.raises(IdempotencyKeyReusedError):
            service.create_idempotent(example.new, claim=claim_of_key("k", request="B"))
        with pytest.raises(IdempotencyKeyReusedError):
            service.change_idempotent(
                first.aggregate.id, example.change, claim=claim_of_key("k", request="B")
            )
        assert world.documents(first.aggregate.id) == before

    def test_racing_creates_with_one_key_write_once_and_answer_alike(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        claim = claim_of_key("racing-create", status=201)
        both_built = world.gate(2)
        builds = itertools.count()

        def build() -> Any:
            aggregate = example.new()
            if next(builds) < 2:  # neither commits before both have built theirs
                return both_built.meet(aggregate)
            return aggregate

        service = self.service(world, example)
        with ThreadPoolExecutor(2) as pool:
            results = list(
                pool.map(lambda _: service.create_idempotent(build, claim=claim), range(2))
            )
        assert sorted(type(r).__name__ for r in results) == ["Recorded", "Versioned"]
        assert answered(claim, results[0]) == answered(claim, results[1])
        aggregate_id = claim.aggregate_id(0)
        assert types_in(world, aggregate_id) == sorted(
            [example.type().aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE]
        )

    def test_racing_changes_with_one_key_write_once_and_answer_alike(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        aggregate = saved(world, example.new())
        claim = claim_of_key("racing-change")
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
                    lambda _: service.change_idempotent(aggregate.id, change, claim=claim), range(2)
                )
            )
        assert sorted(type(r).__name__ for r in results) == ["Recorded", "Versioned"]
        assert answered(claim, results[0]) == answered(claim, results[1])
        assert [e["version"] for e in events_of(world, aggregate.id)] == [1, 2]

    def test_a_key_past_its_ttl_is_a_new_key(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        service = self.service(world, example)
        create = claim_of_key("expiring", status=201)
        first = service.create_idempotent(example.new, claim=create)
        assert isinstance(first, Versioned)
        world.expire(first.aggregate.id, create.record_id)
        # The id the key derives is taken: the key takes the next one, a new aggregate.
        second = service.create_idempotent(example.new, claim=create)
        assert isinstance(second, Versioned)
        assert second.aggregate.id == create.aggregate_id(1) != first.aggregate.id
        third = service.create_idempotent(example.new, claim=create)
        assert isinstance(third, Recorded)
        assert answered(create, third) == answered(create, second)
        change = claim_of_key("expiring-change")
        service.change_idempotent(second.aggregate.id, example.change, claim=change)
        world.expire(second.aggregate.id, change.record_id)
        again = service.change_idempotent(second.aggregate.id, lambda a: None, claim=change)
        assert isinstance(again, Versioned)  # evaluated afresh, as a new request
