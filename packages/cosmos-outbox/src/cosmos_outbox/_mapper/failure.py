"""A failed message's stored form (`failedMessage`, format 1) and its group's summary
(`failureGroup`): a dead letter drained from a watched dead-letter queue into the outbox's
container (`cosmos_outbox.operations._failures`), kept as data, or an event the relay set aside
(the quarantine's record of it: entity and `entityKind` `quarantine`, the event's stored
document as the body, an attempt per quarantine numbered by its replays, not a dead letter's
sequence number). Written and read here only (`failure_document`, `failure_record`,
`group_document`, `group_record`).

    {"id": "failure-<sha256(entity, event id)[:32]>", "partitionKey": "outbox-failures-<group>",
     "type": "failedMessage", "format": 1, "group": "3f2a…", "entity": "all-events",
     "entityKind": "subscription", "eventId": "…", "messageId": "…", "sessionId": "…",
     "subject": "…", "contentType": "application/json", "correlationId": null,
     "body": "{…}" | null, "bodyBase64": null | "…", "properties": "{\"aggregateType\": …}",
     "aggregateType": "contact", "aggregateId": "…", "action": "ContactCreated", "version": 3,
     "reason": "HandlerRefused", "description": "…", "cause": "HandlerRefused: …",
     "state": "open", "firstFailedAt": "…", "lastFailedAt": "…", "attemptCount": 2,
     "sequenceNumber": 6130,
     "attempts": [{"at": "…", "sequenceNumber": 6130, "reason": "…", "description": "…",
                   "deliveryCount": 10, "enqueuedAt": "…"}],
     "history": [{"at": "…", "what": "retried", "by": "ada", "operation": "…", "note": "…"}],
     "ttl"?: 1209600}

- The id is the failure's, not the delivery's: `entity` and the event id (the MessageId, or
  the dead letter's sequence number, for a message that is not the outbox's). A retried message
  that fails again is the same record with one more attempt.
- An attempt is one dead letter drained (its sequence number in the dead-letter queue): a
  second write of the same delivery finds its sequence number among the attempts and changes
  nothing. The last ATTEMPTS_KEPT attempts are listed, `attemptCount` counts them all.
  `sequenceNumber` is the last attempt's (the dead letter the record is now, which the dead
  letters' reads order and find it by); a record written before it was kept lacks it (its last
  attempt says it).
- The body is the message's as it was sent (a claim check's message carries the reference:
  its properties say so), as UTF-8 text when it is, else base64; the application properties as
  JSON text (the Functions host re-formats date-like strings of a document: `_mapper`).
- `state`: open (counted in its group), archived (hidden from the open groups: who and why in
  `history`), resolved (retried and accepted). An open record has no `ttl`; an archived or
  resolved one expires after the retention (OUTBOX_FAILURE_RETENTION_SECONDS).

The group's summary (one per group, in the group's partition, written in the same
transactional batch as its records: its counts are exact at any size):

    {"id": "failure-group", "partitionKey": "outbox-failures-<group>", "type": "failureGroup",
     "group": "3f2a…", "entity": "all-events", "entityKind": "subscription", "cause": "…",
     "aggregateType": "contact", "action": "…", "open": 2000, "archived": 0, "resolved": 0,
     "firstFailedAt": "…", "lastFailedAt": "…"}
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = [
    "ATTEMPTS_KEPT",
    "FAILED_MESSAGE_TYPE",
    "FAILURES_OF_AGGREGATE",
    "FAILURES_OF_EVENT",
    "FAILURE_GROUP_TYPE",
    "LATEST_OPEN_FAILURES",
    "OPEN_FAILURES",
    "OPEN_FAILURE_FACTS",
    "SOME_OPEN_FAILURES",
    "FailureAttempt",
    "FailureGroupRecord",
    "FailureNote",
    "FailureRecord",
    "failure_document",
    "failure_example",
    "failure_id",
    "failure_partition",
    "failure_record",
    "group_document",
    "group_record",
]

FAILED_MESSAGE_TYPE = "failedMessage"
#: The records of one event's failures (`@type`: FAILED_MESSAGE_TYPE, `@event`: its id), across
#: groups: the journey of an event reads them.
FAILURES_OF_EVENT = "SELECT * FROM c WHERE c.type = @type AND c.eventId = @event"
FAILURES_OF_AGGREGATE = "SELECT * FROM c WHERE c.type = @type AND c.aggregateId = @id"
#: A group's open records, read in its partition (`@type`: FAILED_MESSAGE_TYPE, `@state`:
#: "open"): OPEN_FAILURES whole; OPEN_FAILURE_FACTS with what a message sent again or its
#: discard notice carries (`failure_record` reads it: its body empty, no attempts or history).
OPEN_FAILURES = "SELECT * FROM c WHERE c.type = @type AND c.state = @state"
OPEN_FAILURE_FACTS = (
    "SELECT c.id, c.type, c.format, c.group, c.entity, c.entityKind, c.eventId, c.messageId,"
    " c.sessionId, c.subject, c.contentType, c.correlationId, c.properties, c.aggregateType,"
    " c.aggregateId, c.action, c.version, c.reason, c.cause, c.state, c.firstFailedAt,"
    " c.lastFailedAt, c.attemptCount, c.sequenceNumber"
    " FROM c WHERE c.type = @type AND c.state = @state"
)
#: `@count` of a group's open records, the highest sequence numbers first (the range index on
#: `/sequenceNumber/?`), their event ids and numbers only (`failure_example`);
#: SOME_OPEN_FAILURES the same in no order (a container that cannot serve the ORDER BY).
LATEST_OPEN_FAILURES = (
    "SELECT TOP @count c.eventId, c.sequenceNumber FROM c"
    " WHERE c.type = @type AND c.state = @state ORDER BY c.sequenceNumber DESC"
)
SOME_OPEN_FAILURES = (
    "SELECT TOP @count c.eventId, c.sequenceNumber FROM c WHERE c.type = @type AND c.state = @state"
)
FAILURE_GROUP_TYPE = "failureGroup"
FAILURE_FORMAT = 1
#: The id of a group's summary in the group's partition.
GROUP_SUMMARY_ID = "failure-group"
#: Attempts listed per record (the count counts them all).
ATTEMPTS_KEPT = 50
FailureState = Literal["open", "archived", "resolved"]


def failure_id(entity: str, key: str) -> str:
    """The record's id: the failure of `key` (an event id) at `entity`."""
    digest = hashlib.sha256(f"{entity}\n{key}".encode()).hexdigest()[:32]
    return f"failure-{digest}"


def failure_partition(group: str) -> str:
    """The partition of a group's records and its summary."""
    return f"outbox-failures-{group}"


def _time(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _parsed(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


@dataclass(frozen=True)
class FailureAttempt:
    """One delivery of the failure dead-lettered (and drained)."""

    at: datetime
    sequence_number: int
    reason: str | None
    description: str | None
    delivery_count: int
    enqueued_at: datetime | None


@dataclass(frozen=True)
class FailureNote:
    """What was done to a failure: retried, archived, unarchived; when, who, which operation."""

    at: datetime
    what: str
    by: str
    operation: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class FailureRecord:
    """A failed message (see the module)."""

    id: str
    group: str
    entity: str
    entity_kind: str
    event_id: str | None
    message_id: str | None
    session_id: str | None
    subject: str | None
    content_type: str | None
    correlation_id: str | None
    body: bytes
    properties: Mapping[str, Any]
    aggregate_type: str | None
    aggregate_id: str | None
    action: str | None
    version: int | None
    reason: str | None
    description: str | None
    cause: str
    state: FailureState
    first_failed_at: datetime
    last_failed_at: datetime
    attempt_count: int
    attempts: tuple[FailureAttempt, ...] = ()
    history: tuple[FailureNote, ...] = ()
    #: seconds until it expires (None: kept while open)
    ttl: int | None = None
    etag: str | None = field(default=None, compare=False)

    @property
    def partition(self) -> str:
        return failure_partition(self.group)

    def delivered(self, sequence_number: int) -> bool:
        """Whether the dead letter of that sequence number is one of its attempts already."""
        return any(a.sequence_number == sequence_number for a in self.attempts)

    def with_attempt(self, attempt: FailureAttempt, *, group: str, cause: str) -> FailureRecord:
        """The record once this attempt failed too: open again, one more attempt, its last
        failure and reason the attempt's."""
        return replace(
            self,
            group=group,
            cause=cause,
            reason=attempt.reason,
            description=attempt.description,
            state="open",
            ttl=None,
            last_failed_at=max(self.last_failed_at, attempt.at),
            attempt_count=self.attempt_count + 1,
            attempts=(*self.attempts, attempt)[-ATTEMPTS_KEPT:],
        )


def failure_document(record: FailureRecord) -> dict[str, Any]:
    """The stored form of a failure record."""
    try:
        text: str | None = record.body.decode("utf-8")
        encoded = None
    except UnicodeDecodeError:
        text, encoded = None, base64.b64encode(record.body).decode("ascii")
    document: dict[str, Any] = {
        "id": record.id,
        "partitionKey": record.partition,
        "type": FAILED_MESSAGE_TYPE,
        "format": FAILURE_FORMAT,
        "group": record.group,
        "entity": record.entity,
        "entityKind": record.entity_kind,
        "eventId": record.event_id,
        "messageId": record.message_id,
        "sessionId": record.session_id,
        "subject": record.subject,
        "contentType": record.content_type,
        "correlationId": record.correlation_id,
        "body": text,
        "bodyBase64": encoded,
        "properties": json.dumps(dict(record.properties), default=str, ensure_ascii=False),
        "aggregateType": record.aggregate_type,
        "aggregateId": record.aggregate_id,
        "action": record.action,
        "version": record.version,
        "reason": record.reason,
        "description": record.description,
        "cause": record.cause,
        "state": record.state,
        "firstFailedAt": _time(record.first_failed_at),
        "lastFailedAt": _time(record.last_failed_at),
        "attemptCount": record.attempt_count,
        "attempts": [
            {
                "at": _time(a.at),
                "sequenceNumber": a.sequence_number,
                "reason": a.reason,
                "description": a.description,
                "deliveryCount": a.delivery_count,
                "enqueuedAt": _time(a.enqueued_at),
            }
            for a in record.attempts
        ],
        "history": [
            {
                "at": _time(n.at),
                "what": n.what,
                "by": n.by,
                "operation": n.operation,
                "note": n.note,
            }
            for n in record.history
        ],
    }
    if record.attempts:
        document["sequenceNumber"] = record.attempts[-1].sequence_number
    if record.ttl is not None:
        document["ttl"] = record.ttl
    return document


def failure_example(document: Mapping[str, Any]) -> tuple[str | None, int]:
    """A record as LATEST_OPEN_FAILURES reads it: its event id and its sequence number (0:
    none kept)."""
    event_id = document.get("eventId")
    return (
        str(event_id) if event_id is not None else None,
        int(document.get("sequenceNumber") or 0),
    )


def failure_record(document: Mapping[str, Any]) -> FailureRecord:
    """A stored failure record, read (ValueError: not one this version reads)."""
    if document.get("type") != FAILED_MESSAGE_TYPE:
        raise ValueError(f"not a {FAILED_MESSAGE_TYPE}: {document.get('type')!r}")
    if document.get("format") != FAILURE_FORMAT:
        raise ValueError(f"a {FAILED_MESSAGE_TYPE} of format {document.get('format')!r}")
    encoded = document.get("bodyBase64")
    body = base64.b64decode(encoded) if encoded else str(document.get("body") or "").encode("utf-8")
    first = _parsed(document.get("firstFailedAt"))
    last = _parsed(document.get("lastFailedAt"))
    if first is None or last is None:
        raise ValueError(f"a {FAILED_MESSAGE_TYPE} without its failure times")
    return FailureRecord(
        id=str(document["id"]),
        group=str(document["group"]),
        entity=str(document["entity"]),
        entity_kind=str(document.get("entityKind") or "subscription"),
        event_id=document.get("eventId"),
        message_id=document.get("messageId"),
        session_id=document.get("sessionId"),
        subject=document.get("subject"),
        content_type=document.get("contentType"),
        correlation_id=document.get("correlationId"),
        body=body,
        properties=json.loads(document.get("properties") or "{}"),
        aggregate_type=document.get("aggregateType"),
        aggregate_id=document.get("aggregateId"),
        action=document.get("action"),
        version=document.get("version"),
        reason=document.get("reason"),
        description=document.get("description"),
        cause=str(document.get("cause") or ""),
        state=document.get("state", "open"),
        first_failed_at=first,
        last_failed_at=last,
        attempt_count=int(document.get("attemptCount") or 0),
        attempts=tuple(
            FailureAttempt(
                at=_parsed(a.get("at")) or last,
                sequence_number=int(a["sequenceNumber"]),
                reason=a.get("reason"),
                description=a.get("description"),
                delivery_count=int(a.get("deliveryCount") or 0),
                enqueued_at=_parsed(a.get("enqueuedAt")),
            )
            for a in document.get("attempts") or ()
        ),
        history=tuple(
            FailureNote(
                at=_parsed(n.get("at")) or last,
                what=str(n.get("what")),
                by=str(n.get("by")),
                operation=n.get("operation"),
                note=n.get("note"),
            )
            for n in document.get("history") or ()
        ),
        ttl=document.get("ttl"),
        etag=document.get("_etag"),
    )


@dataclass(frozen=True)
class FailureGroupRecord:
    """A group's summary: its key and exact counts by state (see the module)."""

    group: str
    entity: str
    entity_kind: str
    cause: str
    aggregate_type: str | None
    action: str | None
    open: int = 0
    archived: int = 0
    resolved: int = 0
    first_failed_at: datetime | None = None
    last_failed_at: datetime | None = None
    etag: str | None = field(default=None, compare=False)

    @property
    def partition(self) -> str:
        return failure_partition(self.group)

    def counted(self, state: FailureState, by: int) -> FailureGroupRecord:
        return replace(
            self,
            open=self.open + (by if state == "open" else 0),
            archived=self.archived + (by if state == "archived" else 0),
            resolved=self.resolved + (by if state == "resolved" else 0),
        )

    def seen(self, at: datetime) -> FailureGroupRecord:
        first = at if self.first_failed_at is None else min(self.first_failed_at, at)
        last = at if self.last_failed_at is None else max(self.last_failed_at, at)
        return replace(self, first_failed_at=first, last_failed_at=last)


def group_document(group: FailureGroupRecord) -> dict[str, Any]:
    """The stored form of a group's summary."""
    return {
        "id": GROUP_SUMMARY_ID,
        "partitionKey": group.partition,
        "type": FAILURE_GROUP_TYPE,
        "format": FAILURE_FORMAT,
        "group": group.group,
        "entity": group.entity,
        "entityKind": group.entity_kind,
        "cause": group.cause,
        "aggregateType": group.aggregate_type,
        "action": group.action,
        "open": group.open,
        "archived": group.archived,
        "resolved": group.resolved,
        "firstFailedAt": _time(group.first_failed_at),
        "lastFailedAt": _time(group.last_failed_at),
    }


def group_record(document: Mapping[str, Any]) -> FailureGroupRecord:
    """A stored group summary, read (ValueError: not one)."""
    if document.get("type") != FAILURE_GROUP_TYPE:
        raise ValueError(f"not a {FAILURE_GROUP_TYPE}: {document.get('type')!r}")
    return FailureGroupRecord(
        group=str(document["group"]),
        entity=str(document["entity"]),
        entity_kind=str(document.get("entityKind") or "subscription"),
        cause=str(document.get("cause") or ""),
        aggregate_type=document.get("aggregateType"),
        action=document.get("action"),
        open=int(document.get("open") or 0),
        archived=int(document.get("archived") or 0),
        resolved=int(document.get("resolved") or 0),
        first_failed_at=_parsed(document.get("firstFailedAt")),
        last_failed_at=_parsed(document.get("lastFailedAt")),
        etag=document.get("_etag"),
    )
