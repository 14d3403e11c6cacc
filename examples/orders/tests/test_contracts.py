"""cosmos-outbox's contract suites, driven with the order, on the in-memory fakes (run them on
the Cosmos DB adapters too by giving them a world on a real container)."""

from __future__ import annotations

import pytest

from cosmos_outbox.testing._contracts import (
    AggregateKind,
    IdempotencyContract,
    InMemoryQuarantineWorld,
    InMemoryStoreWorld,
    QuarantineContract,
    QuarantineWorld,
    StoreWorld,
    UnitOfWorkContract,
    kinds,
)
from orders.domain import Order

ORDER = AggregateKind("order", lambda: Order.place(customer_name="Ada", total_cents=1250),
                      change=Order.cancel, actions=("OrderPlaced", "OrderCancelled"))


class TestInMemoryUnitOfWork(UnitOfWorkContract):
    kind = kinds(ORDER)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()


class TestInMemoryIdempotency(IdempotencyContract):
    kind = kinds(ORDER)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()


class TestInMemoryQuarantine(QuarantineContract):
    kind = kinds(ORDER)

    @pytest.fixture
    def world(self) -> QuarantineWorld:
        return InMemoryQuarantineWorld()
