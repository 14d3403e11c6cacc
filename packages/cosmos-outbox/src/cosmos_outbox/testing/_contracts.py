"""The ports' contract suites, written once, to subclass: run them on the in-memory fakes and on
the Azure adapters (or on an adapter of your own), and both are held to one behaviour.

    from cosmos_outbox.testing._contracts import AggregateKind, UnitOfWorkContract, kinds

    ORDER = AggregateKind("order", new=lambda: Order.place(...), change=Order.cancel,
                          actions=("OrderPlaced", "OrderCancelled"))

    class TestInMemoryUnitOfWork(UnitOfWorkContract):
        kind = kinds(ORDER)

        @pytest.fixture
        def world(self) -> StoreWorld:
            return InMemoryStoreWorld()  # or a world on your Cosmos DB container

Each suite needs a `world` fixture (what it runs against) and a `kind` fixture (the aggregate
types it drives, `kinds(...)`). `IdempotencyContract` (Idempotency-Key records, racing retries,
TTL) runs on a `StoreWorld` too: subclass it beside `UnitOfWorkContract`. Test classes here are
not collected themselves (their names do not start with `Test`). The worlds of the in-memory
fakes are here too (`InMemoryStoreWorld`, `InMemoryQuarantineWorld`, `InMemoryPayloadWorld`).
"""

from __future__ import annotations

import abc
import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cosmos_outbox._documents import (
    EVENT_TYPE,
    IDEMPOTENCY_TYPE,
    event_documents,
    outbox_record,
    unreadable,
)
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._idempotency import Answer, Claim, Recorded
from cosmos_outbox._records import OutboxRecord, Unreadable, payload_name
from cosmos_outbox._service import AggregateService, Versioned
from cosmos_outbox._unit_of_work import TrackingUnitOfWork
from cosmos_outbox.errors import (
    AlreadyExistsError,
    IdempotencyKeyReusedError,
    NotFoundError,
    PayloadNotFoundError,
    PayloadReferenceError,
    PayloadStoreError,
    PreconditionFailedError,
    UnrecordedChangeError,
)
from cosmos_outbox.ports import EventStore, PayloadStore, Quarantine, UnitOfWork
from cosmos_outbox.testing._fakes import (
    InMemoryEventStore,
    InMemoryPayloadStore,
    InMemoryQuarantine,
    InMemoryStore,
    uow_factory,
)

__all__ = [
    "AggregateKind",
    "IdempotencyContract",
    "InMemoryPayloadWorld",
    "InMemoryQuarantineWorld",
    "InMemoryStoreWorld",
    "PayloadStoreContract",
    "PayloadWorld",
    "QuarantineContract",
    "QuarantineWorld",
    "StoreWorld",
    "UnitOfWorkContract",
    "kinds",
]


@dataclass(frozen=True)
class AggregateKind:
    """One aggregate type as the contracts drive it: `new()` makes a fresh aggregate that
    recorded one creation event; `change(aggregate)` makes one change of a fresh aggregate that
    raises one event; `actions` are the creation event's action and the change's."""

    name: str
    new: Callable[[], Aggregate]
    change: Callable[[Any], object]
    actions: tuple[str, str]

    def type(self) -> type[Aggregate]:
        return type(self.new())


def kinds(*driven: AggregateKind) -> Any:
    """The `kind` fixture of a contract subclass: each test runs once per kind."""

    @pytest.fixture(params=driven, ids=[k.name for k in driven])
    def kind(self: object, request: pytest.FixtureRequest) -> AggregateKind:
        return request.param  # type: ignore[no-any-return]

    return kind


class StoreWorld(abc.ABC):
    """What the unit-of-work contract needs besides the port itself."""

    uow: Callable[[], UnitOfWork]

    @abc.abstractmethod
    def plant(self, document: dict[str, Any]) -> None:
        """Write a raw document behind the unit of work's back (to inject a real failure)."""

    @abc.abstractmethod
    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        """Every document stored in one partition."""

    @abc.abstractmethod
    def expire(self, partition_key: str, document_id: str) -> None:
        """Let the store's TTL delete one document now (shorten it, or move the store's time
        on, and wait until the document is gone)."""


class InMemoryStoreWorld(StoreWorld):
    """The in-memory store (`InMemoryStore`) and its unit of work."""

    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.uow = uow_factory(self.store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return [d for (pk, _), d in self.store.documents.items() if pk == partition_key]

    def expire(self, partition_key: str, document_id: str) -> None:
        self.store.outlive(partition_key, document_id)


def saved(world: StoreWorld, aggregate: Aggregate) -> Any:
    """`aggregate`, committed with its events."""
    with world.uow() as uow:
        uow.repository(type(aggregate)).add(aggregate)
        uow.commit()
    return aggregate


def claim_of_key(key: str, *, request: str = "the same request",
                 status: int = 200) -> Claim[Any]:
    """A claim of `key`, answering with the aggregate's id and version."""
    return Claim(scope="POST contract", key=key, fingerprint=request,
                 answer=lambda a: Answer(status, {"id": a.id, "version": a.version},
                                         f"/contract/{a.id}"))


def answered(claim: Claim[Any], result: Versioned[Any] | Recorded) -> tuple[Answer, str]:
    """What the route helper answers from a write's result: the answer and the ETag."""
    if isinstance(result, Recorded):
        return result.answer, result.etag
    return claim.answer_for(result.aggregate), result.etag


def types_in(world: StoreWorld, partition_key: str) -> list[str]:
    return sorted(d["type"] for d in world.documents(partition_key))


def events_of(world: StoreWorld, partition_key: str) -> list[dict[str, Any]]:
    return sorted(
        (d["data"] for d in world.documents(partition_key) if d["type"] == EVENT_TYPE),
        key=lambda e: e["version"],
    )


class UnitOfWorkContract:
    """The unit of work and its repositories: one atomic batch per aggregate (the aggregate and
    its events, in its partition), conditioned on the etag it was read with."""

    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> StoreWorld: ...

    @pytest.fixture
    @abc.abstractmethod
    def kind(self) -> AggregateKind: ...

    def test_commit_writes_the_aggregate_and_its_event_in_one_partition(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        docs = world.documents(aggregate.id)
        assert sorted(d["type"] for d in docs) == sorted([aggregate.aggregate_type, EVENT_TYPE])
        event = next(d for d in docs if d["type"] == EVENT_TYPE)
        assert event["partitionKey"] == aggregate.id
        assert event["aggregateType"] == aggregate.aggregate_type
        assert event["source"] == aggregate.source()
        assert event["data"][f"{aggregate.aggregate_type}Id"] == aggregate.id
        assert event["data"]["action"] == kind.actions[0]
        assert event["data"]["version"] == 1
        assert event["ttl"] > 0

    def test_reads_back_exactly_what_was_committed_with_an_etag(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        with world.uow() as uow:
            loaded = uow.repository(type(aggregate)).get(aggregate.id)
            assert uow.repository(type(aggregate)).etag(aggregate.id)
        assert loaded.model_dump() == aggregate.model_dump()
        assert loaded.events == []

    def test_nothing_is_written_without_commit(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = kind.new()
        with world.uow() as uow:
            uow.repository(type(aggregate)).add(aggregate)
        assert world.documents(aggregate.id) == []
        with world.uow() as uow, pytest.raises(NotFoundError):
            uow.repository(type(aggregate)).get(aggregate.id)

    def test_a_missing_aggregate_is_not_found_by_its_type_and_id(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        with world.uow() as uow, pytest.raises(NotFoundError) as info:
            uow.repository(kind.type()).get("no-such-aggregate")
        assert info.value.aggregate_type == kind.type().aggregate_type
        assert info.value.aggregate_id == "no-such-aggregate"

    def test_a_unit_of_work_has_one_repository_per_aggregate_type(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        with world.uow() as uow:
            assert uow.repository(kind.type()) is uow.repository(kind.type())

    def test_a_change_replaces_the_aggregate_and_adds_one_event(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        with world.uow() as uow:
            repository = uow.repository(type(aggregate))
            loaded = repository.get(aggregate.id)
            before = repository.etag(aggregate.id)
            kind.change(loaded)
            uow.commit(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            assert repository.etag(aggregate.id) != before
        events = events_of(world, aggregate.id)
        assert [e["action"] for e in events] == list(kind.actions)
        assert [e["version"] for e in events] == [1, 2]
        assert events[0]["traceparent"] is None
        assert events[1]["traceparent"].startswith("00-0af7651916cd43dd")
        with world.uow() as uow:
            reloaded = uow.repository(type(aggregate)).get(aggregate.id)
        assert reloaded.model_dump() == loaded.model_dump()
        assert reloaded.version == 2

    def test_a_stale_etag_is_refused_and_nothing_is_written(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        first, second = world.uow(), world.uow()
        a = first.repository(type(aggregate)).get(aggregate.id)
        b = second.repository(type(aggregate)).get(aggregate.id)
        kind.change(a)
        first.commit()
        kind.change(b)
        with pytest.raises(PreconditionFailedError):
            second.commit()
        with world.uow() as uow:
            assert uow.repository(type(aggregate)).get(aggregate.id).model_dump() == (
                a.model_dump())
        assert len(events_of(world, aggregate.id)) == 2  # created + the first writer's only

    def test_a_failing_operation_leaves_nothing_of_the_batch_written(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = kind.new()
        event_id = aggregate.events[0].id
        # A document with the event's id already in the partition: the event's create fails.
        world.plant({"id": event_id, "partitionKey": aggregate.id, "type": "blocker", "ttl": -1})
        with world.uow() as uow:
            uow.repository(type(aggregate)).add(aggregate)
            with pytest.raises(AlreadyExistsError):
                uow.commit()
        assert [d["type"] for d in world.documents(aggregate.id)] == ["blocker"]
        with world.uow() as uow, pytest.raises(NotFoundError):
            uow.repository(type(aggregate)).get(aggregate.id)

    def test_creating_an_existing_aggregate_conflicts(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        twin = kind.new()
        twin.id = aggregate.id
        with world.uow() as uow:
            uow.repository(type(twin)).add(twin)
            with pytest.raises(AlreadyExistsError):
                uow.commit()

    def test_an_unchanged_aggregate_writes_nothing(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        with world.uow() as uow:
            repository = uow.repository(type(aggregate))
            repository.get(aggregate.id)
            etag = repository.etag(aggregate.id)
            uow.commit()
            assert repository.etag(aggregate.id) == etag
        assert len(world.documents(aggregate.id)) == 2

    def test_a_change_without_its_event_is_refused_and_nothing_is_written(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        before = sorted((d["id"], d["_etag"]) for d in world.documents(aggregate.id))
        with world.uow() as uow:
            loaded = uow.repository(type(aggregate)).get(aggregate.id)
            kind.change(loaded)
            loaded.collect_events()  # the state changed; its event is gone
            with pytest.raises(UnrecordedChangeError) as info:
                uow.commit()
        assert (info.value.aggregate_type, info.value.aggregate_id) == (
            aggregate.aggregate_type, aggregate.id)
        assert info.value.fields
        assert sorted((d["id"], d["_etag"]) for d in world.documents(aggregate.id)) == before

    def test_a_new_aggregate_without_an_event_is_refused(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = kind.new()
        aggregate.collect_events()
        with world.uow() as uow:
            uow.repository(type(aggregate)).add(aggregate)
            with pytest.raises(UnrecordedChangeError):
                uow.commit()
        assert world.documents(aggregate.id) == []

    def test_an_event_of_one_aggregate_is_no_aggregate_of_another(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        event_id = events_of(world, aggregate.id)[0]["id"]
        world.plant({"id": event_id, "partitionKey": event_id, "type": EVENT_TYPE, "data": {},
                     "ttl": -1})
        with world.uow() as uow, pytest.raises(NotFoundError):
            uow.repository(type(aggregate)).get(event_id)


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
    def kind(self) -> AggregateKind: ...

    def service(self, world: StoreWorld, kind: AggregateKind) -> AggregateService[Any]:
        return AggregateService(kind.type(), world.uow)

    def test_a_claim_is_written_in_the_batch_of_its_change(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        claim = claim_of_key("create-1", status=201)
        result = self.service(world, kind).create_idempotent(kind.new, claim=claim)
        assert isinstance(result, Versioned)
        aggregate = result.aggregate
        assert aggregate.id == claim.aggregate_id(0)  # derived from the key
        docs = world.documents(aggregate.id)
        assert sorted(d["type"] for d in docs) == sorted(
            [aggregate.aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE])
        [record] = [d for d in docs if d["type"] == IDEMPOTENCY_TYPE]
        assert record["id"] == claim.record_id and "create-1" not in str(record)
        uow = world.uow()
        assert record["ttl"] == (uow.idempotency_ttl_seconds
                                 if isinstance(uow, TrackingUnitOfWork) else record["ttl"]) > 0
        assert record["answer"] == {"status": 201, "location": f"/contract/{aggregate.id}",
                                    "body": {"id": aggregate.id, "version": 1}}
        stored = next(d for d in docs if d["type"] == aggregate.aggregate_type)
        if "_lsn" in stored:  # one transaction: the record adds none to the change feed
            assert {d["_lsn"] for d in docs} == {stored["_lsn"]}
        with world.uow() as uow:
            read = uow.recorded(aggregate.id, claim.record_id)
        assert read is not None
        assert (read.fingerprint, read.version, read.answer) == (
            claim.fingerprint, 1, claim.answer(aggregate))

    def test_a_second_claim_of_a_key_fails_the_whole_batch(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        claim = claim_of_key("change-1")
        with world.uow() as uow:  # the key claimed by an earlier request (that changed nothing)
            uow.claim(claim.record(uow.repository(type(aggregate)).get(aggregate.id)))
            uow.commit()
        with world.uow() as uow:
            loaded = uow.repository(type(aggregate)).get(aggregate.id)
            kind.change(loaded)  # a valid change, with its event...
            uow.claim(claim.record(loaded))  # ...claiming the key again
            with pytest.raises(AlreadyExistsError):
                uow.commit()
        assert len(events_of(world, aggregate.id)) == 1  # neither the change nor its event
        with world.uow() as uow:
            assert uow.repository(type(aggregate)).get(aggregate.id).version == 1

    def test_a_claim_without_a_change_is_written_alone(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        claim = claim_of_key("no-op")
        result = self.service(world, kind).change_idempotent(
            aggregate.id, lambda a: None, claim=claim)
        assert isinstance(result, Versioned)
        assert types_in(world, aggregate.id) == sorted(
            [aggregate.aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE])
        again = self.service(world, kind).change_idempotent(
            aggregate.id, lambda a: None, claim=claim)
        assert isinstance(again, Recorded)
        assert answered(claim, again) == answered(claim, result)

    def test_an_unknown_key_has_no_record(self, world: StoreWorld, kind: AggregateKind) -> None:
        aggregate = saved(world, kind.new())
        with world.uow() as uow:
            assert uow.recorded(aggregate.id, claim_of_key("unknown").record_id) is None

    def test_a_retry_answers_as_the_first_without_writing(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        service = self.service(world, kind)
        create = claim_of_key("retried-create", status=201)
        first = service.create_idempotent(kind.new, claim=create)
        assert isinstance(first, Versioned)
        aggregate_id = first.aggregate.id
        retry = service.create_idempotent(kind.new, claim=create)
        assert isinstance(retry, Recorded)
        assert answered(create, retry) == answered(create, first)
        change = claim_of_key("retried-change")
        changed = service.change_idempotent(aggregate_id, kind.change, claim=change)
        # the retry carries the If-Match of the first: it no longer matches, yet it answers
        stale = first.etag
        again = service.change_idempotent(aggregate_id, kind.change, claim=change,
                                          precondition=lambda etag: etag == stale)
        assert isinstance(again, Recorded)
        assert answered(change, again) == answered(change, changed)
        assert [e["version"] for e in events_of(world, aggregate_id)] == [1, 2]

    def test_the_same_key_for_another_request_is_refused_and_writes_nothing(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        service = self.service(world, kind)
        first = service.create_idempotent(kind.new, claim=claim_of_key("k", request="A"))
        assert isinstance(first, Versioned)
        before = world.documents(first.aggregate.id)
        with pytest.raises(IdempotencyKeyReusedError):
            service.create_idempotent(kind.new, claim=claim_of_key("k", request="B"))
        with pytest.raises(IdempotencyKeyReusedError):
            service.change_idempotent(first.aggregate.id, kind.change,
                                      claim=claim_of_key("k", request="B"))
        assert world.documents(first.aggregate.id) == before

    def test_racing_creates_with_one_key_write_once_and_answer_alike(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        claim = claim_of_key("racing-create", status=201)
        both_built = threading.Barrier(2, timeout=30)
        waited = threading.local()

        def build() -> Aggregate:
            aggregate = kind.new()
            if not getattr(waited, "done", False):
                waited.done = True
                both_built.wait()  # neither commits before both have built theirs
            return aggregate

        service = self.service(world, kind)
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(
                lambda _: service.create_idempotent(build, claim=claim), range(2)))
        assert sorted(type(r).__name__ for r in results) == ["Recorded", "Versioned"]
        assert answered(claim, results[0]) == answered(claim, results[1])
        aggregate_id = claim.aggregate_id(0)
        assert types_in(world, aggregate_id) == sorted(
            [kind.type().aggregate_type, EVENT_TYPE, IDEMPOTENCY_TYPE])

    def test_racing_changes_with_one_key_write_once_and_answer_alike(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        aggregate = saved(world, kind.new())
        claim = claim_of_key("racing-change")
        both_loaded = threading.Barrier(2, timeout=30)

        def change(loaded: Any) -> None:
            both_loaded.wait()  # both read the same version before either commits
            kind.change(loaded)

        service = self.service(world, kind)
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(
                lambda _: service.change_idempotent(aggregate.id, change, claim=claim),
                range(2)))
        assert sorted(type(r).__name__ for r in results) == ["Recorded", "Versioned"]
        assert answered(claim, results[0]) == answered(claim, results[1])
        assert [e["version"] for e in events_of(world, aggregate.id)] == [1, 2]

    def test_a_key_past_its_ttl_is_a_new_key(
        self, world: StoreWorld, kind: AggregateKind
    ) -> None:
        service = self.service(world, kind)
        create = claim_of_key("expiring", status=201)
        first = service.create_idempotent(kind.new, claim=create)
        assert isinstance(first, Versioned)
        world.expire(first.aggregate.id, create.record_id)
        # The id the key derives is taken: the key takes the next one, a new aggregate.
        second = service.create_idempotent(kind.new, claim=create)
        assert isinstance(second, Versioned)
        assert second.aggregate.id == create.aggregate_id(1) != first.aggregate.id
        third = service.create_idempotent(kind.new, claim=create)
        assert isinstance(third, Recorded)
        assert answered(create, third) == answered(create, second)
        change = claim_of_key("expiring-change")
        service.change_idempotent(second.aggregate.id, kind.change, claim=change)
        world.expire(second.aggregate.id, change.record_id)
        again = service.change_idempotent(second.aggregate.id, lambda a: None, claim=change)
        assert isinstance(again, Versioned)  # evaluated afresh, as a new request


class QuarantineWorld(abc.ABC):
    """What the quarantine contract runs against: the quarantine and the stored events, on one
    store."""

    quarantine: Quarantine
    events: EventStore

    @abc.abstractmethod
    def plant(self, document: dict[str, Any]) -> None:
        """Write a raw document as the unit of work would have."""


class InMemoryQuarantineWorld(QuarantineWorld):
    """The in-memory quarantine and event store, on one `InMemoryStore`."""

    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.quarantine = InMemoryQuarantine(self.store)
        self.events = InMemoryEventStore(self.store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)


def stored_events(kind: AggregateKind, *, changed: bool = False,
                  created: datetime | None = None) -> list[dict[str, Any]]:
    """The event documents of a new aggregate, changed once if `changed` (creation time
    overridden when `created` is given)."""
    aggregate = kind.new()
    if changed:
        kind.change(aggregate)
    docs = event_documents(aggregate, ttl_seconds=600)
    if created is not None:
        for doc in docs:
            doc["data"]["createdAt"] = created.isoformat()
    return docs


class QuarantineContract:
    """The quarantine (put, get, list, replays, discard) and the stored events a re-drive
    reads."""

    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> QuarantineWorld: ...

    @pytest.fixture
    @abc.abstractmethod
    def kind(self) -> AggregateKind: ...

    def test_a_put_event_reads_back_with_its_reason_once(
        self, world: QuarantineWorld, kind: AggregateKind
    ) -> None:
        doc = stored_events(kind, changed=True)[1]
        world.quarantine.put(outbox_record(doc), reason="too large")
        world.quarantine.put(outbox_record(doc), reason="too large")
        entry = world.quarantine.get(doc["id"])
        assert (entry.event_id, entry.aggregate_id, entry.action, entry.version) == (
            doc["id"], doc["partitionKey"], kind.actions[1], 2)
        assert entry.aggregate_type == kind.type().aggregate_type
        assert (entry.reason, entry.replays, entry.resolved) == ("too large", 0, False)
        assert entry.quarantined_at is not None
        assert isinstance(entry.event, OutboxRecord)
        assert entry.event.body == outbox_record(doc).body
        assert world.quarantine.count() == 1

    def test_an_unreadable_event_keeps_what_can_be_read(
        self, world: QuarantineWorld, kind: AggregateKind
    ) -> None:
        doc = stored_events(kind)[0]
        doc["data"].pop("action")
        world.quarantine.put(unreadable(doc, "no action"), reason="no action")
        entry = world.quarantine.get(doc["id"])
        assert isinstance(entry.event, Unreadable)
        assert (entry.aggregate_id, entry.version, entry.action) == (doc["partitionKey"], 1, None)

    def test_an_unknown_event_is_not_found(self, world: QuarantineWorld) -> None:
        with pytest.raises(NotFoundError):
            world.quarantine.get("no-such-event")

    def test_pages_list_every_record_once(
        self, world: QuarantineWorld, kind: AggregateKind
    ) -> None:
        ids = set()
        for _ in range(5):
            doc = stored_events(kind)[0]
            ids.add(doc["id"])
            world.quarantine.put(outbox_record(doc), reason="r")
        seen: list[str] = []
        token = None
        for _ in range(10):
            page = world.quarantine.list_page(page_size=2, continuation=token)
            assert len(page.items) <= 2
            seen += [e.event_id for e in page.items]
            token = page.continuation_token
            if token is None:
                break
        assert sorted(seen) == sorted(ids)

    def test_a_replay_resolves_or_keeps_the_record_and_counts(
        self, world: QuarantineWorld, kind: AggregateKind
    ) -> None:
        first, second = stored_events(kind)[0], stored_events(kind)[0]
        for doc in (first, second):
            world.quarantine.put(outbox_record(doc), reason="too large")
        failed = world.quarantine.replayed(world.quarantine.get(first["id"]), resolved=False,
                                           reason="still too large", ttl_seconds=60)
        assert (failed.reason, failed.replays, failed.resolved) == ("still too large", 1, False)
        entry = world.quarantine.get(second["id"])
        done = world.quarantine.replayed(entry, resolved=True, reason="", ttl_seconds=60)
        assert (done.replays, done.resolved) == (1, True)
        assert done.quarantined_at == entry.quarantined_at
        assert world.quarantine.get(second["id"]).resolved
        assert world.quarantine.count() == 1

    def test_set_aside_again_it_keeps_its_history_and_is_quarantined_again(
        self, world: QuarantineWorld, kind: AggregateKind
    ) -> None:
        doc = stored_events(kind)[0]
        world.quarantine.put(outbox_record(doc), reason="too large")
        first = world.quarantine.get(doc["id"])
        world.quarantine.replayed(first, resolved=True, reason="", ttl_seconds=60)
        world.quarantine.put(outbox_record(doc), reason="too large again")  # still failing
        again = world.quarantine.get(doc["id"])
        assert (again.reason, again.replays, again.resolved) == ("too large again", 1, False)
        assert again.quarantined_at == first.quarantined_at
        assert world.quarantine.count() == 1

    def test_a_discarded_record_is_gone(
        self, world: QuarantineWorld, kind: AggregateKind
    ) -> None:
        doc = stored_events(kind)[0]
        world.quarantine.put(outbox_record(doc), reason="r")
        entry = world.quarantine.get(doc["id"])
        world.quarantine.discard(entry)
        with pytest.raises(NotFoundError):
            world.quarantine.get(doc["id"])
        with pytest.raises(NotFoundError):
            world.quarantine.discard(entry)
        assert world.quarantine.count() == 0

    def test_events_since_selects_by_creation_time_and_aggregate(
        self, world: QuarantineWorld, kind: AggregateKind
    ) -> None:
        t = datetime.now(UTC) - timedelta(minutes=10)
        old = stored_events(kind, changed=True, created=t - timedelta(seconds=1))
        at_t = stored_events(kind, changed=True, created=t)
        new = stored_events(kind, changed=True)
        for doc in old + at_t + new:
            world.plant(doc)
        found = {e.event_id for e in world.events.events_since(t)}
        assert {d["id"] for d in at_t + new} <= found
        assert not {d["id"] for d in old} & found
        one = world.events.events_since(t, aggregate_id=new[0]["partitionKey"])
        assert sorted(e.event_id for e in one) == sorted(d["id"] for d in new)
        typed = world.events.events_since(t, aggregate_type=kind.type().aggregate_type)
        assert {d["id"] for d in at_t + new} <= {e.event_id for e in typed}
        assert world.events.events_since(t, aggregate_type="noSuchType") == []


class PayloadWorld(abc.ABC):
    """What the payload store contract runs against: the store, a reference of another store
    (or container) of the same kind, and a way to take the store down for a while."""

    store: PayloadStore
    #: a well-formed reference this store does not hold (another container or account)
    foreign_reference: str

    @abc.abstractmethod
    def outage(self) -> contextlib.AbstractContextManager[None]:
        """The store is unreachable inside the block, and back after it."""


class InMemoryPayloadWorld(PayloadWorld):
    """The in-memory payload store; its foreign reference is another in-memory store's."""

    def __init__(self) -> None:
        self.store = self.payloads = InMemoryPayloadStore()
        self.foreign_reference = InMemoryPayloadStore().reference("kind/id/event")

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        self.payloads.unavailable = True
        try:
            yield
        finally:
            self.payloads.unavailable = False


def _payload_record(aggregate_type: str = "manuscript", aggregate_id: str | None = None,
                    event_id: str | None = None) -> OutboxRecord:
    return OutboxRecord(event_id=event_id or str(uuid.uuid4()), aggregate_type=aggregate_type,
                        aggregate_id=aggregate_id or str(uuid.uuid4()), action="Revised",
                        version=1, event_source="/manuscripts", body=b"{}")


class PayloadStoreContract:
    """The claim check's payload store: what the relay puts under an event's name comes back,
    byte for byte, by its reference; retries overwrite; nothing else is fetched."""

    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> PayloadWorld: ...

    def test_a_body_comes_back_byte_for_byte_by_its_reference(self, world: PayloadWorld) -> None:
        name = payload_name(_payload_record())
        body = (b'{"text":"' + bytes(range(32, 127)) * 16_000 + b'"}')  # ~1.5 MB
        reference = world.store.reference(name)
        world.store.put(name, body, content_type="application/json")
        assert world.store.get(reference) == body
        assert world.store.reference(name) == reference  # the same for every retry

    def test_a_reference_is_known_before_the_body_is_stored(self, world: PayloadWorld) -> None:
        name = payload_name(_payload_record())
        reference = world.store.reference(name)
        with pytest.raises(PayloadNotFoundError):
            world.store.get(reference)
        world.store.put(name, b"{}", content_type="application/json")
        assert world.store.get(reference) == b"{}"

    def test_a_retry_overwrites_the_same_name(self, world: PayloadWorld) -> None:
        name = payload_name(_payload_record())
        world.store.put(name, b'{"a":1}', content_type="application/json")
        world.store.put(name, b'{"a":1}', content_type="application/json")
        assert world.store.get(world.store.reference(name)) == b'{"a":1}'
        world.store.put(name, b'{"a":2}', content_type="application/json")
        assert world.store.get(world.store.reference(name)) == b'{"a":2}'

    def test_each_event_has_a_name_of_its_own_whatever_its_ids(self, world: PayloadWorld) -> None:
        records = [_payload_record("a", "b/c", "d"), _payload_record("a/b", "c", "d"),
                   _payload_record("a", "b", "c/d"), _payload_record("a", "b c%2F", "d?x#y")]
        names = [payload_name(r) for r in records]
        assert len(set(names)) == len(names)
        assert len({world.store.reference(n) for n in names}) == len(names)
        for i, name in enumerate(names):
            world.store.put(name, b'{"i":%d}' % i, content_type="application/json")
        for i, name in enumerate(names):
            assert world.store.get(world.store.reference(name)) == b'{"i":%d}' % i

    def test_a_reference_of_another_store_is_refused_not_fetched(
        self, world: PayloadWorld
    ) -> None:
        for reference in (world.foreign_reference, "https://attacker.example/outbox/x",
                          "not a url", world.store.reference("x") + "?sig=abc",
                          world.store.reference("a/../../other-container/x")):
            with pytest.raises(PayloadReferenceError):
                world.store.get(reference)

    def test_a_store_that_is_down_fails_both_ways_and_works_again_after(
        self, world: PayloadWorld
    ) -> None:
        name = payload_name(_payload_record())
        world.store.put(name, b"{}", content_type="application/json")
        with world.outage():
            with pytest.raises(PayloadStoreError) as put_failed:
                world.store.put(name, b"{}", content_type="application/json")
            assert not isinstance(put_failed.value, PayloadNotFoundError)
            with pytest.raises(PayloadStoreError) as get_failed:
                world.store.get(world.store.reference(name))
            assert not isinstance(get_failed.value, PayloadNotFoundError)
        world.store.put(name, b"[]", content_type="application/json")
        assert world.store.get(world.store.reference(name)) == b"[]"
