"""cosmos-outbox's contract suites, driven with the order, on the in-memory store (run them on
the Cosmos DB adapters too by giving them a world on a real container)."""

from __future__ import annotations

import pytest

from cosmos_outbox_testing.contracts import (
    AggregateExample,
    InMemoryStoreWorld,
    QuarantineContract,
    StoreWorld,
    WritePathContract,
    examples,
)
from orders.domain import Order

ORDER = AggregateExample(
    "order",
    lambda: Order.place(customer_name="Ada", total_cents=1250),
    change=Order.cancel,
    actions=("OrderPlaced", "OrderCancelled"),
)


class TestInMemoryWritePath(WritePathContract):
    """The write path's suite: the order's changes, and transactions, on the store."""

    example = examples(ORDER)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()


class TestInMemoryQuarantine(QuarantineContract):
    example = examples(ORDER)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()
