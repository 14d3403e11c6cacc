"""The Contacts app's store contract: cosmos-outbox's unit-of-work and quarantine suites
(`cosmos_outbox_testing.contracts`) driven with the contact, and what only the app has (several
changes in one commit, the contact list). Subclassed for each implementation: the in-memory
fakes (tests/contacts/store/test_in_memory.py) and the Cosmos DB adapters on a real endpoint
(tests/contacts/store/test_cosmos_write_path.py). The idempotency
suite (Idempotency-Key records in the change's batch, racing retries, TTL) is part of it."""

from __future__ import annotations

import abc
from typing import cast

import pytest

from application.contacts.ports import ContactList, ContactSummary
from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.ports import Page
from cosmos_outbox_testing.contracts import (
    AggregateExample,
    IdempotencyContract,
    QuarantineContract,
    StoreWorld,
    UnitOfWorkContract,
    events_of,
    examples,
    saved,
)
from domain.contact import Contact
from domain.values import Company, Name


def new_contact(first: str = "Ada", email: str = "ada@example.com") -> Contact:
    return Contact.create(
        name=Name(first_name=first, last_name="Lovelace"),
        email=email,
        company=Company(company_name="Analytical Engines"),
    )


CONTACT = AggregateExample(
    "contact",
    new_contact,
    change=lambda c: c.rename(Name(first_name="Changed", last_name=c.name.last_name)),
    actions=("ContactCreatedEvent", "ContactNameUpdatedEvent"),
)


class ContactsWorld(StoreWorld):
    """A store world with the app's contact list on the same store (its pages awaited by the
    world's `run`)."""

    @abc.abstractmethod
    def contact_list(self) -> ContactList:
        """The list of live contacts, on the same store."""

    def list_page(self, *, page_size: int, continuation: str | None) -> Page[ContactSummary]:
        return cast(
            Page[ContactSummary],
            self.run(self.contact_list().list_page(page_size=page_size, continuation=continuation)),
        )


class ContactsStoreContract(UnitOfWorkContract, IdempotencyContract):
    example = examples(CONTACT)

    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> ContactsWorld: ...

    def test_one_commit_raises_one_event_per_change_in_order(self, world: ContactsWorld) -> None:
        contact = saved(world, new_contact())
        with world.uow() as uow:
            loaded = uow.repository(Contact).get(contact.id)
            loaded.rename(Name(first_name="Augusta", last_name="King"))
            loaded.change_email("augusta@example.com")
            uow.commit(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        events = events_of(world, contact.id)
        assert [e["action"] for e in events] == [
            "ContactCreatedEvent",
            "ContactNameUpdatedEvent",
            "ContactEmailUpdatedEvent",
        ]
        assert [e["version"] for e in events] == [1, 2, 3]
        assert all(e["traceparent"].startswith("00-0af7651916cd43dd") for e in events[1:])
        with world.uow() as uow:
            assert uow.repository(Contact).get(contact.id).version == 3

    def test_pages_through_live_contacts_with_a_continuation(self, world: ContactsWorld) -> None:
        ids = {
            saved(world, new_contact(first=f"P{i}", email=f"p{i}@example.com")).id for i in range(5)
        }
        deleted = saved(world, new_contact(first="Gone", email="gone@example.com"))
        with world.uow() as uow:
            uow.repository(Contact).get(deleted.id).delete()
            uow.commit()
        seen = []
        token: str | None = None
        for _ in range(10):
            page = world.list_page(page_size=2, continuation=token)
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

    def test_a_garbage_continuation_is_refused(self, world: ContactsWorld) -> None:
        with pytest.raises(InvalidContinuationError):
            world.list_page(page_size=2, continuation="garbage{}")


class ContactsQuarantineContract(QuarantineContract):
    example = examples(CONTACT)
