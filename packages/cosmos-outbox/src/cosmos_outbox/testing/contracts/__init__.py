"""Deprecated (removed in 0.6): the contract suites are cosmos-outbox-testing's,
`cosmos_outbox_testing.contracts`, with the same names. Each name read here warns
(DeprecationWarning) and gives the kit's."""

from __future__ import annotations

from cosmos_outbox._lazy import lazy_exports

#: Each name of 0.4 and where it went: cosmos-outbox-testing's `cosmos_outbox_testing.contracts`.
_MOVED = {
    name: f"cosmos_outbox_testing.contracts.{name}"
    for name in (
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
    )
}

__all__: list[str] = []
__getattr__, __dir__ = lazy_exports(__name__, {}, renamed=_MOVED)
