"""The unit-of-work contract, written once. Subclass it and provide the `world` fixture for each
implementation: the in-memory fake (tests/contract/test_in_memory.py) and the Cosmos adapter on
a real endpoint (tests/integration/test_cosmos_write_path.py).

The generic part runs for every aggregate kind: Contact, and Ticket, an aggregate defined only
in the tests (tests/tickets.py), which the unit of work handles with no code of its own."""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from application.contacts.ports import ContactList
from application.errors import (
    AlreadyExistsError,
    InvalidContinuationError,
    NotFoundError,
    PreconditionFailedError,
)
from application.ports import UnitOfWork
from domain.aggregate import Aggregate
from domain.contact import Contact
from domain.values import Company, Name
from infra.cosmos.documents import EVENT_TYPE
from tests.tickets import Ticket


class ContractWorld(abc.ABC):
    """What the contract needs from an implementation besides the port itself."""

    uow: Callable[[], UnitOfWork]

    @abc.abstractmethod
    def plant(self, document: dict[str, Any]) -> None:
        """Write a raw document behind the unit of work's back (to inject a real failure)."""

    @abc.abstractmethod
    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        """Every document stored in one partition."""

    @abc.abstractmethod
    def contact_list(self) -> ContactList:
        """The list of live contacts, on the same store."""


def new_contact(first: str = "Ada", email: str = "ada@example.com") -> Contact:
    return Contact.create(
        name=Name(first_name=first, last_name="Lovelace"),
        email=email,
        company=Company(company_name="Analytical Engines"),
    )


@dataclass(frozen=True)
class Kind:
    """One aggregate kind as the generic contract drives it."""

    name: str
    new: Callable[[], Aggregate]
    change: Callable[[Any, str], None]  # one change raising one event; the text tells writers
    read: Callable[[Any], str]  # what `change` set
    actions: tuple[str, str]  # the creation event's action, the change's

    def kind(self) -> type[Aggregate]:
        return type(self.new())


KINDS = [
    Kind("contact", new_contact,
         lambda c, text: c.rename(Name(first_name=text, last_name=c.name.last_name)),
         lambda c: c.name.first_name, ("ContactCreatedEvent", "ContactNameUpdatedEvent")),
    Kind("ticket", lambda: Ticket.open("Printer on fire"), lambda t, text: t.retitle(text),
         lambda t: t.title, ("TicketOpenedEvent", "TicketRetitledEvent")),
]


def saved(world: ContractWorld, aggregate: Aggregate | None = None) -> Any:
    aggregate = aggregate or new_contact()
    with world.uow() as uow:
        uow.repository(type(aggregate)).add(aggregate)
        uow.commit()
    return aggregate


def events_of(world: ContractWorld, partition_key: str) -> list[dict[str, Any]]:
    return sorted(
        (d["data"] for d in world.documents(partition_key) if d["type"] == EVENT_TYPE),
        key=lambda e: e["version"],
    )


class UnitOfWorkContract:
    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> ContractWorld: ...

    @pytest.fixture(params=KINDS, ids=lambda k: k.name)
    def kind(self, request: pytest.FixtureRequest) -> Kind:
        return request.param  # type: ignore[no-any-return]

    # ---- every aggregate kind ----

    def test_commit_writes_the_aggregate_and_its_event_in_one_partition(
        self, world: ContractWorld, kind: Kind
    ) -> None:
        aggregate = saved(world, kind.new())
        docs = world.documents(aggregate.id)
        assert sorted(d["type"] for d in docs) == sorted([aggregate.aggregate_type, EVENT_TYPE])
        event = next(d for d in docs if d["type"] == EVENT_TYPE)
        assert event["partitionKey"] == aggregate.id
        assert event["aggregateType"] == aggregate.aggregate_type
        assert event["data"][f"{aggregate.aggregate_type}Id"] == aggregate.id
        assert event["data"]["action"] == kind.actions[0]
        assert event["data"]["version"] == 1
        assert event["ttl"] > 0

    def test_reads_back_exactly_what_was_committed_with_an_etag(
        self, world: ContractWorld, kind: Kind
    ) -> None:
        aggregate = saved(world, kind.new())
        with world.uow() as uow:
            loaded = uow.repository(type(aggregate)).get(aggregate.id)
            assert uow.repository(type(aggregate)).etag(aggregate.id)
        assert loaded.model_dump() == aggregate.model_dump()
        assert loaded.events == []

    def test_nothing_is_written_without_commit(self, world: ContractWorld, kind: Kind) -> None:
        aggregate = kind.new()
        with world.uow() as uow:
            uow.repository(type(aggregate)).add(aggregate)
        assert world.documents(aggregate.id) == []
        with world.uow() as uow, pytest.raises(NotFoundError):
            uow.repository(type(aggregate)).get(aggregate.id)

    def test_a_missing_aggregate_is_not_found_by_its_type_and_id(
        self, world: ContractWorld, kind: Kind
    ) -> None:
        with world.uow() as uow, pytest.raises(NotFoundError) as info:
            uow.repository(kind.kind()).get("no-such-aggregate")
        assert info.value.aggregate_type == kind.kind().aggregate_type
        assert info.value.aggregate_id == "no-such-aggregate"

    def test_a_change_replaces_the_aggregate_and_adds_one_event(
        self, world: ContractWorld, kind: Kind
    ) -> None:
        aggregate = saved(world, kind.new())
        with world.uow() as uow:
            repository = uow.repository(type(aggregate))
            loaded = repository.get(aggregate.id)
            before = repository.etag(aggregate.id)
            kind.change(loaded, "Changed")
            uow.commit()
            assert repository.etag(aggregate.id) != before
        assert [e["action"] for e in events_of(world, aggregate.id)] == list(kind.actions)
        with world.uow() as uow:
            reloaded = uow.repository(type(aggregate)).get(aggregate.id)
        assert (kind.read(reloaded), reloaded.version) == ("Changed", 2)

    def test_a_stale_etag_is_refused_and_nothing_is_written(
        self, world: ContractWorld, kind: Kind
    ) -> None:
        aggregate = saved(world, kind.new())
        first, second = world.uow(), world.uow()
        a = first.repository(type(aggregate)).get(aggregate.id)
        b = second.repository(type(aggregate)).get(aggregate.id)
        kind.change(a, "First")
        first.commit()
        kind.change(b, "Second")
        with pytest.raises(PreconditionFailedError):
            second.commit()
        with world.uow() as uow:
            assert kind.read(uow.repository(type(aggregate)).get(aggregate.id)) == "First"
        assert len(events_of(world, aggregate.id)) == 2  # created + the first writer's only

    def test_a_failing_operation_leaves_nothing_of_the_batch_written(
        self, world: ContractWorld, kind: Kind
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
        self, world: ContractWorld, kind: Kind
    ) -> None:
        aggregate = saved(world, kind.new())
        twin = kind.new()
        twin.id = aggregate.id
        with world.uow() as uow:
            uow.repository(type(twin)).add(twin)
            with pytest.raises(AlreadyExistsError):
                uow.commit()

    def test_an_unchanged_aggregate_writes_nothing(self, world: ContractWorld, kind: Kind) -> None:
        aggregate = saved(world, kind.new())
        with world.uow() as uow:
            repository = uow.repository(type(aggregate))
            loaded = repository.get(aggregate.id)
            etag = repository.etag(aggregate.id)
            kind.change(loaded, kind.read(loaded))
            uow.commit()
            assert repository.etag(aggregate.id) == etag
        assert len(world.documents(aggregate.id)) == 2

    def test_an_event_of_one_aggregate_is_no_aggregate_of_another(
        self, world: ContractWorld, kind: Kind
    ) -> None:
        aggregate = saved(world, kind.new())
        event_id = events_of(world, aggregate.id)[0]["id"]
        world.plant({"id": event_id, "partitionKey": event_id, "type": EVENT_TYPE, "data": {},
                     "ttl": -1})
        with world.uow() as uow, pytest.raises(NotFoundError):
            uow.repository(type(aggregate)).get(event_id)

    # ---- contacts ----

    def test_a_unit_of_work_has_one_repository_per_aggregate_type(
        self, world: ContractWorld
    ) -> None:
        with world.uow() as uow:
            assert uow.repository(Contact) is uow.repository(Contact)
            assert uow.repository(Ticket) is not uow.repository(Contact)  # type: ignore[comparison-overlap]

    def test_one_commit_raises_one_event_per_change_with_the_trace_context(
        self, world: ContractWorld
    ) -> None:
        contact = saved(world)
        with world.uow() as uow:
            loaded = uow.repository(Contact).get(contact.id)
            loaded.rename(Name(first_name="Augusta", last_name="King"))
            loaded.change_email("augusta@example.com")
            uow.commit(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        events = events_of(world, contact.id)
        assert [e["action"] for e in events] == [
            "ContactCreatedEvent", "ContactNameUpdatedEvent", "ContactEmailUpdatedEvent",
        ]
        assert [e["version"] for e in events] == [1, 2, 3]
        assert events[0]["traceparent"] is None
        assert events[1]["traceparent"].startswith("00-0af7651916cd43dd")
        with world.uow() as uow:
            assert uow.repository(Contact).get(contact.id).version == 3

    def test_pages_through_live_contacts_with_a_continuation(self, world: ContractWorld) -> None:
        ids = {saved(world, new_contact(first=f"P{i}", email=f"p{i}@example.com")).id
               for i in range(5)}
        deleted = saved(world, new_contact(first="Gone", email="gone@example.com"))
        with world.uow() as uow:
            uow.repository(Contact).get(deleted.id).delete()
            uow.commit()
        seen = []
        token: str | None = None
        for _ in range(10):
            page = world.contact_list().list_page(page_size=2, continuation=token)
            assert len(page.items) <= 2
            seen += [item for item in page.items if item.id in ids | {deleted.id}]
            token = page.continuation_token
            if token is None:
                break
        assert token is None, "the pages never ended"
        assert sorted(item.id for item in seen) == sorted(ids)  # each once, none deleted
        for item in seen:
            assert item.full_name.startswith("P") and item.full_name.endswith(" Lovelace")
            assert item.email == f"{item.full_name.split()[0].lower()}@example.com"
            assert item.company_name == "Analytical Engines"

    def test_a_garbage_continuation_is_refused(self, world: ContractWorld) -> None:
        with pytest.raises(InvalidContinuationError):
            world.contact_list().list_page(page_size=2, continuation="garbage{}")
