"""The unit-of-work contract, written once. Subclass it and provide the `world` fixture for each
implementation: the in-memory fake here (tests/contract/test_in_memory.py) and the Cosmos
adapter on a real endpoint (tests/integration/test_cosmos_unit_of_work.py)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import pytest

from application.errors import (
    AlreadyExistsError,
    ContactNotFoundError,
    InvalidContinuationError,
    PreconditionFailedError,
)
from application.outbox import EVENT_TYPE
from application.ports import UnitOfWork
from domain.contact import Contact
from domain.values import Company, Name


class ContractWorld(abc.ABC):
    """What the contract needs from an implementation besides the port itself."""

    uow: Callable[[], UnitOfWork]

    @abc.abstractmethod
    def plant(self, document: dict[str, Any]) -> None:
        """Write a raw document behind the unit of work's back (to inject a real failure)."""

    @abc.abstractmethod
    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        """Every document stored in one partition."""


def new_contact(first: str = "Ada", email: str = "ada@example.com") -> Contact:
    return Contact.create(
        name=Name(first_name=first, last_name="Lovelace"),
        email=email,
        company=Company(company_name="Analytical Engines"),
    )


def saved(world: ContractWorld, contact: Contact | None = None) -> Contact:
    contact = contact or new_contact()
    with world.uow() as uow:
        uow.contacts.add(contact)
        uow.commit()
    return contact


class UnitOfWorkContract:
    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> ContractWorld: ...

    def test_commit_writes_the_contact_and_its_event_in_one_partition(
        self, world: ContractWorld
    ) -> None:
        contact = saved(world)
        docs = world.documents(contact.id)
        kinds = sorted(d["type"] for d in docs)
        assert kinds == ["contact", EVENT_TYPE]
        event = next(d for d in docs if d["type"] == EVENT_TYPE)
        assert event["partitionKey"] == contact.id
        assert event["data"]["action"] == "ContactCreatedEvent"
        assert event["data"]["version"] == 1
        assert event["ttl"] > 0

    def test_reads_back_what_was_committed_with_an_etag(self, world: ContractWorld) -> None:
        contact = saved(world)
        with world.uow() as uow:
            loaded = uow.contacts.get(contact.id)
            assert uow.contacts.etag(contact.id)
        assert loaded.name == contact.name
        assert loaded.email == contact.email
        assert loaded.version == 1
        assert loaded.events == []

    def test_nothing_is_written_without_commit(self, world: ContractWorld) -> None:
        contact = new_contact()
        with world.uow() as uow:
            uow.contacts.add(contact)
        assert world.documents(contact.id) == []
        with world.uow() as uow, pytest.raises(ContactNotFoundError):
            uow.contacts.get(contact.id)

    def test_missing_contact_is_not_found(self, world: ContractWorld) -> None:
        with world.uow() as uow, pytest.raises(ContactNotFoundError):
            uow.contacts.get("no-such-contact")

    def test_an_update_replaces_the_contact_and_adds_one_event_per_change(
        self, world: ContractWorld
    ) -> None:
        contact = saved(world)
        with world.uow() as uow:
            loaded = uow.contacts.get(contact.id)
            before = uow.contacts.etag(contact.id)
            loaded.rename(Name(first_name="Augusta", last_name="King"))
            loaded.change_email("augusta@example.com")
            uow.commit(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            assert uow.contacts.etag(contact.id) != before
        events = sorted(
            (d["data"] for d in world.documents(contact.id) if d["type"] == EVENT_TYPE),
            key=lambda e: e["version"],
        )
        assert [e["action"] for e in events] == [
            "ContactCreatedEvent", "ContactNameUpdatedEvent", "ContactEmailUpdatedEvent",
        ]
        assert [e["version"] for e in events] == [1, 2, 3]
        assert events[1]["traceparent"].startswith("00-0af7651916cd43dd")
        with world.uow() as uow:
            assert uow.contacts.get(contact.id).version == 3

    def test_a_stale_etag_is_refused_and_nothing_is_written(self, world: ContractWorld) -> None:
        contact = saved(world)
        first, second = world.uow(), world.uow()
        a = first.contacts.get(contact.id)
        b = second.contacts.get(contact.id)
        a.rename(Name(first_name="First", last_name="Writer"))
        first.commit()
        b.rename(Name(first_name="Second", last_name="Writer"))
        with pytest.raises(PreconditionFailedError):
            second.commit()
        with world.uow() as uow:
            assert uow.contacts.get(contact.id).name.first_name == "First"
        events = [d for d in world.documents(contact.id) if d["type"] == EVENT_TYPE]
        assert len(events) == 2  # created + the first writer's rename only

    def test_a_failing_operation_leaves_nothing_of_the_batch_written(
        self, world: ContractWorld
    ) -> None:
        contact = new_contact()
        event_id = contact.events[0].id
        # A document with the event's id already in the partition: the event's create fails.
        world.plant({"id": event_id, "partitionKey": contact.id, "type": "blocker", "ttl": -1})
        with world.uow() as uow:
            uow.contacts.add(contact)
            with pytest.raises(AlreadyExistsError):
                uow.commit()
        assert [d["type"] for d in world.documents(contact.id)] == ["blocker"]
        with world.uow() as uow, pytest.raises(ContactNotFoundError):
            uow.contacts.get(contact.id)

    def test_creating_an_existing_contact_conflicts(self, world: ContractWorld) -> None:
        contact = saved(world)
        twin = new_contact()
        twin.id = contact.id
        with world.uow() as uow:
            uow.contacts.add(twin)
            with pytest.raises(AlreadyExistsError):
                uow.commit()

    def test_an_unchanged_contact_writes_nothing(self, world: ContractWorld) -> None:
        contact = saved(world)
        with world.uow() as uow:
            loaded = uow.contacts.get(contact.id)
            etag = uow.contacts.etag(contact.id)
            loaded.rename(contact.name)
            uow.commit()
            assert uow.contacts.etag(contact.id) == etag
        assert len(world.documents(contact.id)) == 2

    def test_pages_through_live_contacts_with_a_continuation(self, world: ContractWorld) -> None:
        ids = {saved(world, new_contact(first=f"P{i}", email=f"p{i}@example.com")).id
               for i in range(5)}
        deleted = saved(world, new_contact(first="Gone", email="gone@example.com"))
        with world.uow() as uow:
            uow.contacts.get(deleted.id).delete()
            uow.commit()
        seen: list[str] = []
        token: str | None = None
        for _ in range(10):
            with world.uow() as uow:
                page = uow.contacts.list_page(page_size=2, continuation=token)
            assert len(page.items) <= 2
            seen += [item.id for item in page.items]
            token = page.continuation_token
            if token is None:
                break
        assert set(seen) >= ids
        assert len(seen) == len(set(seen))
        assert deleted.id not in seen
        item = next(i for i in [*page.items] if i.id in ids) if page.items else None
        if item is not None:
            assert item.full_name.endswith("Lovelace")
            assert item.company_name == "Analytical Engines"

    def test_a_garbage_continuation_is_refused(self, world: ContractWorld) -> None:
        with world.uow() as uow, pytest.raises(InvalidContinuationError):
            uow.contacts.list_page(page_size=2, continuation="garbage{}")
