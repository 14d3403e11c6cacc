"""The test kit's fakes held to the package's contract suites (the Cosmos DB adapters are held
to the same suites on a real endpoint by the apps that use them)."""

from __future__ import annotations

import pytest
from tickets import TICKET

from cosmos_outbox.testing._contracts import (
    IdempotencyContract,
    InMemoryPayloadWorld,
    InMemoryQuarantineWorld,
    InMemoryStoreWorld,
    PayloadStoreContract,
    PayloadWorld,
    QuarantineContract,
    QuarantineWorld,
    StoreWorld,
    UnitOfWorkContract,
    kinds,
)


class TestInMemoryUnitOfWork(UnitOfWorkContract):
    kind = kinds(TICKET)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()


class TestInMemoryIdempotency(IdempotencyContract):
    kind = kinds(TICKET)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()


class TestInMemoryQuarantine(QuarantineContract):
    kind = kinds(TICKET)

    @pytest.fixture
    def world(self) -> QuarantineWorld:
        return InMemoryQuarantineWorld()


class TestInMemoryPayloadStore(PayloadStoreContract):
    @pytest.fixture
    def world(self) -> PayloadWorld:
        return InMemoryPayloadWorld()
