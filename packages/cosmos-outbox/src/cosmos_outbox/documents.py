"""The documents the outbox stores in the app's container, by kind (`EVENT_TYPE`,
`SEQUENCE_TYPE`, `IDEMPOTENCY_TYPE`, `QUARANTINE_TYPE`: each document's `type`), and the
functions that make and read them: an aggregate's document and its events' (`aggregate_document`,
`aggregate_event_document`, `event_documents`), the operations of one commit
(`commit_operations`), and the change feed read back as the relay reads it (`read_feed`;
`envelope_and_data` of one event document). For tools and tests that look at what the outbox
wrote. An event's forms are the mapper's (`cosmos_outbox._mapper`), the other documents the
write path's (`cosmos_outbox._write`): each shape is written and read in one module."""

from __future__ import annotations

from cosmos_outbox._domain import new_id, utc_text
from cosmos_outbox._mapper import (
    EVENT_TYPE,
    aggregate_event_document,
    envelope_and_data,
    event_documents,
    read_feed,
)
from cosmos_outbox._quarantine import QUARANTINE_TYPE
from cosmos_outbox._write.idempotency import IDEMPOTENCY_TYPE
from cosmos_outbox._write.streams import SEQUENCE_TYPE
from cosmos_outbox._write.unit_of_work import aggregate_document, commit_operations

__all__ = [
    "EVENT_TYPE",
    "IDEMPOTENCY_TYPE",
    "QUARANTINE_TYPE",
    "SEQUENCE_TYPE",
    "aggregate_document",
    "aggregate_event_document",
    "commit_operations",
    "envelope_and_data",
    "event_documents",
    "new_id",
    "read_feed",
    "utc_text",
]
