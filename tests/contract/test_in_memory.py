"""The in-memory fake held to the unit-of-work contract."""

from __future__ import annotations

from typing import Any

import pytest

from application.contacts.ports import ContactList
from tests.contract.quarantine_contract import QuarantineContract, QuarantineWorld
from tests.contract.unit_of_work_contract import ContractWorld, UnitOfWorkContract
from tests.fakes import (
    InMemoryContactList,
    InMemoryEventStore,
    InMemoryQuarantine,
    InMemoryStore,
    uow_factory,
)


class InMemoryWorld(ContractWorld):
    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.uow = uow_factory(self.store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return [d for (pk, _), d in self.store.documents.items() if pk == partition_key]

    def contact_list(self) -> ContactList:
        return InMemoryContactList(self.store)


class TestInMemoryUnitOfWork(UnitOfWorkContract):
    @pytest.fixture
    def world(self) -> ContractWorld:
        return InMemoryWorld()


class InMemoryQuarantineWorld(QuarantineWorld):
    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.quarantine = InMemoryQuarantine(self.store)
        self.events = InMemoryEventStore(self.store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)


class TestInMemoryQuarantine(QuarantineContract):
    @pytest.fixture
    def world(self) -> QuarantineWorld:
        return InMemoryQuarantineWorld()
