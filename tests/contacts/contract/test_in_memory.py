"""cosmos-outbox's in-memory fakes and the app's in-memory contact list, held to the app's
store contract (the Cosmos DB adapters are held to the same one in
tests/contacts/integration)."""

from __future__ import annotations

from typing import Any

import pytest

from application.contacts.ports import ContactList
from cosmos_outbox.testing import (
    InMemoryEventStore,
    InMemoryQuarantine,
    InMemoryStore,
    uow_factory,
)
from cosmos_outbox.testing.contracts import QuarantineWorld
from tests.contacts.contract.unit_of_work_contract import (
    ContactsQuarantineContract,
    ContactsStoreContract,
    ContactsWorld,
)
from tests.contacts.fakes import InMemoryContactList


class InMemoryWorld(ContactsWorld):
    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.uow = uow_factory(self.store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return [d for (pk, _), d in self.store.documents.items() if pk == partition_key]

    def contact_list(self) -> ContactList:
        return InMemoryContactList(self.store)

    def expire(self, partition_key: str, document_id: str) -> None:
        self.store.outlive(partition_key, document_id)


class TestInMemoryStore(ContactsStoreContract):
    @pytest.fixture
    def world(self) -> ContactsWorld:
        return InMemoryWorld()


class InMemoryQuarantineWorld(QuarantineWorld):
    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.quarantine = InMemoryQuarantine(self.store)
        self.events = InMemoryEventStore(self.store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)


class TestInMemoryQuarantine(ContactsQuarantineContract):
    @pytest.fixture
    def world(self) -> QuarantineWorld:
        return InMemoryQuarantineWorld()
