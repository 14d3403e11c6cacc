"""The notices that take an event's place in its session: the quarantine notice (the relay
set it aside: `quarantine_notice`) and the discard notice (an operator gave its version up:
`discard_notice`), with MessageIds derived from what they stand for."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from cosmos_outbox._mapper.properties import FORMAT_PROPERTY, TARGET_PROPERTY
from cosmos_outbox._records import (
    OutboxMessage,
    OutboxRecord,
    Unreadable,
)

#: The Subject of the notice the relay publishes when it sets an event aside.
QUARANTINE_NOTICE_SUBJECT = "OutboxEventQuarantined"
#: Namespace of the notices' MessageIds: uuid5(this, event id), the same for every relay.
NOTICE_NAMESPACE = uuid.UUID("7c0f4a1e-2b8d-5e3a-9c61-0d5f3b2a9e47")


def notice_id(event_id: str) -> str:
    """The MessageId of the quarantine notice of an event: derived from the event id only, so
    a notice sent again (relay retry, failed replay) is dropped by duplicate detection, and it
    never collides with an event's own MessageId (event ids are uuid4, these uuid5)."""
    return str(uuid.uuid5(NOTICE_NAMESPACE, event_id))


def _body(
    event_id: str | None,
    aggregate_type: str,
    aggregate_id: str,
    action: str | None,
    version: int | None,
    reason: str,
) -> dict[str, object]:
    """What both notices' bodies say of the event they stand for (the discard notice adds
    who gave it up, when, and where)."""
    return {
        "eventId": event_id,
        f"{aggregate_type}Id": aggregate_id,
        "aggregateType": aggregate_type,
        "aggregateId": aggregate_id,
        "action": action,
        "version": version,
        "reason": reason,
    }


def quarantine_notice(event: OutboxRecord | Unreadable, reason: str) -> OutboxMessage | None:
    """The notice for an event set aside: same session as the event (its aggregate id), with
    its version, so a subscriber sees it where the event would have been. None when the event's
    aggregate cannot be read (there is no session to put the notice in)."""
    if isinstance(event, OutboxRecord):
        aggregate_type: str | None = event.aggregate_type
        aggregate_id: str | None = event.aggregate_id
        action: str | None = event.action
        version: int | None = event.version
        source = event.event_source
    else:
        aggregate_type, aggregate_id = event.aggregate_type, event.aggregate_id
        action, version = event.action, event.version
        source = event.event_source
    if not aggregate_id or not aggregate_type:
        return None
    body = _body(event.event_id, aggregate_type, aggregate_id, action, version, reason)
    properties: dict[str, str | int] = {
        "aggregateType": aggregate_type,
        f"{aggregate_type}Id": aggregate_id,
        "action": QUARANTINE_NOTICE_SUBJECT,
        "eventId": event.event_id,
        FORMAT_PROPERTY: 2,
    }
    if version is not None:
        properties["version"] = version
    return OutboxMessage(
        message_id=notice_id(event.event_id),
        session_id=aggregate_id,
        subject=QUARANTINE_NOTICE_SUBJECT,
        version=version if version is not None else 0,
        body=json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(),
        application_properties=properties,
        aggregate_type=aggregate_type,
        source=source,
    )


#: The Subject of the notice that an event was given up (an operator discarded it): in its
#: session, with its version, so a subscriber records an accepted gap and applies what follows.
DISCARD_NOTICE_SUBJECT = "OutboxEventDiscarded"
#: Namespace of the discard notices' MessageIds (uuid5 of what was given up, and where).
DISCARD_NAMESPACE = uuid.UUID("3b9e2d71-5c4a-5f08-8e6d-1a7f0c9b4e52")


def discard_notice_id(key: str, target: str | None = None) -> str:
    """The MessageId of the discard notice of `key` (the event id; `<type>/<id>/v<version>` for
    a version whose event is not known) for `target` (one subscription; None: all): the same
    for every attempt, so an action repeated after a timeout is dropped by duplicate detection,
    and never an event's own MessageId (event ids are uuid4, these uuid5)."""
    return str(uuid.uuid5(DISCARD_NAMESPACE, key if target is None else f"{key}@{target}"))


def discard_notice(
    *,
    aggregate_type: str,
    aggregate_id: str,
    version: int,
    event_id: str | None,
    action: str | None,
    reason: str,
    by: str,
    at: datetime,
    source: str,
    target: str | None = None,
) -> OutboxMessage:
    """The notice that version `version` of an aggregate was given up by `by` (an operator),
    in the aggregate's session, where the event was or would have been: the library's
    subscriber records an accepted gap for that version and applies the versions held after
    it. For every subscription (`target` None: a quarantined event discarded at the outbox) or
    for one (`target`: a dead letter discarded there, or a held version released there, named
    in the `outboxTarget` property its rule filters on). Built as the quarantine notice is."""
    key = event_id if event_id else f"{aggregate_type}/{aggregate_id}/v{version}"
    body = {
        **_body(event_id, aggregate_type, aggregate_id, action, version, reason),
        "discardedBy": by,
        "discardedAt": at.isoformat(),
        "subscription": target,
    }
    properties: dict[str, str | int] = {
        "aggregateType": aggregate_type,
        f"{aggregate_type}Id": aggregate_id,
        "action": DISCARD_NOTICE_SUBJECT,
        "version": version,
        FORMAT_PROPERTY: 2,
    }
    if event_id:
        properties["eventId"] = event_id
    if target is not None:
        properties[TARGET_PROPERTY] = target
    return OutboxMessage(
        message_id=discard_notice_id(key, target),
        session_id=aggregate_id,
        subject=DISCARD_NOTICE_SUBJECT,
        version=version,
        body=json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(),
        application_properties=properties,
        aggregate_type=aggregate_type,
        source=source,
        created_at=at,
    )
