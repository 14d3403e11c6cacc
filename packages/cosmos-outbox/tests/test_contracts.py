"""The test kit's fakes held to the package's contract suites (the Cosmos DB adapters are held
to the same suites on a real endpoint by the apps that use them)."""

from __future__ import annotations

import pytest
from tickets import TICKET

from cosmos_outbox.testing.contracts import (
    IdempotencyContract,
    InMemoryPayloadWorld,
    InMemoryStoreWorld,
    PayloadStoreContract,
    PayloadWorld,
    QuarantineContract,
    SessionContract,
    StoreWorld,
    UnitOfWorkContract,
    examples,
)


class TestInMemoryUnitOfWork(UnitOfWorkContract):
    example = examples(TICKET)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()


class TestInMemoryIdempotency(IdempotencyContract):
    example = examples(TICKET)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()


class TestInMemoryQuarantine(QuarantineContract):
    example = examples(TICKET)

    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()


class TestInMemoryPayloadStore(PayloadStoreContract):
    @pytest.fixture
    def world(self) -> PayloadWorld:
        return InMemoryPayloadWorld()


class TestInMemorySession(SessionContract):
    @pytest.fixture
    def world(self) -> StoreWorld:
        return InMemoryStoreWorld()
