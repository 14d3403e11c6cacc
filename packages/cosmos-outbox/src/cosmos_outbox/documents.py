"""The documents the outbox stores in the app's container, by kind (`EVENT_TYPE`,
`IDEMPOTENCY_TYPE`, `QUARANTINE_TYPE`: each document's `type`), and the functions that make and
read them: an aggregate's document and its events' (`aggregate_document`,
`aggregate_event_document`, `event_documents`), the operations of one commit
(`commit_operations`), and the change feed read back as the relay reads it (`read_feed`;
`envelope_and_data` of one event document). For tools and tests that look at what the outbox
wrote; each shape is written and read in one module of the library."""

from __future__ import annotations

from cosmos_outbox._documents import (
    IDEMPOTENCY_TYPE,
    aggregate_document,
    commit_operations,
    event_documents,
)
from cosmos_outbox._domain import new_id, utc_text
from cosmos_outbox._event_document import (
    EVENT_TYPE,
    aggregate_event_document,
    envelope_and_data,
    read_feed,
)
from cosmos_outbox._quarantine import QUARANTINE_TYPE

__all__ = [
    "EVENT_TYPE",
    "IDEMPOTENCY_TYPE",
    "QUARANTINE_TYPE",
    "aggregate_document",
    "aggregate_event_document",
    "commit_operations",
    "envelope_and_data",
    "event_documents",
    "new_id",
    "read_feed",
    "utc_text",
]
