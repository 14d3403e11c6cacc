"""The stored events a re-drive reads (and the quarantine's contract checks)."""

from __future__ import annotations

from datetime import datetime

from cosmos_outbox._mapper import EVENT_TYPE, read_feed, selected
from cosmos_outbox._records import LegacyEvents, NotAnEvent, OutboxRecord, Unreadable
from cosmos_outbox.ports import AsyncDocumentStore

__all__ = ["stored_events"]


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
        for d in await store.of_type(EVENT_TYPE, partition_key=aggregate_id)
        if selected(d, since, aggregate_type, legacy=legacy)
    ]
    return [
        item for item in read_feed(documents, legacy=legacy) if not isinstance(item, NotAnEvent)
    ]
