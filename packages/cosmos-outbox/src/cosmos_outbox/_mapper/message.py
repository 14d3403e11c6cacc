"""The message: an outbox record -> the message the relay sends (`to_message`, the claim
check's `claim_check` and `payload_name`), a message's envelope read back on a subscriber's side
(`message_envelope`), what a message received elsewhere says it is (`sent_fields`: the
operators' reading of a dead letter), and a message's headers, copied as one from whatever
carries them (`headers_of`: a received message, a dead letter, its failure record, an
`Outgoing`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypedDict, cast
from urllib.parse import quote

from cosmos_outbox._mapper.document import FORMAT_1_ENVELOPE, parse_time
from cosmos_outbox._mapper.event import due_text
from cosmos_outbox._mapper.properties import (
    DELIVER_AT_PROPERTY,
    FORMAT,
    FORMAT_PROPERTY,
    RESUBMISSION_PROPERTY,
    TARGET_PROPERTY,
)
from cosmos_outbox._records import (
    OutboxMessage,
    OutboxRecord,
)

# -- the message -------------------------------------------------------------------------------


def to_message(record: OutboxRecord) -> OutboxMessage:
    """The message of a stored event (see the module): its format's. A scheduled event's has
    no `version` (it takes no place in its stream's order) and says when it was due."""
    properties: dict[str, str | int]
    if record.deliver_at is None:
        properties = {
            "aggregateType": record.aggregate_type,
            f"{record.aggregate_type}Id": record.aggregate_id,
            "version": record.version,
            "action": record.action,
        }
    else:
        properties = {
            "aggregateType": record.aggregate_type,
            f"{record.aggregate_type}Id": record.aggregate_id,
            "action": record.action,
            DELIVER_AT_PROPERTY: due_text(record.deliver_at),
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


# -- the message, read (a subscriber's side) ---------------------------------------------------


class MessageEnvelope(NamedTuple):
    """What a message's envelope says, in either format: its version and aggregate id (None
    when it has none), the app's data (for format 1, the body without the envelope's names),
    and where the envelope was read (`properties` or `data`, for the reason it is refused)."""

    version: object
    aggregate_id: object
    data: Mapping[str, Any]
    where: str
    #: a scheduled event's due time (its `deliverAt` property, parsed; None: none or unreadable)
    deliver_at: datetime | None = None


def message_envelope(
    properties: Mapping[str, Any], data: Mapping[str, Any], aggregate_type: str
) -> MessageEnvelope:
    """A relayed message's envelope and data (see the module): format 2 (`outboxFormat` 2) has
    its envelope in the application properties, format 1 in its body with the app's fields. A
    scheduled event's message has no version: read as 0 (no place in its stream's order)."""
    own = f"{aggregate_type}Id"
    if str(properties.get(FORMAT_PROPERTY)) == str(FORMAT):
        version = properties.get("version")
        if isinstance(version, str) and version.isdigit():  # an integer as another sender's text
            version = int(version)
        due = properties.get(DELIVER_AT_PROPERTY)
        if due is not None:
            at = parse_time(due)
            aware = at if at is not None and at.tzinfo is not None else None
            return MessageEnvelope(
                0 if version is None else version, properties.get(own), data, "properties", aware
            )
        return MessageEnvelope(version, properties.get(own), data, "properties")
    return MessageEnvelope(
        data.get("version"),
        data.get(own),
        {k: v for k, v in data.items() if k not in FORMAT_1_ENVELOPE and k != own},
        "data",
    )


class Headers(TypedDict):
    """A message's headers: what a dead letter keeps of what it was sent with (and its failure
    record of it), and what its resubmission (an `Outgoing`) is sent with again."""

    message_id: str | None
    session_id: str | None
    subject: str | None
    content_type: str | None
    correlation_id: str | None


def headers_of(message: object) -> Headers:
    """The headers of `message` (the SDK's received message, a `DeadLetter`, a
    `FailureRecord`, an `Outgoing`: whatever holds them as attributes), as keywords: each of
    `Headers`' keys, its attribute of that name."""
    return cast("Headers", {name: getattr(message, name) for name in Headers.__required_keys__})


@dataclass(frozen=True)
class SentFields:
    """What a message received back (a dead letter) says of the outbox's event or notice it
    carries, from its application properties and CloudEvents attributes, each None when it
    does not say (a message that is not the outbox's says nothing)."""

    event_id: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    action: str | None
    version: int | None
    source: str | None
    #: how many times it was resubmitted (`outboxResubmission`)
    resubmissions: int
    #: the one subscription (or queue) it is for (`outboxTarget`)
    target: str | None


def sent_fields(
    properties: Mapping[str, Any],
    *,
    message_id: str | None,
    session_id: str | None,
    subject: str | None,
) -> SentFields:
    """The fields of a message received back, its MessageId, SessionId and Subject standing in
    for the event id, aggregate id and action it does not name."""
    kind = _text(properties.get("aggregateType"))
    version = properties.get("version")
    if isinstance(version, str) and version.isdigit():
        version = int(version)
    resubmissions = properties.get(RESUBMISSION_PROPERTY)
    return SentFields(
        event_id=_text(properties.get("cloudEvents_id")) or message_id,
        aggregate_type=kind,
        aggregate_id=(_text(properties.get(f"{kind}Id")) if kind else None)
        or _text(properties.get("cloudEvents_subject"))
        or session_id,
        action=_text(properties.get("cloudEvents_type"))
        or _text(properties.get("action"))
        or subject,
        version=version if type(version) is int else None,
        source=_text(properties.get("cloudEvents_source")),
        resubmissions=resubmissions if type(resubmissions) is int else 0,
        target=_text(properties.get(TARGET_PROPERTY)),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
