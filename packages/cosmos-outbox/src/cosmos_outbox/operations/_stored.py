"""Where an aggregate's documents live (`partitions_of`, the one rule every per-aggregate read of
the operations asks), the stored events a re-drive reads (and the quarantine's contract checks),
and an aggregate's documents as the store holds them (the operators' `documents` route: the
console's link from an event to its aggregate's documents).

**The aggregate id is the session id.** Every per-aggregate way in (the journey, the documents,
the re-drive, the holds and their release, the quarantine's records) names an aggregate by the
id its messages carry as their session id -- the id a subscriber sees. An aggregate's events
live in its own partition (`cosmos_outbox._mapper.aggregate_partition`: its id); a transaction
with a session id of its own (`outbox.transaction("customer-7", session_id="order-42")`) stores
its events in the transaction's partition (`customer-7`), each naming the session id as its
`aggregateId`. So where an aggregate's documents live is asked of the store: its own partition,
and every partition where an event (or a quarantine record) names it (`aggregateId`, an indexed
path: deploy/indexing-policy.json)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from cosmos_outbox._mapper import (
    AGGREGATE_PARTITIONS,
    EVENT_TYPE,
    aggregate_partition,
    document_created_at,
    named_aggregate,
    read_feed,
    selected,
)
from cosmos_outbox._records import LegacyEvents, NotAnEvent, OutboxRecord, Unreadable
from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.ports import AsyncDocumentStore, Page

__all__ = ["aggregate_documents", "of_aggregate", "partitions_of", "stored_events"]


async def partitions_of(store: AsyncDocumentStore, aggregate_id: str) -> list[str]:
    """Where the documents of the aggregate whose id (its session id) is `aggregate_id` live in
    the outbox's container: its own partition first (the write path's rule,
    `cosmos_outbox._mapper.aggregate_partition`), then every other partition where an event or
    a quarantine record names it (a transaction's with a session id of its own). The one rule
    every per-aggregate read of the operations asks (see the module)."""
    own = aggregate_partition(aggregate_id)
    found = [own]
    for value in await store.query(AGGREGATE_PARTITIONS, {"@id": aggregate_id}):
        if isinstance(value, str) and value not in found:
            found.append(value)
    return found


async def of_aggregate(
    store: AsyncDocumentStore, type_: str, aggregate_id: str | None
) -> list[dict[str, Any]]:
    """The documents of `type_` where the aggregate's live (`partitions_of`; every partition when
    `aggregate_id` is None); in a partition shared with other aggregates (a transaction's),
    those naming another aggregate are left out."""
    if aggregate_id is None:
        return await store.of_type(type_)
    documents: list[dict[str, Any]] = []
    for partition in await partitions_of(store, aggregate_id):
        documents += [
            d
            for d in await store.of_type(type_, partition_key=partition)
            if named_aggregate(d) in (None, aggregate_id)
        ]
    return documents


#: Every document of one partition, in the store's order (no index needed: one partition).
PARTITION_QUERY = "SELECT * FROM c"


async def stored_events(
    store: AsyncDocumentStore,
    since: datetime,
    *,
    aggregate_type: str | None = None,
    aggregate_id: str | None = None,
    legacy: LegacyEvents | None = None,
    until: datetime | None = None,
) -> list[OutboxRecord | Unreadable]:
    """Every event document still stored (not expired) created at or after `since` (by its
    creation time, `cosmos_outbox._mapper.document_created_at`: not indexed, filtered
    here; no index is added for an operator's occasional re-drive), and at or before `until`
    if given (a re-drive operation's: the events stored when it began), of one aggregate type
    and one aggregate (read in its partition) if given."""
    documents = [
        d
        for d in await of_aggregate(store, EVENT_TYPE, aggregate_id)
        if selected(d, since, aggregate_type, legacy=legacy)
        and (until is None or (document_created_at(d) or 0.0) <= until.timestamp())
    ]
    return [
        item for item in read_feed(documents, legacy=legacy) if not isinstance(item, NotAnEvent)
    ]


async def aggregate_documents(
    store: AsyncDocumentStore, aggregate_id: str, *, page_size: int, continuation: str | None
) -> Page[dict[str, Any]]:
    """One page of the documents where the aggregate's live (`partitions_of`: its own partition,
    then a transaction's that names it), each as stored, system properties included (its state,
    its events not yet expired, its quarantine records, its idempotency records...; in a
    transaction's partition, the other documents written with them too); read only. The page's
    token names the partition it stopped in: passed back for another aggregate,
    InvalidContinuationError."""
    partitions = await partitions_of(store, aggregate_id)
    at, store_token = 0, None
    if continuation is not None:
        try:
            bound, partition, store_token = json.loads(continuation)
        except (ValueError, TypeError):
            raise InvalidContinuationError(
                "not a continuation of an aggregate's documents"
            ) from None
        if bound != aggregate_id or partition not in partitions:
            raise InvalidContinuationError("this continuation is of another aggregate's documents")
        if store_token is not None and not isinstance(store_token, str):
            raise InvalidContinuationError("not a continuation of an aggregate's documents")
        at = partitions.index(partition)
    items: list[dict[str, Any]] = []
    while at < len(partitions) and len(items) < page_size:
        page = await store.query_page(
            PARTITION_QUERY,
            partition_key=partitions[at],
            page_size=page_size - len(items),
            continuation=store_token,
        )
        items += [dict(d) for d in page.items]
        store_token = page.continuation_token
        if store_token is None:
            at += 1
    if at >= len(partitions):
        return Page(items, None)
    token = [aggregate_id, partitions[at], store_token]
    return Page(items, json.dumps(token, separators=(",", ":")))
