"""The Cosmos DB unit of work, generic over aggregates: one partition-scoped transactional batch
per changed aggregate, carrying the aggregate (create, or replace conditioned on its etag) and
one create per event."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from application.errors import NotFoundError, PreconditionFailedError, StoreUnavailableError
from application.outbox import NotAnEvent, OutboxRecord, Unreadable
from application.ports import (
    ContactRepository,
    ContactSummary,
    EventStore,
    Page,
    Quarantine,
    QuarantinedEvent,
    QuarantinePage,
    Repository,
    TrackingRepository,
    UnitOfWork,
)
from domain.aggregate import Aggregate
from domain.contact import Contact
from infra.cosmos.documents import (
    QUARANTINED_EVENT,
    aggregate_from_document,
    commit_operations,
    created_since,
    quarantine_document,
    quarantine_id,
    quarantined_event,
    read_feed,
    replayed_document,
)
from infra.cosmos.errors import cosmos_errors

_PROBE = "health-probe"
# Served by the indexing policy (deploy/indexing-policy.json): /type and /data/deleted.
LIST_CONTACTS_QUERY = (
    "SELECT c.id, c.data.email, c.data.name, c.data.company.companyName FROM c "
    "WHERE c.type = 'contact' AND c.data.deleted = false"
)


class CosmosRepository[A: Aggregate](TrackingRepository[A]):
    def __init__(self, container: ContainerProxy, kind: type[A]) -> None:
        super().__init__(kind)
        self._container = container

    def read(self, aggregate_id: str) -> tuple[A, str]:
        with cosmos_errors(self.kind.aggregate_type, aggregate_id):
            document = self._container.read_item(item=aggregate_id, partition_key=aggregate_id)
        return aggregate_from_document(self.kind, document), document["_etag"]


def one_page(
    container: ContainerProxy, query: str, page_size: int, continuation: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of a cross-partition query and the SDK's token for the next (None: last)."""
    with cosmos_errors():
        pages: Any = container.query_items(
            query, enable_cross_partition_query=True, max_item_count=page_size
        ).by_page(continuation)
        rows: list[dict[str, Any]] = list(next(pages, []))
        token = pages.continuation_token
    return rows, token


class CosmosContactRepository(CosmosRepository[Contact], ContactRepository):
    def __init__(self, container: ContainerProxy) -> None:
        super().__init__(container, Contact)

    def list_page(self, *, page_size: int, continuation: str | None) -> Page:
        rows, token = one_page(self._container, LIST_CONTACTS_QUERY, page_size, continuation)
        items = [
            ContactSummary(
                id=row["id"],
                email=row.get("email", ""),
                full_name=f"{row['name']['firstName']} {row['name']['lastName']}",
                company_name=row.get("companyName", ""),
            )
            for row in rows
        ]
        return Page(items=items, continuation_token=token or None)


class CosmosUnitOfWork(UnitOfWork):
    """Not thread-safe; one per command."""

    def __init__(self, container: ContainerProxy, *, event_ttl_seconds: int) -> None:
        self._container = container
        self._ttl = event_ttl_seconds
        self.contacts: CosmosContactRepository = CosmosContactRepository(container)
        self._repositories: dict[type[Aggregate], CosmosRepository[Any]] = {
            Contact: self.contacts
        }

    def repository[A: Aggregate](self, kind: type[A]) -> Repository[A]:
        if kind not in self._repositories:
            self._repositories[kind] = CosmosRepository(self._container, kind)
        return cast(Repository[A], self._repositories[kind])

    def commit(self, *, traceparent: str | None = None) -> None:
        for repository in self._repositories.values():
            for aggregate, events, etag in repository.pending():
                planned = commit_operations(
                    aggregate, events, etag=etag, event_ttl_seconds=self._ttl,
                    traceparent=traceparent,
                )
                with cosmos_errors(aggregate.aggregate_type, aggregate.id):
                    results = self._container.execute_item_batch(
                        batch_operations=[_sdk_operation(*op) for op in planned],
                        partition_key=aggregate.id,
                    )
                repository.written(aggregate.id, _etag_of(results[0]))

    def rollback(self) -> None:
        for repository in self._repositories.values():
            repository.forget()

    def ping(self) -> None:
        """A 1-RU point read of a document that does not exist: "not found" means the store
        answered. A missing container answers "not found" too (the SDK reads the container's
        properties first; once it has them the service says 404/1003, which is translated to
        StoreUnavailableError), so a "not found" is checked with a read of the container's
        properties: if the container is missing, the store is unavailable, not healthy."""
        try:
            with cosmos_errors():
                self._container.read_item(item=_PROBE, partition_key=_PROBE)
        except NotFoundError:
            try:
                with cosmos_errors():
                    self._container.read()
            except NotFoundError:
                raise StoreUnavailableError(
                    "the database or container does not exist", retry_after=30.0
                ) from None


def _sdk_operation(kind: str, document: dict[str, Any], etag: str | None) -> tuple[Any, ...]:
    if kind == "replace":
        return ("replace", (document["id"], document), {"if_match_etag": etag})
    return (kind, (document,))


def _etag_of(result: Any) -> str:
    etag = result.get("eTag") or (result.get("resourceBody") or {}).get("_etag")
    if not etag:
        raise PreconditionFailedError("the store returned no etag for the written aggregate")
    return str(etag)


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
        document = quarantine_document(event.source, reason=reason, now=self._clock())
        with cosmos_errors():
            try:
                previous = self._container.read_item(document["id"],
                                                     partition_key=document["partitionKey"])
            except CosmosResourceNotFoundError:
                previous = None
            if previous is not None:  # set aside again: keep the record's history
                document = quarantine_document(event.source, reason=reason,
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

    def list_page(self, *, page_size: int, continuation: str | None) -> QuarantinePage:
        rows, token = one_page(self._container, QUARANTINE_QUERY, page_size, continuation)
        return QuarantinePage([quarantined_event(r) for r in rows], token or None)

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
    aggregate is given), filtered by `data.createdAt` here (not indexed: no index is added for
    an operator's occasional re-drive)."""

    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def events_since(
        self, since: datetime, *, aggregate_id: str | None = None
    ) -> list[OutboxRecord | Unreadable]:
        with cosmos_errors():
            if aggregate_id is None:
                rows: Any = self._container.query_items(
                    EVENTS_QUERY, enable_cross_partition_query=True)
            else:
                rows = self._container.query_items(EVENTS_QUERY, partition_key=aggregate_id)
            documents = [d for d in rows if created_since(d, since)]
        return [item for item in read_feed(documents) if not isinstance(item, NotAnEvent)]
