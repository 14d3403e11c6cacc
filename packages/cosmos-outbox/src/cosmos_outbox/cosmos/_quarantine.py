"""The outbox's Cosmos DB adapters: the quarantine, kept as documents in the container, and
the stored events a re-drive reads. Aggregate-neutral: every event document carries its
aggregate type and is partitioned by its aggregate's id."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from cosmos_outbox._documents import (
    QUARANTINED_EVENT,
    quarantine_document,
    quarantine_id,
    quarantined_event,
    read_feed,
    replayed_document,
    selected,
)
from cosmos_outbox._records import NotAnEvent, OutboxRecord, Unreadable
from cosmos_outbox.cosmos._errors import cosmos_errors
from cosmos_outbox.cosmos._queries import one_page
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.ports import EventStore, Page, Quarantine, QuarantinedEvent

# Served by the indexed /type path; the rest of each document is read, not queried.
QUARANTINE_QUERY = "SELECT * FROM c WHERE c.type = 'quarantinedEvent'"
EVENTS_QUERY = "SELECT * FROM c WHERE c.type = 'domainEvent'"


class CosmosQuarantine(Quarantine):
    """Poison events are kept in the container as `quarantinedEvent` documents (no TTL) in the
    event's own partition, which the relay skips. Found by event id with a query on the indexed
    `type` (few documents), then read and written by point operations in their partition."""

    def __init__(self, container: ContainerProxy, *,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._container = container
        self._clock = clock

    def put(self, event: OutboxRecord | Unreadable, *, reason: str) -> None:
        document = quarantine_document(event.document, reason=reason, now=self._clock())
        with cosmos_errors():
            try:
                previous = self._container.read_item(document["id"],
                                                     partition_key=document["partitionKey"])
            except CosmosResourceNotFoundError:
                previous = None
            if previous is not None:  # set aside again: keep the record's history
                document = quarantine_document(event.document, reason=reason,
                                               now=self._clock(), previous=previous)
            self._container.upsert_item(document)

    def _document(self, event_id: str) -> dict[str, Any]:
        with cosmos_errors(QUARANTINED_EVENT, event_id):
            found = list(self._container.query_items(
                QUARANTINE_QUERY + " AND c.id = @id",
                parameters=[{"name": "@id", "value": quarantine_id(event_id)}],
                enable_cross_partition_query=True))
        if not found:
            raise NotFoundError(QUARANTINED_EVENT, event_id)
        return dict(found[0])

    def get(self, event_id: str) -> QuarantinedEvent:
        return quarantined_event(self._document(event_id))

    def list_page(self, *, page_size: int,
                  continuation: str | None) -> Page[QuarantinedEvent]:
        rows, token = one_page(self._container, QUARANTINE_QUERY, page_size, continuation)
        return Page([quarantined_event(r) for r in rows], token or None)

    def count(self) -> int:
        with cosmos_errors():
            rows = self._container.query_items(
                "SELECT c.status FROM c WHERE c.type = 'quarantinedEvent'",
                enable_cross_partition_query=True)
            return sum(1 for r in rows if r.get("status") != "resolved")

    def replayed(self, entry: QuarantinedEvent, *, resolved: bool, reason: str,
                 ttl_seconds: int) -> QuarantinedEvent:
        key = quarantine_id(entry.event_id)
        with cosmos_errors(QUARANTINED_EVENT, entry.event_id):
            current = self._container.read_item(key, partition_key=entry.aggregate_id)
            updated = replayed_document(current, entry, resolved=resolved, reason=reason,
                                        ttl_seconds=ttl_seconds, now=self._clock())
            written = self._container.replace_item(key, updated)
        return quarantined_event(written)

    def discard(self, entry: QuarantinedEvent) -> None:
        with cosmos_errors(QUARANTINED_EVENT, entry.event_id):
            self._container.delete_item(quarantine_id(entry.event_id),
                                        partition_key=entry.aggregate_id)


class CosmosEventStore(EventStore):
    """The stored event documents: a query on the indexed `type` (in one partition when the
    aggregate is given), filtered by aggregate type and `data.createdAt` here (not indexed: no
    index is added for an operator's occasional re-drive)."""

    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def events_since(
        self, since: datetime, *, aggregate_type: str | None = None,
        aggregate_id: str | None = None,
    ) -> list[OutboxRecord | Unreadable]:
        with cosmos_errors():
            if aggregate_id is None:
                rows: Any = self._container.query_items(
                    EVENTS_QUERY, enable_cross_partition_query=True)
            else:
                rows = self._container.query_items(EVENTS_QUERY, partition_key=aggregate_id)
            documents = [d for d in rows if selected(d, since, aggregate_type)]
        return [item for item in read_feed(documents) if not isinstance(item, NotAnEvent)]
