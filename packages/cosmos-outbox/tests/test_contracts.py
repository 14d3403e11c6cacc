"""The test kit's fakes held to the package's contract suites (the Cosmos DB adapters are held
to the same suites on a real endpoint by the apps that use them)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from tickets import TICKET

from cosmos_outbox.testing import (
    InMemoryEventStore,
    InMemoryPayloadStore,
    InMemoryQuarantine,
    InMemoryStore,
    uow_factory,
)
from cosmos_outbox.testing.contracts import (
    IdempotencyContract,
    PayloadStoreContract,
    PayloadWorld,
    QuarantineContract,
    QuarantineWorld,
    StoreWorld,
    UnitOfWorkContract,
    kinds,
)


class InMemoryWorld(StoreWorld):
    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.uow = uow_factory(self.store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return [d for (pk, _), d in self.store.documents.items() if pk == partition_key]

    def expire(self, partition_key: str, document_id: str) -> None:
        self.store.outlive(partition_key, document_id)


class TestInMemoryUnitOfWork(UnitOfWorkContract):
    kind = kinds(TICKET)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryWorld()


class TestInMemoryIdempotency(IdempotencyContract):
    kind = kinds(TICKET)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryWorld()


class InMemoryQuarantineWorld(QuarantineWorld):
    def __init__(self) -> None:
        store = InMemoryStore()
        self.store = store
        self.quarantine = InMemoryQuarantine(store)
        self.events = InMemoryEventStore(store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)


class TestInMemoryQuarantine(QuarantineContract):
    kind = kinds(TICKET)

    @pytest.fixture
    def world(self) -> QuarantineWorld:
        return InMemoryQuarantineWorld()


class InMemoryPayloadWorld(PayloadWorld):
    def __init__(self) -> None:
        self.store = self.payloads = InMemoryPayloadStore()
        self.foreign_reference = InMemoryPayloadStore().reference("ticket/t1/e1")

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        self.payloads.unavailable = True
        try:
            yield
        finally:
            self.payloads.unavailable = False


class TestInMemoryPayloadStore(PayloadStoreContract):
    @pytest.fixture
    def world(self) -> PayloadWorld:
        return InMemoryPayloadWorld()
