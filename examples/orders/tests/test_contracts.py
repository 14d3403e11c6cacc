"""cosmos-outbox's contract suites, driven with the order, on the in-memory fakes (run them on
the Cosmos DB adapters too by giving them a world on a real container)."""

from __future__ import annotations

from typing import Any

import pytest

from cosmos_outbox.testing import (
    InMemoryEventStore,
    InMemoryQuarantine,
    InMemoryStore,
    uow_factory,
)
from cosmos_outbox.testing.contracts import (
    AggregateKind,
    IdempotencyContract,
    QuarantineContract,
    QuarantineWorld,
    StoreWorld,
    UnitOfWorkContract,
    kinds,
)
from orders.domain import Order

ORDER = AggregateKind("order", lambda: Order.place(customer_name="Ada", total_cents=1250),
                      change=Order.cancel, actions=("OrderPlaced", "OrderCancelled"))


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
    kind = kinds(ORDER)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryWorld()


class TestInMemoryIdempotency(IdempotencyContract):
    kind = kinds(ORDER)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryWorld()


class InMemoryQuarantineWorld(QuarantineWorld):
    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.quarantine = InMemoryQuarantine(self.store)
        self.events = InMemoryEventStore(self.store)

    def plant(self, document: dict[str, Any]) -> None:
        self.store.put(document)


class TestInMemoryQuarantine(QuarantineContract):
    kind = kinds(ORDER)

    @pytest.fixture
    def world(self) -> QuarantineWorld:
        return InMemoryQuarantineWorld()
