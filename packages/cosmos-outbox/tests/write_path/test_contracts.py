"""The test kit's fakes held to the package's contract suites, through the sync API and through
the async one on an event loop (the Cosmos DB, Blob Storage and Service Bus adapters are held
to the same suites in test_azure_adapters.py): the store's suites, by role (the write side's:
the write path's; one document at a time; the queries'), the quarantine's, the payload store's, the
message publisher's (`FakePublisher`) and the backlog estimator's
(`InMemoryBacklogEstimator`)."""

from __future__ import annotations

from collections.abc import Coroutine, Iterator
from typing import Any

import pytest
from tickets import TICKET

from cosmos_outbox_testing.contracts import (
    BacklogEstimatorContract,
    BacklogWorld,
    DocumentWritesContract,
    EventLoop,
    FakePublisherWorld,
    InMemoryBacklogWorld,
    InMemoryPayloadWorld,
    InMemoryScheduleWorld,
    InMemoryStoreWorld,
    InMemoryTargetRulesWorld,
    OperationStoreContract,
    PayloadStoreContract,
    PayloadWorld,
    PublisherContract,
    PublisherWorld,
    QuarantineContract,
    QueryContract,
    ScheduledEventsContract,
    ScheduleWorld,
    StoreWorld,
    TargetRulesContract,
    TargetRulesWorld,
    WritePathContract,
    examples,
)


class AsyncInMemoryStoreWorld(InMemoryStoreWorld):
    """The in-memory store driven by the async API on an event loop (racers meet on it)."""

    asynchronous = True

    def __init__(self, loop: EventLoop) -> None:
        super().__init__()
        self.loop = loop

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run(coroutine)


@pytest.fixture(scope="module")
def loop() -> Iterator[EventLoop]:
    running = EventLoop()
    yield running
    running.close()


class InMemory:
    """The suites' world: the in-memory store through the sync API, then the async one."""

    @pytest.fixture(params=["sync", "aio"])
    def world(self, request: pytest.FixtureRequest, loop: EventLoop) -> StoreWorld:
        return InMemoryStoreWorld() if request.param == "sync" else AsyncInMemoryStoreWorld(loop)


class TestInMemoryWritePath(InMemory, WritePathContract):
    example = examples(TICKET)


class TestInMemoryQuarantine(InMemory, QuarantineContract):
    example = examples(TICKET)


class TestInMemoryOperationStore(InMemory, OperationStoreContract):
    pass


class TestInMemoryPayloadStore(PayloadStoreContract):
    @pytest.fixture
    def world(self) -> PayloadWorld:
        return InMemoryPayloadWorld()


class TestInMemoryQueries(InMemory, QueryContract):
    pass


class TestInMemoryDocumentWrites(InMemory, DocumentWritesContract):
    pass


class TestInMemoryBacklogEstimator(BacklogEstimatorContract):
    @pytest.fixture(params=["sync", "aio"])
    def world(self, request: pytest.FixtureRequest, loop: EventLoop) -> BacklogWorld:
        if request.param == "sync":
            return InMemoryBacklogWorld()
        return InMemoryBacklogWorld(AsyncInMemoryStoreWorld(loop), asynchronous=True)


class TestFakeTargetRules(TargetRulesContract):
    @pytest.fixture
    def world(self) -> TargetRulesWorld:
        return InMemoryTargetRulesWorld()


class TestFakePublisher(PublisherContract):
    @pytest.fixture(params=["sync", "aio"])
    def world(self, request: pytest.FixtureRequest) -> PublisherWorld:
        return FakePublisherWorld(asynchronous=request.param == "aio")


class TestInMemoryScheduledEvents(ScheduledEventsContract):
    @pytest.fixture(params=["sync", "aio"])
    def world(self, request: pytest.FixtureRequest, loop: EventLoop) -> ScheduleWorld:
        if request.param == "sync":
            return InMemoryScheduleWorld()
        return InMemoryScheduleWorld(AsyncInMemoryStoreWorld(loop))
