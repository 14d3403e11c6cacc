"""The outbox record: how a domain event is stored next to its contact, and how a stored event
becomes a broker message. Written by the unit of work, read by the relay: one definition."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from application.ports import OutboxMessage
from domain.events import DomainEvent

EVENT_TYPE = "domainEvent"
CONTACT_TYPE = "contact"
QUARANTINE_TYPE = "quarantinedEvent"


class PoisonEventError(ValueError):
    """A stored event that can never become a valid message."""


def event_document(event: DomainEvent, *, ttl_seconds: int) -> dict[str, Any]:
    """The envelope of one event: same partition as its contact, expiring after `ttl_seconds`."""
    return {
        "id": event.id,
        "partitionKey": event.contact_id,
        "type": EVENT_TYPE,
        "data": event.model_dump(mode="json", by_alias=True),
        "ttl": ttl_seconds,
    }


def to_message(document: Mapping[str, Any]) -> OutboxMessage:
    """Map a stored event to its message. Raises PoisonEventError with the reason when the
    document is malformed."""
    data = document.get("data")
    if not isinstance(data, Mapping):
        raise PoisonEventError("event document has no 'data' object")
    event_id, contact_id = data.get("id"), data.get("contactId")
    action, version = data.get("action"), data.get("version")
    for field, value in (("id", event_id), ("contactId", contact_id), ("action", action)):
        if not isinstance(value, str) or not value:
            raise PoisonEventError(f"event data.{field} must be a non-empty string")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PoisonEventError("event data.version must be a positive integer")
    assert isinstance(event_id, str) and isinstance(contact_id, str) and isinstance(action, str)
    if len(event_id) > 128 or len(contact_id) > 128:
        raise PoisonEventError("event id and contact id must be at most 128 characters")
    properties: dict[str, str | int] = {
        "contactId": contact_id,
        "version": version,
        "action": action,
    }
    traceparent = data.get("traceparent")
    if isinstance(traceparent, str) and traceparent:
        properties["traceparent"] = traceparent
        properties["Diagnostic-Id"] = traceparent
    try:
        body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError) as exc:
        raise PoisonEventError(f"event data is not serialisable: {exc}") from None
    return OutboxMessage(
        message_id=event_id,
        session_id=contact_id,
        subject=action,
        version=version,
        body=body,
        application_properties=properties,
    )


def quarantine_document(document: Mapping[str, Any], *, reason: str) -> dict[str, Any]:
    """A copy of a poison event kept (no TTL) with the reason, in the event's own partition.
    The relay skips it: it is not a `domainEvent`."""
    source_id = str(document.get("id", "unknown"))
    partition = document.get("partitionKey")
    return {
        "id": f"quarantine-{source_id}",
        "partitionKey": partition if isinstance(partition, str) else "quarantine",
        "type": QUARANTINE_TYPE,
        "reason": reason,
        "data": {k: v for k, v in document.items() if not k.startswith("_")},
        "ttl": -1,
    }
