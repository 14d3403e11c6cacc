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

The container's suites follow its roles (`cosmos_outbox.ports`): the write side's
(`BatchStore`) is the write path's suite, `WritePathContract` (the transaction's, the unit of
work's and the Idempotency-Key's parts in one; each can be run alone), run over the store seen
through that role alone (`WriteSide`); one document at a time (`DocumentWrites`):
`DocumentWritesContract`; the queries (`DocumentQueries`): `QueryContract`; the quarantine,
which the relay keeps with all three, `QuarantineContract`; and the operators' bulk operations,
kept with single writes and one query, `OperationStoreContract`. Each needs a `world` fixture (a
`StoreWorld`: the document store, sync or async, and how to read a partition and let a document
expire), and the aggregate suites an `example` fixture (the aggregates they drive,
`examples(...)`). The transaction, the unit of work, the service and the quarantine they drive
are the outbox's own, over that store. Test classes here are not collected themselves (their
names do not start with `Test`).
"""

from __future__ import annotations

import warnings
from typing import Any

from cosmos_outbox_testing.contracts._backlog import BacklogEstimatorContract
from cosmos_outbox_testing.contracts._dead_letters import (
    DeadLetterContract,
    DeadLetterWorld,
    InMemoryDeadLetterWorld,
)
from cosmos_outbox_testing.contracts._idempotency import IdempotencyContract
from cosmos_outbox_testing.contracts._operations import OperationStoreContract
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
from cosmos_outbox_testing.contracts._target_rules import (
    TARGET_RULES_LAYOUT,
    InMemoryTargetRulesWorld,
    TargetRulesContract,
    TargetRulesWorld,
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
    WriteSide,
    events_of,
    examples,
    saved,
)
from cosmos_outbox_testing.contracts._write_path import WritePathContract
from cosmos_outbox_testing.contracts._writes import DocumentWritesContract

__all__ = [
    "TARGET_RULES_LAYOUT",
    "AggregateExample",
    "BacklogEstimatorContract",
    "BacklogWorld",
    "DeadLetterContract",
    "DeadLetterWorld",
    "Delivery",
    "DocumentWritesContract",
    "EventLoop",
    "FakePublisherWorld",
    "IdempotencyContract",
    "InMemoryBacklogWorld",
    "InMemoryDeadLetterWorld",
    "InMemoryPayloadWorld",
    "InMemoryScheduleWorld",
    "InMemoryStoreWorld",
    "InMemoryTargetRulesWorld",
    "OperationStoreContract",
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
    "TargetRulesContract",
    "TargetRulesWorld",
    "TransactionContract",
    "UnitOfWorkContract",
    "WritePathContract",
    "WriteSide",
    "events_of",
    "examples",
    "saved",
]

#: Renamed in 0.4 ("session" is Service Bus's word): kept for a release, deprecated.
_RENAMED = {"SessionContract": TransactionContract}


def __getattr__(name: str) -> Any:
    if name not in _RENAMED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    replacement = _RENAMED[name]
    warnings.warn(
        f"{__name__}.{name} is deprecated (removed in cosmos-outbox 0.6): use "
        f"{__name__}.{replacement.__name__}",
        DeprecationWarning,
        stacklevel=2,
    )
    return replacement


def __dir__() -> list[str]:
    return sorted(__all__)
