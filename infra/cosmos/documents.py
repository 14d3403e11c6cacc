"""The contact envelope: the domain model in, the stored document out, and back. The etag and
other system properties stay here (`_etag`, `_ts`, ...), never in the domain model."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from application.outbox import CONTACT_TYPE, event_document
from domain.contact import Contact
from domain.events import DomainEvent
from domain.values import Company, Name


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def contact_document(contact: Contact) -> dict[str, Any]:
    return {
        "id": contact.id,
        "partitionKey": contact.id,
        "type": CONTACT_TYPE,
        "data": {
            "name": contact.name.model_dump(by_alias=True),
            "email": contact.email,
            "description": contact.description,
            "company": contact.company.model_dump(by_alias=True),
            "createdAt": _iso(contact.created_at),
            "modifiedAt": _iso(contact.modified_at),
            "deleted": contact.deleted,
            "deletedAt": _iso(contact.deleted_at),
            "version": contact.version,
        },
        "ttl": -1,
    }


def contact_from_document(document: dict[str, Any]) -> Contact:
    data = document["data"]
    deleted_at = data.get("deletedAt")
    return Contact(
        id=document["id"],
        name=Name.model_validate(data["name"]),
        email=data["email"],
        description=data.get("description", ""),
        company=Company.model_validate(data["company"]),
        created_at=datetime.fromisoformat(data["createdAt"]),
        modified_at=datetime.fromisoformat(data["modifiedAt"]),
        version=int(data["version"]),
        deleted=bool(data.get("deleted", False)),
        deleted_at=datetime.fromisoformat(deleted_at) if deleted_at else None,
    )


WriteOperation = tuple[str, dict[str, Any], str | None]  # "create"|"replace", document, if-match


def commit_operations(
    contact: Contact,
    events: list[DomainEvent],
    *,
    etag: str | None,
    event_ttl_seconds: int,
    traceparent: str | None,
) -> list[WriteOperation]:
    """What one command writes, as one batch in the contact's partition: the contact (create
    when `etag` is None, else replace conditioned on it), then one create per event."""
    operations: list[WriteOperation] = [
        ("create" if etag is None else "replace", contact_document(contact), etag)
    ]
    for event in events:
        if traceparent and event.traceparent is None:
            event = event.model_copy(update={"traceparent": traceparent})
        operations.append(("create", event_document(event, ttl_seconds=event_ttl_seconds), None))
    return operations
