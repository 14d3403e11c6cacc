"""The outbox record, generic over aggregates: what the relay knows of one stored event, and how
it becomes a broker message. The store's adapter parses its documents into these at its boundary
(`cosmos_outbox._documents.read_feed`), so the relay never sees a storage key.

The wire format (format 2, the `outboxFormat` application property): body = the app's data as
it published it (the event document keeps it as JSON text, `cosmos_outbox._event_document`),
MessageId = event id, SessionId = aggregate id, Subject = action, application properties
`aggregateType`, `<aggregateType>Id` (`orderId`), `version`, `action`, `outboxFormat`, and
`traceparent`/`Diagnostic-Id` when the event carries a trace context. The message also keeps the
event's creation time, CloudEvents source path (per aggregate type, `/<collection>`) and data
schema (if any): the broker adapter adds them, with the other CloudEvents attributes, in the AMQP
binding's binary content mode. An event stored in format 1 (its `data` the envelope and the
app's fields) is sent as it was: its data the body, no `outboxFormat`.

The claim check: an event whose message is too large for the topic travels as the same message
with an empty body and the CloudEvents `dataref` attribute, the reference of its body in the
payload store (`claim_check`), stored under `payload_name(record)`.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, TypeVar, dataclass_transform
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, StrictInt

T = TypeVar("T")

_MAX_ID = 128
Identifier = Annotated[str, Field(min_length=1, max_length=_MAX_ID)]


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def per_event(cls: type[T]) -> type[T]:
    """A value class of which the relay builds one or more per event: immutable to the type
    checker (mypy rejects an assignment to a field, as to a frozen dataclass's), a plain slotted
    dataclass at run time. A frozen dataclass sets each field through `object.__setattr__` in
    its `__init__`: about 2 µs more for a dozen fields, more than the rest of the mapping of an
    event (docs/benchmarks.md, "Relay CPU per event")."""
    return dataclass(slots=True)(cls)


@dataclass(frozen=True)
class LegacyEvents:
    """How to read event documents written before event documents named their aggregate type
    and CloudEvents source (by an app older than the library, the Contacts outbox app for
    one): as events of `aggregate_type`, from `source` (`/contacts`). Without it such a
    document is unreadable (quarantined, with the reason)."""

    aggregate_type: str
    source: str


class PoisonEventError(ValueError):
    """A stored event that can never become a valid message."""


class StoredFields(BaseModel):
    """The fields of an outbox record read from the stored data, and their rules: the reason a
    stored event that breaks one is quarantined with (`cosmos_outbox._documents.outbox_record`
    names the field as stored). `plain_fields` is the same verdict, checked cheaply first."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: Identifier
    aggregate_type: Annotated[str, Field(min_length=1)]
    aggregate_id: Identifier
    action: Annotated[str, Field(min_length=1)]
    version: Annotated[StrictInt, Field(ge=1)]
    event_source: Annotated[str, Field(min_length=1)]


def plain_fields(
    event_id: object,
    aggregate_type: str,
    aggregate_id: object,
    action: object,
    version: object,
    event_source: str,
) -> tuple[str, str, str, int] | None:
    """(event id, aggregate id, action, version) when `StoredFields` takes these values as they
    are (plain strings of the allowed lengths, an integer version of at least 1): the parser's
    check of every event, without building a model. None when `StoredFields` would reject one
    or convert it: then it decides, and names the reason."""
    if (
        type(event_id) is str
        and 0 < len(event_id) <= _MAX_ID
        and type(aggregate_id) is str
        and 0 < len(aggregate_id) <= _MAX_ID
        and type(action) is str
        and action
        and type(version) is int
        and version >= 1
        and type(aggregate_type) is str
        and aggregate_type
        and type(event_source) is str
        and event_source
    ):
        return event_id, aggregate_id, action, version
    return None


@per_event
class OutboxRecord:
    """One stored event, typed. `body` is its data exactly as stored, serialised once;
    `event_source` the CloudEvents source path of its aggregate type (`/orders`);
    `document` is the stored document as read, opaque here, kept only to be quarantined (the
    quarantine drops its system keys).

    Built by the store's parser (`cosmos_outbox._documents.outbox_record`), which checks the
    fields read from the stored data (ids, action, version: `StoredFields`) and types those it
    derives itself (time, trace context, schema, body, document); the record itself checks
    nothing again: the relay builds one per event."""

    event_id: str
    aggregate_type: str
    aggregate_id: str
    action: str
    version: int
    event_source: str
    body: bytes
    created_at: datetime | None = None
    traceparent: str | None = None
    dataschema: str | None = None
    #: application properties of the message of the app's own (a session's event may set some)
    properties: Mapping[str, str | int] = field(default_factory=dict)
    #: the message's Subject when not the action (a session's event may set one)
    subject: str | None = None
    document: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: the message format: 2, the body the app's data and the envelope in properties; 1, the
    #: format before (the body the event's data with its envelope), kept for stored events
    format: int = 2


@dataclass(frozen=True)
class Unreadable:
    """A stored event that could not be parsed, and why; `document` kept for the quarantine.
    What could still be read of it (its aggregate, action, version) is kept for the notice."""

    event_id: str
    reason: str
    document: Mapping[str, Any] = field(repr=False)
    aggregate_type: str | None = None
    aggregate_id: str | None = None
    action: str | None = None
    version: int | None = None
    #: the CloudEvents source path, when it can be told ("/" when it cannot)
    event_source: str = "/"


@dataclass(frozen=True)
class NotAnEvent:
    """A changed document that is not an outbox event (an aggregate, a quarantined event)."""

    document_id: str


FeedItem = OutboxRecord | Unreadable | NotAnEvent


@per_event
class OutboxMessage:
    """One event as a broker message: MessageId = event id, SessionId = aggregate id; `source`
    is the CloudEvents source path of its aggregate type."""

    message_id: str
    session_id: str
    subject: str
    version: int
    body: bytes
    application_properties: dict[str, str | int]
    aggregate_type: str
    source: str
    content_type: str = "application/json"
    created_at: datetime | None = None
    dataschema: str | None = None
    #: the claim check: the reference of the body in the payload store (the body is empty)
    dataref: str | None = None
    #: the event's id (CloudEvents `id`) when the MessageId is another: a re-drive's message
    #: (a MessageId of its own, so the topic's duplicate detection cannot drop it). None: the
    #: MessageId is the event id
    event_id: str | None = None


#: The application property that tells a message's format (2: the body is the app's data and
#: the envelope is in the properties); a message without it is of format 1 (the body holds the
#: envelope too).
FORMAT_PROPERTY = "outboxFormat"
#: The application property naming the one subscription (or queue) a message is for: a dead
#: letter's resubmission, a targeted re-drive, the notice that gives a version up at one
#: subscriber. Each subscription's rule lets through what names no target or names it
#: (`NOT EXISTS(outboxTarget) OR outboxTarget = '<subscription>'`); the library's `Dispatcher`
#: skips what names another subscription when it is told its own (`subscription=`).
TARGET_PROPERTY = "outboxTarget"
#: The number of a dead letter's resubmission (1, 2, ...: one more each time it is resubmitted
#: after it was dead-lettered again); part of the resubmission's MessageId.
RESUBMISSION_PROPERTY = "outboxResubmission"
#: The id of the re-drive a message was sent by (part of its MessageId).
REDRIVE_PROPERTY = "outboxRedrive"


def reserved_property(name: str, aggregate_type: str) -> bool:
    """Whether an application property name is the outbox's (an app's own may not take it)."""
    return name in (
        "aggregateType",
        f"{aggregate_type}Id",
        "version",
        "action",
        "traceparent",
        "Diagnostic-Id",
        "eventId",
        FORMAT_PROPERTY,
        TARGET_PROPERTY,
        RESUBMISSION_PROPERTY,
        REDRIVE_PROPERTY,
    ) or name.lower().startswith("cloudevents")


def to_message(record: OutboxRecord) -> OutboxMessage:
    properties: dict[str, str | int] = {
        "aggregateType": record.aggregate_type,
        f"{record.aggregate_type}Id": record.aggregate_id,
        "version": record.version,
        "action": record.action,
    }
    if record.traceparent:
        properties["traceparent"] = record.traceparent
        properties["Diagnostic-Id"] = record.traceparent
    if record.format != 1:
        properties[FORMAT_PROPERTY] = record.format
    if record.properties:
        properties.update(record.properties)
    return OutboxMessage(
        message_id=record.event_id,
        session_id=record.aggregate_id,
        subject=record.subject or record.action,
        version=record.version,
        body=record.body,
        application_properties=properties,
        aggregate_type=record.aggregate_type,
        source=record.event_source,
        created_at=record.created_at,
        dataschema=record.dataschema,
    )


def payload_name(record: OutboxRecord) -> str:
    """Where the claim check stores an event's body: `<aggregateType>/<aggregateId>/<eventId>`,
    each part percent-encoded (a `/` in an id cannot make two events share a name). The same
    for every retry, so a retry overwrites the same blob with the same bytes."""
    return "/".join(
        quote(part, safe="")
        for part in (record.aggregate_type, record.aggregate_id, record.event_id)
    )


def claim_check(message: OutboxMessage, reference: str) -> OutboxMessage:
    """The message of an offloaded event: the same ids, subject, properties and content type,
    no body, and `dataref` = the body's reference (CloudEvents: the data is found there)."""
    return dataclasses.replace(message, body=b"", dataref=reference)


#: The Subject of the notice the relay publishes when it sets an event aside.
QUARANTINE_NOTICE_SUBJECT = "OutboxEventQuarantined"
#: Namespace of the notices' MessageIds: uuid5(this, event id), the same for every relay.
NOTICE_NAMESPACE = uuid.UUID("7c0f4a1e-2b8d-5e3a-9c61-0d5f3b2a9e47")


def notice_id(event_id: str) -> str:
    """The MessageId of the quarantine notice of an event: derived from the event id only, so
    a notice sent again (relay retry, failed replay) is dropped by duplicate detection, and it
    never collides with an event's own MessageId (event ids are uuid4, these uuid5)."""
    return str(uuid.uuid5(NOTICE_NAMESPACE, event_id))


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
    body = {
        "eventId": event.event_id,
        f"{aggregate_type}Id": aggregate_id,
        "aggregateType": aggregate_type,
        "aggregateId": aggregate_id,
        "action": action,
        "version": version,
        "reason": reason,
    }
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
        "eventId": event_id,
        f"{aggregate_type}Id": aggregate_id,
        "aggregateType": aggregate_type,
        "aggregateId": aggregate_id,
        "action": action,
        "version": version,
        "reason": reason,
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
