"""The stored events a re-drive reads (and the quarantine's contract checks), and an aggregate's
documents as the store holds them (the operators' `documents` route: the console's link from an
event to its aggregate's documents)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, overload

from cosmos_outbox._mapper import EVENT_TYPE, aggregate_partition, read_feed, selected
from cosmos_outbox._records import LegacyEvents, NotAnEvent, OutboxRecord, Unreadable
from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.ports import AsyncDocumentStore, Page

__all__ = ["partition_documents", "partition_of", "stored_events"]


@overload
def partition_of(aggregate_id: str) -> str: ...
@overload
def partition_of(aggregate_id: None) -> None: ...
def partition_of(aggregate_id: str | None) -> str | None:
    """Where an aggregate's documents live in the outbox's container (None: no aggregate, every
    partition): the one rule every per-aggregate read of the operations asks (the journey, the
    documents, the re-drive, the holds, the quarantine's records), the write path's own
    (`cosmos_outbox._mapper.aggregate_partition`: an aggregate's id)."""
    return None if aggregate_id is None else aggregate_partition(aggregate_id)


#: Every document of one partition, in the store's order (no index needed: one partition).
PARTITION_QUERY = "SELECT * FROM c"


async def stored_events(
    store: AsyncDocumentStore,
    since: datetime,
    *,
    aggregate_type: str | None = None,
    aggregate_id: str | None = None,
    legacy: LegacyEvents | None = None,
) -> list[OutboxRecord | Unreadable]:
    """Every event document still stored (not expired) created at or after `since` (by its
    creation time, `cosmos_outbox._mapper.document_created_at`: not indexed, filtered
    here; no index is added for an operator's occasional re-drive), of one aggregate type and
    one aggregate (read in its partition) if given."""
    documents = [
        d
        for d in await store.of_type(EVENT_TYPE, partition_key=partition_of(aggregate_id))
        if selected(d, since, aggregate_type, legacy=legacy)
    ]
    return [
        item for item in read_feed(documents, legacy=legacy) if not isinstance(item, NotAnEvent)
    ]


async def partition_documents(
    store: AsyncDocumentStore, partition_key: str, *, page_size: int, continuation: str | None
) -> Page[dict[str, Any]]:
    """One page of the documents in `partition_key`'s partition (an aggregate's: its state, its
    events not yet expired, its quarantine records, its idempotency records...), as stored,
    system properties included; read only. The page's token names its partition: passed back
    with another partition, InvalidContinuationError."""
    store_token = None
    if continuation is not None:
        try:
            bound, store_token = json.loads(continuation)
        except (ValueError, TypeError):
            raise InvalidContinuationError(
                "not a continuation of a partition's documents"
            ) from None
        if bound != partition_key or not isinstance(store_token, str):
            raise InvalidContinuationError("this continuation is of another partition's documents")
    page = await store.query_page(
        PARTITION_QUERY, partition_key=partition_key, page_size=page_size, continuation=store_token
    )
    token = page.continuation_token
    return Page(
        [dict(d) for d in page.items],
        json.dumps([partition_key, token], separators=(",", ":")) if token else None,
    )
