"""The values the mapper (`cosmos_outbox._mapper`) maps an outbox event between: what the relay
knows of one stored event (`OutboxRecord`, or `Unreadable`; `NotAnEvent` for any other document
of the change feed), the message it becomes (`OutboxMessage`), and how to read events an older
app stored (`LegacyEvents`). Values only: how they are made and read is the mapper's. No
pydantic here (the settings, the ports and the telemetry import these at a cold start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


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


@per_event
class OutboxRecord:
    """One stored event, typed. `body` is its data exactly as stored, serialised once;
    `event_source` the CloudEvents source path of its aggregate type (`/orders`);
    `document` is the stored document as read, opaque here, kept only to be quarantined (the
    quarantine drops its system keys).

    Built by the mapper (`cosmos_outbox._mapper.outbox_record`), which checks the
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
    #: application properties of the message of the app's own (a transaction's event may set some)
    properties: Mapping[str, str | int] = field(default_factory=dict)
    #: the message's Subject when not the action (a transaction's event may set one)
    subject: str | None = None
    document: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: the partition the event is stored in (where its release writes it; None: not a string)
    partition_key: str | None = None
    #: the message format: 2, the body the app's data and the envelope in properties; 1, the
    #: format before (the body the event's data with its envelope), kept for stored events
    format: int = 2
    #: a scheduled event: when it is due (aware); None for an event relayed once committed
    deliver_at: datetime | None = None
    #: a scheduled event whose due time came: when it was released (the relay sends it now)
    released_at: datetime | None = None
    #: a scheduled event the app cancelled before its release: when (it is never sent)
    cancelled_at: datetime | None = None


@dataclass(frozen=True)
class Release:
    """A scheduled event's release, as the relay schedules it (on the schedule queue,
    `cosmos_outbox.ports.ScheduleQueue`): the event's partition and id, and when to release it
    (aware: its due time, or a step towards it)."""

    partition_key: str
    event_id: str
    at: datetime


def trace_id(traceparent: object) -> str | None:
    """The trace id of a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`): Application
    Insights' operation id. None when there is none, or it is not one."""
    parts = traceparent.split("-") if isinstance(traceparent, str) else []
    if len(parts) == 4 and len(parts[1]) == 32 and parts[1] != "0" * 32:
        return parts[1]
    return None


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
