"""The ports' contract suites, one per file, written once, to subclass: run them on the
in-memory fakes and on the Azure adapters, sync and async (or on an adapter of your own), and
both are held to one behaviour.

    from cosmos_outbox_testing.contracts import (
        AggregateExample, InMemoryStoreWorld, StoreWorld, WritePathContract, examples)

    ORDER = AggregateExample("order", new=lambda: Order.place(...), change=Order.cancel,
                             actions=("OrderPlaced", "OrderCancelled"))

    class TestInMemoryWritePath(WritePathContract):
        example = examples(ORDER)

        @pytest.fixture
        def world(self) -> StoreWorld:
            return InMemoryStoreWorld()  # or a world on your Cosmos DB container

Each store suite needs a `world` fixture (a `StoreWorld`: the document store, sync or async,
and how to read a partition and let a document expire) and an `example` fixture (the
aggregates it drives, `examples(...)`). The transaction, the unit of work, the service and the
quarantine they drive are the outbox's own, over that store. The write path's suite
(`WritePathContract`) is the transaction's, the unit of work's and the Idempotency-Key's parts
in one (each can be run alone). Test classes here are not collected themselves (their names do
not start with `Test`).
"""

from __future__ import annotations

from cosmos_outbox._lazy import lazy_exports
from cosmos_outbox_testing.contracts._backlog import BacklogEstimatorContract
from cosmos_outbox_testing.contracts._dead_letters import (
    DeadLetterContract,
    DeadLetterWorld,
    InMemoryDeadLetterWorld,
)
from cosmos_outbox_testing.contracts._idempotency import IdempotencyContract
from cosmos_outbox_testing.contracts._payloads import PayloadStoreContract
from cosmos_outbox_testing.contracts._publisher import PublisherContract
from cosmos_outbox_testing.contracts._quarantine import QuarantineContract
from cosmos_outbox_testing.contracts._queries import QueryContract
from cosmos_outbox_testing.contracts._scheduled import (
    Delivery,
    InMemoryScheduleWorld,
    RelayingWorld,
    ScheduledEventsContract,
    ScheduleWorld,
)
from cosmos_outbox_testing.contracts._transaction import TransactionContract
from cosmos_outbox_testing.contracts._unit_of_work import UnitOfWorkContract
from cosmos_outbox_testing.contracts._worlds import (
    AggregateExample,
    BacklogWorld,
    EventLoop,
    FakePublisherWorld,
    InMemoryBacklogWorld,
    InMemoryPayloadWorld,
    InMemoryStoreWorld,
    PayloadWorld,
    PublisherWorld,
    Received,
    StoreWorld,
    events_of,
    examples,
    saved,
)
from cosmos_outbox_testing.contracts._write_path import WritePathContract

__all__ = [
    "AggregateExample",
    "BacklogEstimatorContract",
    "BacklogWorld",
    "DeadLetterContract",
    "DeadLetterWorld",
    "Delivery",
    "EventLoop",
    "FakePublisherWorld",
    "IdempotencyContract",
    "InMemoryBacklogWorld",
    "InMemoryDeadLetterWorld",
    "InMemoryPayloadWorld",
    "InMemoryScheduleWorld",
    "InMemoryStoreWorld",
    "PayloadStoreContract",
    "PayloadWorld",
    "PublisherContract",
    "PublisherWorld",
    "QuarantineContract",
    "QueryContract",
    "Received",
    "RelayingWorld",
    "ScheduleWorld",
    "ScheduledEventsContract",
    "StoreWorld",
    "TransactionContract",
    "UnitOfWorkContract",
    "WritePathContract",
    "events_of",
    "examples",
    "saved",
]

#: Renamed in 0.4 ("session" is Service Bus's word): kept for a release, deprecated.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {},
    renamed={"SessionContract": "cosmos_outbox_testing.contracts.TransactionContract"},
)
