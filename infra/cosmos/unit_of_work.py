"""The Cosmos DB unit of work: one partition-scoped transactional batch per changed contact,
carrying the contact (create, or replace conditioned on its etag) and one create per event."""

from __future__ import annotations

from typing import Any

from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from application.errors import ContactNotFoundError, PreconditionFailedError
from application.outbox import CONTACT_TYPE, quarantine_document
from application.ports import ContactRepository, ContactSummary, Page, Quarantine, UnitOfWork
from domain.contact import Contact
from infra.cosmos.documents import commit_operations, contact_from_document
from infra.cosmos.errors import cosmos_errors

_PROBE = "health-probe"
_LIST_QUERY = (
    "SELECT c.id, c.data.email, c.data.name, c.data.company.companyName FROM c "
    "WHERE c.type = 'contact' AND c.data.deleted = false"
)


class CosmosContactRepository(ContactRepository):
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container
        self.tracked: dict[str, Contact] = {}
        self.new: set[str] = set()
        self.etags: dict[str, str] = {}

    def add(self, contact: Contact) -> None:
        self.tracked[contact.id] = contact
        self.new.add(contact.id)

    def get(self, contact_id: str) -> Contact:
        try:
            with cosmos_errors(contact_id):
                document = self._container.read_item(item=contact_id, partition_key=contact_id)
        except CosmosResourceNotFoundError:  # pragma: no cover - translated above
            raise ContactNotFoundError(contact_id) from None
        if document.get("type") != CONTACT_TYPE:
            raise ContactNotFoundError(contact_id)
        contact = contact_from_document(document)
        self.tracked[contact_id] = contact
        self.etags[contact_id] = document["_etag"]
        return contact

    def etag(self, contact_id: str) -> str:
        return self.etags[contact_id]

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
        repo = self.contacts
        for contact_id, contact in repo.tracked.items():
            events = contact.collect_events()
            if not events and contact_id not in repo.new:
                continue
            planned = commit_operations(
                contact,
                events,
                etag=None if contact_id in repo.new else repo.etags[contact_id],
                event_ttl_seconds=self._ttl,
                traceparent=traceparent,
            )
            operations = [_sdk_operation(kind, doc, etag) for kind, doc, etag in planned]
            with cosmos_errors(contact_id):
                results = self._container.execute_item_batch(
                    batch_operations=operations, partition_key=contact_id
                )
            repo.new.discard(contact_id)
            repo.etags[contact_id] = _etag_of(results[0])

    def rollback(self) -> None:
        for contact in self.contacts.tracked.values():
            contact.collect_events()
        self.contacts.tracked.clear()
        self.contacts.new.clear()

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
