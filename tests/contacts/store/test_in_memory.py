"""cosmos-outbox's in-memory fakes and the app's in-memory contact list, held to the app's
store contract (the Cosmos DB adapters are held to the same one in
tests/contacts/store/test_cosmos_write_path.py)."""

from __future__ import annotations

import pytest

from application.contacts.ports import ContactList
from cosmos_outbox_testing.contracts import InMemoryStoreWorld, StoreWorld
from tests.contacts.fakes import InMemoryContactList
from tests.contacts.store.unit_of_work_contract import (
    ContactsQuarantineContract,
    ContactsStoreContract,
    ContactsWorld,
)


class InMemoryWorld(InMemoryStoreWorld, ContactsWorld):
    def contact_list(self) -> ContactList:
        return InMemoryContactList(self.memory)


class TestInMemoryStore(ContactsStoreContract):
    @pytest.fixture
    def world(self) -> ContactsWorld:
        return InMemoryWorld()


class TestInMemoryQuarantine(ContactsQuarantineContract):
    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()
