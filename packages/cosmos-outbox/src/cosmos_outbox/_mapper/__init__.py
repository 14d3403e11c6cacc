"""The mapper: the one owner of an outbox event's forms, both directions, both formats.

    event (an aggregate's `Event`, or what a transaction publishes)
        -> event document (stored in the container)  -> outbox record (what the relay reads)
        -> outbox message (what the relay sends)      -> envelope (what a subscriber reads)

Written and read here and nowhere else: the write path makes event documents here
(`event_document`, `aggregate_event_document`, `stamp`); the relay, the quarantine, the operators,
the estimator and the test kit read them here (`read_feed`, `outbox_record`, `unreadable`,
`fields`, `envelope_and_data`, `created_at_of`); the relay makes its messages here (`to_message`,
`claim_check`, `quarantine_notice`); the subscriber reads a message's envelope here
(`message_envelope`). The values it maps between (`OutboxRecord`, `Unreadable`, `NotAnEvent`,
`OutboxMessage`, `LegacyEvents`) are `cosmos_outbox._records`' (a module without pydantic: the
settings and the ports import them at a cold start). An aggregate's partition is named once
(`aggregate_partition`).

The event document (format 2):

    {"id": <event id>, "partitionKey": <partition>, "type": "domainEvent",
     "aggregateType": "order", "aggregateId": <aggregate id | session id>, "source": "/orders",
     "action": "OrderPlaced", "version": 3, "createdAt": "2026-11-24T21:47:02.123456+00:00",
     "traceparent": "00-...", "body": "{\"customerName\":\"Ada\",\"totalCents\":1200}",
     "subject"?: ..., "properties"?: "{\"tenant\":\"t1\"}", "dataschema"?: ..., "ttl": 864000,
     "deliverAt"?: "2026-11-24T22:02:02+00:00", "releasedAt"?: ..., "cancelledAt"?: ...}

- `body` is the message body as JSON text (compact, UTF-8 as is): the app's data exactly as it
  published it, nothing added. It is kept as a string because the Azure Functions host hands
  trigger documents to the worker through Newtonsoft.Json, which re-formats date-like string
  values (Azure/Azure-Functions#1399); a string that is JSON text is never read as a date, so the
  relay sends the bytes the app committed. The app's own application properties are kept as JSON
  text (`properties`) for the same reason.
- The envelope (event id, aggregate type and id, action, version, time, trace context, source,
  subject) is top-level; the relay sends it as application properties and CloudEvents
  attributes. It reads the time by parsing it (`createdAt`, which the Azure host may have
  re-formatted) and writes it in one form.
- A **scheduled** event (`deliverAt`: when it is due, UTC) has `version` 0: it takes no place in
  its stream's order (`cosmos_outbox._write.streams`), and its document is kept `ttl` = the
  event TTL counted from its due time. It is sent once released (`releasedAt`, written at its due
  time by `cosmos_outbox._relay.releases`), never once cancelled (`cancelledAt`, written by the
  app's `Transaction.cancel`): the relay reads which from the document (`OutboxRecord`).

Documents of the format before (format 1: `data` = the envelope and the app's fields in one
object, `<aggregateType>Id` for the aggregate id; the message body was that object) are still
read, and relayed as they were: `EventFields.format` tells them apart.

The message (format 2, the `outboxFormat` application property): body = the app's data as it
published it, MessageId = event id, SessionId = aggregate id, Subject = action (or the event's
own subject), application properties `aggregateType`, `<aggregateType>Id` (`orderId`),
`version`, `action`, `outboxFormat`, and `traceparent`/`Diagnostic-Id` when the event carries a
trace context; the broker adapter adds the CloudEvents attributes (`cosmos_outbox.servicebus`).
A scheduled event's message has `deliverAt` (when it was due, UTC, ISO 8601) and no `version`.
An event stored in format 1 is sent as it was: its data the body, no `outboxFormat`. The claim
check: a message too large for the topic travels with an empty body and the CloudEvents
`dataref` attribute, the reference of its body in the payload store, stored under
`payload_name(record)`.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, NamedTuple
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from cosmos_outbox import _clock as clock
from cosmos_outbox._domain import AGGREGATES, Aggregate, Event
from cosmos_outbox._records import (
    FeedItem,
    LegacyEvents,
    NotAnEvent,
    OutboxMessage,
    OutboxRecord,
    PoisonEventError,
    Unreadable,
)

EVENT_TYPE = "domainEvent"
#: The message format of an event stored in this module's format (the `outboxFormat`
#: application property); format 1 is the one before, without the property.
FORMAT = 2
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
#: The fields of an event that are its envelope, not its data: the `Event` model's own (an
#: option added to it is in the envelope, never in an event's body).
ENVELOPE_FIELDS: set[str] = set(Event.model_fields)
#: The application property of a scheduled event's message: when it was due.
DELIVER_AT_PROPERTY = "deliverAt"
#: The most seconds Cosmos DB keeps a document for (`ttl` is a 32-bit integer).
MAX_TTL_SECONDS = 2**31 - 1
#: The envelope's names in the data of a format 1 event (and `<aggregateType>Id`).
_FORMAT_1_ENVELOPE = frozenset({"id", "version", "createdAt", "traceparent", "action"})
#: JSON text of a body: compact, UTF-8 as is, no cycle check (a body is a tree). NaN and the
#: infinities are not JSON (Cosmos DB refuses them): refused.
_BODY_JSON = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
)
#: The same for a format 1 event's data, as it was (its stored data: no NaN can be in it).
_DATA_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)


# -- the event, written -----------------------------------------------------------------------


def aggregate_partition(aggregate_id: str) -> str:
    """The partition of an aggregate, and of everything written with it (its events, the
    Idempotency-Key records of its changes): its own id. Said here once; every reader and
    writer of an aggregate's partition asks here."""
    return aggregate_id


def body_text(data: Any) -> str:
    """The JSON text of an event's body. TypeError or ValueError when it is not JSON."""
    return _BODY_JSON.encode(data)


def event_document(
    *,
    event_id: str,
    partition_key: str,
    aggregate_type: str,
    aggregate_id: str,
    source: str,
    action: str,
    body: str,
    ttl: int,
    version: int = 0,
    created_at: str = "",
    traceparent: str | None = None,
    subject: str | None = None,
    properties: str | None = None,
    deliver_at: str | None = None,
) -> dict[str, Any]:
    """One event's document. `body` and `properties` are JSON text (`body_text`); `deliver_at`
    the due time of a scheduled event (`due_text`), whose `version` stays 0. A transaction's
    event is written before its commit gives it its number and time (`stamp`)."""
    document = {
        "id": event_id,
        "partitionKey": partition_key,
        "type": EVENT_TYPE,
        "aggregateType": aggregate_type,
        "aggregateId": aggregate_id,
        "source": source,
        "action": action,
        "version": version,
        "createdAt": created_at,
        "traceparent": traceparent,
        "body": body,
        "ttl": ttl,
    }
    if subject is not None:
        document["subject"] = subject
    if properties is not None:
        document["properties"] = properties
    if deliver_at is not None:
        document["deliverAt"] = deliver_at
    return document


def stamp(document: dict[str, Any], version: int, created_at: str) -> None:
    """A transaction's event given its number in its sequence and its time, at commit."""
    document["version"], document["createdAt"] = version, created_at


def scheduled(document: Mapping[str, Any]) -> bool:
    """Whether an event document is a scheduled event's (it has a due time)."""
    return "deliverAt" in document


def due_text(at: datetime) -> str:
    """A due time as an event document and a message keep it: ISO 8601 in UTC."""
    return at.astimezone(UTC).isoformat()


def scheduled_ttl(ttl_seconds: int, deliver_at: datetime, now: datetime) -> int:
    """The `ttl` of a scheduled event's document: `ttl_seconds` counted from its due time (the
    relay's allowance for an outage is the same as for any event). ValueError, naming Cosmos
    DB's limit, when it is more than a document can be kept for."""
    ahead = max(0.0, (deliver_at - now).total_seconds())
    ttl = ttl_seconds + int(ahead) + (ahead % 1 > 0)
    if ttl > MAX_TTL_SECONDS:
        raise ValueError(
            f"deliver_at {deliver_at.isoformat()} is too far ahead: its event document must be "
            f"kept until then and the event TTL ({ttl_seconds} s) after it, and Cosmos DB keeps "
            f"a document at most {MAX_TTL_SECONDS} s (about 68 years)"
        )
    return ttl


def cancelled(document: Mapping[str, Any], at: str) -> dict[str, Any]:
    """A scheduled event's document, cancelled at `at` (the relay never sends it)."""
    return {**without_system_keys(document), "cancelledAt": at}


def released(document: Mapping[str, Any], at: str, ttl_seconds: int) -> dict[str, Any]:
    """A scheduled event's document, released at `at` (its due time came: the relay sends it),
    kept `ttl_seconds` from now (its due time's allowance, counted from its release)."""
    return {**without_system_keys(document), "releasedAt": at, "ttl": ttl_seconds}


def aggregate_event_document(event: Event, *, source: str, ttl_seconds: int) -> dict[str, Any]:
    """The document of one event an aggregate recorded: in its aggregate's partition, its body
    the event's own fields (camelCase), its envelope the rest; expiring after `ttl_seconds`
    (counted from its due time for a scheduled event)."""
    created_at = event.model_dump(mode="json", by_alias=True, include={"created_at"})
    deliver_at = event.deliver_at
    if deliver_at is not None:
        ttl_seconds = scheduled_ttl(ttl_seconds, deliver_at, clock.now())
    return event_document(
        event_id=event.id,
        partition_key=aggregate_partition(event.aggregate_id),
        aggregate_type=event.aggregate_type,
        aggregate_id=event.aggregate_id,
        source=source,
        action=event.action,
        version=event.version,
        created_at=created_at["createdAt"],
        traceparent=event.traceparent,
        body=body_text(event.model_dump(mode="json", by_alias=True, exclude=ENVELOPE_FIELDS)),
        ttl=ttl_seconds,
        deliver_at=None if deliver_at is None else due_text(deliver_at),
    )


def event_documents(aggregate: Aggregate, *, ttl_seconds: int) -> list[dict[str, Any]]:
    """The documents of the events the aggregate recorded (collected: it forgets them)."""
    return [
        aggregate_event_document(e, source=aggregate.source(), ttl_seconds=ttl_seconds)
        for e in aggregate.collect_events()
    ]


# -- what a stored event must be ---------------------------------------------------------------

_MAX_ID = 128
Identifier = Annotated[str, Field(min_length=1, max_length=_MAX_ID)]


class StoredFields(BaseModel):
    """The fields of an outbox record read from the stored data, and their rules: the reason a
    stored event that breaks one is quarantined with (`outbox_record` names the field as
    stored). `plain_fields` is the same verdict, checked cheaply first."""

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
        DELIVER_AT_PROPERTY,
        TARGET_PROPERTY,
        RESUBMISSION_PROPERTY,
        REDRIVE_PROPERTY,
    ) or name.lower().startswith("cloudevents")


# -- the stored event, read (either format) ----------------------------------------------------


class EventFields(NamedTuple):
    """What an event document says, read in either format, without checking it: the
    operators', the estimator's and the test kit's view of a stored event (the relay's is the
    checked `OutboxRecord`, `outbox_record`)."""

    event_id: object
    aggregate_type: object
    aggregate_id: object
    action: object
    version: object
    created_at: object
    traceparent: object
    #: the app's data: the body parsed (format 2), the data without the envelope (format 1);
    #: None when it cannot be read
    data: Mapping[str, Any] | None
    format: int
    #: a scheduled event's due time, and when it was released or cancelled (as stored)
    deliver_at: object = None
    released_at: object = None
    cancelled_at: object = None


def fields(document: Mapping[str, Any], *, legacy: LegacyEvents | None = None) -> EventFields:
    """The fields of a stored event, in either format (see the module)."""
    kind = _aggregate_type(document, legacy)
    body = document.get("body")
    if isinstance(body, str):
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        get = document.get
        return EventFields(
            get("id"),
            kind,
            get("aggregateId"),
            get("action"),
            get("version"),
            get("createdAt"),
            get("traceparent"),
            data if isinstance(data, Mapping) else None,
            FORMAT,
            get("deliverAt"),
            get("releasedAt"),
            get("cancelledAt"),
        )
    stored = document.get("data")
    if not isinstance(stored, Mapping):
        return EventFields(document.get("id"), kind, None, None, None, None, None, None, 1)
    own = f"{kind}Id"
    return EventFields(
        stored.get("id"),
        kind,
        stored.get(own),
        stored.get("action"),
        stored.get("version"),
        stored.get("createdAt"),
        stored.get("traceparent"),
        {k: v for k, v in stored.items() if k not in _FORMAT_1_ENVELOPE and k != own},
        1,
    )


def envelope_and_data(
    document: Mapping[str, Any], *, legacy: LegacyEvents | None = None
) -> dict[str, Any]:
    """A stored event's data with its envelope in one object, camelCase (`<aggregateType>Id`
    for the aggregate id): what a format 1 document kept as its `data`, and what
    `Aggregate.parse_event` reads. Empty when its data cannot be read."""
    found = fields(document, legacy=legacy)
    if found.data is None:
        return {}
    envelope = {
        "id": found.event_id,
        f"{found.aggregate_type}Id": found.aggregate_id,
        "version": found.version,
        "createdAt": found.created_at,
        "traceparent": found.traceparent,
        "action": found.action,
    }
    if found.deliver_at is not None:
        envelope["deliverAt"] = found.deliver_at
    return {**envelope, **found.data}


def read_feed(
    documents: Iterable[Mapping[str, Any]], *, legacy: LegacyEvents | None = None
) -> Iterator[FeedItem]:
    """Change-feed documents as the relay's typed items: events become outbox records (or
    Unreadable, with the reason), anything else NotAnEvent. `legacy`: how to read events
    stored before documents named their aggregate type and source."""
    for document in documents:
        if document.get("type") != EVENT_TYPE:
            yield NotAnEvent(str(document.get("id")))
            continue
        try:
            yield outbox_record(document, legacy=legacy)
        except PoisonEventError as exc:
            yield unreadable(document, str(exc), legacy=legacy)


def outbox_record(
    document: Mapping[str, Any], *, legacy: LegacyEvents | None = None
) -> OutboxRecord:
    """Parse one stored event, in either format. Raises PoisonEventError naming what is
    wrong."""
    aggregate_type = _aggregate_type(document, legacy)
    body = document.get("body")
    if isinstance(body, str):
        if not isinstance(aggregate_type, str) or not aggregate_type:
            raise PoisonEventError("event aggregateType must be a non-empty string")
        return _record(document, aggregate_type, body)
    return _format_1_record(document, aggregate_type, legacy)


def _record(document: Mapping[str, Any], aggregate_type: str, body: str) -> OutboxRecord:
    """A format 2 event: its body sent as stored, its envelope from the document."""
    source = document.get("source")
    if not isinstance(source, str) or not source:
        raise PoisonEventError("event source must be a non-empty string")
    try:
        payload = body.encode()
    except UnicodeEncodeError as exc:
        raise PoisonEventError(f"event body is not UTF-8 text: {exc}") from None
    properties = _own_properties(_properties_of(document.get("properties")), aggregate_type)
    return _enveloped(
        document, document, aggregate_type, source, payload, properties, "aggregateId", FORMAT
    )


def _properties_of(value: object) -> object:
    """A format 2 event's own application properties: JSON text of an object (None: none)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise PoisonEventError("event properties are not JSON text") from None


def _format_1_record(
    document: Mapping[str, Any], aggregate_type: object, legacy: LegacyEvents | None
) -> OutboxRecord:
    """A format 1 event (`data`): relayed as it was, its data the body."""
    data = document.get("data")
    if not isinstance(data, Mapping):
        raise PoisonEventError("event document has no 'body' text nor 'data' object")
    if not isinstance(aggregate_type, str) or not aggregate_type:
        raise PoisonEventError("event aggregateType must be a non-empty string")
    source = _event_source(document, legacy)
    if source is None:
        raise PoisonEventError("event source must be a non-empty string")
    try:
        body = _DATA_JSON.encode(data).encode()
    except (TypeError, ValueError) as exc:
        raise PoisonEventError(f"event data is not serialisable: {exc}") from None
    properties = _own_properties(document.get("properties"), aggregate_type)
    return _enveloped(
        document, data, aggregate_type, source, body, properties, f"{aggregate_type}Id", 1
    )


def _enveloped(
    document: Mapping[str, Any],
    envelope: Mapping[str, Any],
    aggregate_type: str,
    source: str,
    body: bytes,
    properties: dict[str, str | int],
    id_key: str,
    format: int,
) -> OutboxRecord:
    """The record of a stored event of either format, its envelope's fields read from
    `envelope` (the document, or a format 1 event's `data`; `id_key` the aggregate id's name
    there) and checked last: an event wrong in several ways is set aside for the first of the
    others (its source, body, properties, subject)."""
    subject = document.get("subject")
    if subject is not None and (not isinstance(subject, str) or not subject):
        raise PoisonEventError("event subject must be a non-empty string")
    get = envelope.get
    stored_version = get("version")
    schedule: tuple[datetime, datetime | None, datetime | None] | None = None
    if "deliverAt" in document:
        schedule = _schedule(document)
        if type(stored_version) is not int or stored_version != 0:
            raise PoisonEventError(
                "event version must be 0: a scheduled event (deliverAt) takes no place in its "
                "stream's order"
            )
        stored_version = 1  # checked as any event's below; the record's version stays 0
    plain = plain_fields(
        get("id"), aggregate_type, get(id_key), get("action"), stored_version, source
    )
    if plain is None:
        checked = _checked(
            get("id"),
            aggregate_type,
            get(id_key),
            get("action"),
            stored_version,
            source,
            id_key=id_key,
            prefix="" if envelope is document else "data.",
        )
        plain = checked.event_id, checked.aggregate_id, checked.action, checked.version
    event_id, aggregate_id, action, version = plain
    traceparent, dataschema = get("traceparent"), document.get("dataschema")
    if schedule is not None:
        deliver_at, released_at, cancelled_at = schedule
        return OutboxRecord(
            event_id=event_id,
            aggregate_id=aggregate_id,
            action=action,
            version=0,
            aggregate_type=aggregate_type,
            created_at=parse_time(get("createdAt")),
            traceparent=traceparent if isinstance(traceparent, str) and traceparent else None,
            event_source=source,
            dataschema=dataschema if isinstance(dataschema, str) and dataschema else None,
            body=body,
            properties=properties,
            subject=subject,
            document=document,
            format=format,
            deliver_at=deliver_at,
            released_at=released_at,
            cancelled_at=cancelled_at,
        )
    return OutboxRecord(
        event_id=event_id,
        aggregate_id=aggregate_id,
        action=action,
        version=version,
        aggregate_type=aggregate_type,
        created_at=parse_time(get("createdAt")),
        traceparent=traceparent if isinstance(traceparent, str) and traceparent else None,
        event_source=source,
        dataschema=dataschema if isinstance(dataschema, str) and dataschema else None,
        body=body,
        properties=properties,
        subject=subject,
        document=document,
        format=format,
    )


def _schedule(
    document: Mapping[str, Any],
) -> tuple[datetime, datetime | None, datetime | None]:
    """A scheduled event's due time, release and cancellation, as stored (times with their
    offset: the Azure host may have re-formatted them, as any date-like string of a trigger
    document). PoisonEventError naming the field that is not such a time."""
    found: list[datetime | None] = []
    for name in ("deliverAt", "releasedAt", "cancelledAt"):
        value = document.get(name)
        at = parse_time(value)
        if (value is not None or name == "deliverAt") and (at is None or at.tzinfo is None):
            raise PoisonEventError(f"event {name} must be an ISO 8601 time with its UTC offset")
        found.append(at)
    deliver_at, released_at, cancelled_at = found
    assert deliver_at is not None
    return deliver_at, released_at, cancelled_at


def _checked(
    event_id: object,
    aggregate_type: str,
    aggregate_id: object,
    action: object,
    version: object,
    source: str,
    *,
    id_key: str,
    prefix: str,
) -> StoredFields:
    """The stored fields as `StoredFields` takes them; PoisonEventError naming the first one it
    rejects, by its stored name (`version`, `data.orderId`, ...)."""
    try:
        return StoredFields(
            event_id=event_id,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            action=action,
            version=version,
            event_source=source,
        )
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        name = str(error["loc"][0])
        key = {"event_id": "id", "aggregate_id": id_key}.get(name, name)
        raise PoisonEventError(f"event {prefix}{key}: {error['msg']}") from None


def _own_properties(value: object, aggregate_type: str) -> dict[str, str | int]:
    """An event's application properties of the app's own (a transaction's event may carry some):
    string names, string or integer values, none of the outbox's names."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and type(v) in (str, int) for k, v in value.items()
    ):
        raise PoisonEventError("event properties must map names to strings or integers")
    taken = sorted(k for k in value if reserved_property(k, aggregate_type))
    if taken:
        raise PoisonEventError(f"event properties {taken} are the outbox's")
    return dict(value)


def unreadable(
    document: Mapping[str, Any], reason: str, *, legacy: LegacyEvents | None = None
) -> Unreadable:
    """A stored event that is not a valid outbox record, with what can still be read of it:
    its aggregate's id (its partition when it has none), its action and version if they have
    the right type."""
    found = fields(document, legacy=legacy)
    kind, partition = found.aggregate_type, document.get("partitionKey")
    aggregate_id = (
        found.aggregate_id
        if isinstance(found.aggregate_id, str) and found.aggregate_id
        else partition
    )
    return Unreadable(
        str(document.get("id")),
        reason,
        without_system_keys(document),
        aggregate_type=kind if isinstance(kind, str) and kind else None,
        aggregate_id=aggregate_id if isinstance(aggregate_id, str) and aggregate_id else None,
        action=found.action if isinstance(found.action, str) else None,
        version=found.version if type(found.version) is int else None,
        event_source=_event_source(document, legacy) or _registered_source(kind) or "/",
    )


def _aggregate_type(document: Mapping[str, Any], legacy: LegacyEvents | None) -> object:
    """The stored aggregate type; an event stored before documents named it is `legacy`'s."""
    if "aggregateType" not in document and legacy is not None:
        return legacy.aggregate_type
    return document.get("aggregateType")


def _event_source(document: Mapping[str, Any], legacy: LegacyEvents | None) -> str | None:
    """The stored CloudEvents source path; an event stored before documents carried it is
    `legacy`'s."""
    source = document.get("source")
    if isinstance(source, str) and source:
        return source
    return legacy.source if legacy is not None else None


def _registered_source(aggregate_type: object) -> str | None:
    known = AGGREGATES.get(aggregate_type) if isinstance(aggregate_type, str) else None
    return known.source() if known is not None else None


def document_created_at(document: Mapping[str, Any]) -> float | None:
    """A stored event's creation time (epoch seconds), if readable; naive times are UTC."""
    at = parse_time(fields(document).created_at)
    if at is None:
        return None
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()


def selected(
    document: Mapping[str, Any],
    since: datetime,
    aggregate_type: str | None = None,
    *,
    legacy: LegacyEvents | None = None,
) -> bool:
    """Whether a stored event is re-driven: created at or after `since` (an event without a
    readable time is not selected), of `aggregate_type` when given."""
    if aggregate_type is not None and _aggregate_type(document, legacy) != aggregate_type:
        return False
    created = document_created_at(document)
    return created is not None and created >= since.timestamp()


def without_system_keys(document: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if not k.startswith("_")}


def parse_time(value: object) -> datetime | None:
    """A stored time (ISO 8601, as written or as the Azure host re-formatted it), or None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


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
        {k: v for k, v in data.items() if k not in _FORMAT_1_ENVELOPE and k != own},
        "data",
    )
