"""The Cosmos DB unit of work: one partition-scoped transactional batch per changed contact,
carrying the contact (create, or replace conditioned on its etag) and one create per event."""

from __future__ import annotations

from typing import Any

from azure.cosmos import ContainerProxy

from application.errors import ContactNotFoundError, PreconditionFailedError
from application.outbox import CONTACT_TYPE, quarantine_document
from application.ports import ContactSummary, Page, Quarantine, TrackingRepository, UnitOfWork
from domain.contact import Contact
from infra.cosmos.documents import commit_operations, contact_from_document
from infra.cosmos.errors import cosmos_errors

_PROBE = "health-probe"
_LIST_QUERY = (
    "SELECT c.id, c.data.email, c.data.name, c.data.company.companyName FROM c "
    "WHERE c.type = 'contact' AND c.data.deleted = false"
)


class CosmosContactRepository(TrackingRepository):
    def __init__(self, container: ContainerProxy) -> None:
        super().__init__()
        self._container = container

    def get(self, contact_id: str) -> Contact:
        with cosmos_errors(contact_id):
            document = self._container.read_item(item=contact_id, partition_key=contact_id)
        if document.get("type") != CONTACT_TYPE:
            raise ContactNotFoundError(contact_id)
        return self.loaded(contact_from_document(document), document["_etag"])

    def list_page(self, *, page_size: int, continuation: str | None) -> Page:
        with cosmos_errors():
            pages: Any = self._container.query_items(
                _LIST_QUERY, enable_cross_partition_query=True, max_item_count=page_size
            ).by_page(continuation)
            rows: list[dict[str, Any]] = list(next(pages, []))
            token = pages.continuation_token
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

    def commit(self, *, traceparent: str | None = None) -> None:
        for contact, events, etag in self.contacts.pending():
            planned = commit_operations(
                contact, events, etag=etag, event_ttl_seconds=self._ttl, traceparent=traceparent
            )
            with cosmos_errors(contact.id):
                results = self._container.execute_item_batch(
                    batch_operations=[_sdk_operation(*op) for op in planned],
                    partition_key=contact.id,
                )
            self.contacts.written(contact.id, _etag_of(results[0]))

    def rollback(self) -> None:
        self.contacts.forget()

    def ping(self) -> None:
        """A 1-RU point read on the data plane; 'not found' means the store answered."""
        try:
            with cosmos_errors():
                self._container.read_item(item=_PROBE, partition_key=_PROBE)
        except ContactNotFoundError:
            return


def _sdk_operation(kind: str, document: dict[str, Any], etag: str | None) -> tuple[Any, ...]:
    if kind == "replace":
        return ("replace", (document["id"], document), {"if_match_etag": etag})
    return (kind, (document,))


def _etag_of(result: Any) -> str:
    etag = result.get("eTag") or (result.get("resourceBody") or {}).get("_etag")
    if not etag:
        raise PreconditionFailedError("the store returned no etag for the written contact")
    return str(etag)


class CosmosQuarantine(Quarantine):
    """Poison events are kept in the contacts container as `quarantinedEvent` documents (no TTL)
    in the event's own partition, which the relay skips."""

    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def put(self, document: dict[str, Any], *, reason: str) -> None:
        with cosmos_errors():
            self._container.upsert_item(quarantine_document(document, reason=reason))
