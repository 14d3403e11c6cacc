"""The event document: how an outbox event is stored in the container, written and read here and
nowhere else (the session's events, the aggregates' events, the relay's parser, the operators').

    {"id": <event id>, "partitionKey": <partition>, "type": "domainEvent",
     "aggregateType": "order", "aggregateId": <aggregate or session id>, "source": "/orders",
     "action": "OrderPlaced", "version": 3, "createdAt": "2026-11-24T21:47:02.123456+00:00",
     "traceparent": "00-...", "body": "{\"customerName\":\"Ada\",\"totalCents\":1200}",
     "subject"?: ..., "properties"?: "{\"tenant\":\"t1\"}", "dataschema"?: ..., "ttl": 864000}

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

Documents of the format before (format 1: `data` = the envelope and the app's fields in one
object, `<aggregateType>Id` for the aggregate id; the message body was that object) are still
read, and relayed as they were: `EventFields.format` tells them apart.
"""

from __future__ import annotations

import json
from _json import make_encoder
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, NamedTuple

from pydantic import ValidationError

from cosmos_outbox._domain import AGGREGATES, Event
from cosmos_outbox._records import (
    FeedItem,
    LegacyEvents,
    NotAnEvent,
    OutboxRecord,
    PoisonEventError,
    StoredFields,
    Unreadable,
    plain_fields,
    reserved_property,
)

EVENT_TYPE = "domainEvent"
#: The message format of an event stored in this module's format (the `outboxFormat`
#: application property); format 1 is the one before, without the property.
FORMAT = 2
#: The fields of an event that are its envelope, not its data (the `Event` model's names).
ENVELOPE_FIELDS: set[str] = {"id", "aggregate_id", "version", "created_at", "traceparent", "action"}
#: The envelope's names in the data of a format 1 event (and `<aggregateType>Id`).
_FORMAT_1_ENVELOPE = frozenset({"id", "version", "createdAt", "traceparent", "action"})
#: JSON text of a body: compact, UTF-8 as is; json's own C encoder, built once (`json.dumps`
#: builds one, and a closure, per call). No cycle check: a body is a tree. NaN and the
#: infinities are not JSON (Cosmos DB refuses them): refused.
_BODY_JSON = make_encoder(
    None, json.JSONEncoder().default, encode_basestring, None, ":", ",", False, False, False
)
#: The same for a format 1 event's data, as it was (its stored data: no NaN can be in it).
_DATA_JSON = make_encoder(
    None, json.JSONEncoder().default, encode_basestring, None, ":", ",", False, False, True
)


def body_text(data: Any) -> str:
    """The JSON text of an event's body. TypeError or ValueError when it is not JSON."""
    return "".join(_BODY_JSON(data, 0))


def stored_size(text: str) -> int:
    """How many bytes a string is in a document as the SDK sends it (JSON, ASCII: a character a
    byte, quotes included)."""
    return len(encode_basestring_ascii(text))


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
) -> dict[str, Any]:
    """One event's document. `body` and `properties` are JSON text (`body_text`). A session's
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
    return document


def stamp(document: dict[str, Any], version: int, created_at: str) -> None:
    """A session's event given its number in the session's sequence and its time, at commit."""
    document["version"], document["createdAt"] = version, created_at


def aggregate_event_document(event: Event, *, source: str, ttl_seconds: int) -> dict[str, Any]:
    """The document of one event an aggregate recorded: in its aggregate's partition, its body
    the event's own fields (camelCase), its envelope the rest; expiring after `ttl_seconds`."""
    created_at = event.model_dump(mode="json", by_alias=True, include={"created_at"})
    return event_document(
        event_id=event.id,
        partition_key=event.aggregate_id,
        aggregate_type=event.aggregate_type,
        aggregate_id=event.aggregate_id,
        source=source,
        action=event.action,
        version=event.version,
        created_at=created_at["createdAt"],
        traceparent=event.traceparent,
        body=body_text(event.model_dump(mode="json", by_alias=True, exclude=ENVELOPE_FIELDS)),
        ttl=ttl_seconds,
    )


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
    get = document.get
    properties = _own_properties(_properties_of(get("properties")), aggregate_type)
    subject = get("subject")
    if subject is not None and (not isinstance(subject, str) or not subject):
        raise PoisonEventError("event subject must be a non-empty string")
    traceparent, dataschema = get("traceparent"), get("dataschema")
    plain = plain_fields(
        get("id"), aggregate_type, get("aggregateId"), get("action"), get("version"), source
    )
    if plain is None:
        checked = _checked(
            get("id"),
            aggregate_type,
            get("aggregateId"),
            get("action"),
            get("version"),
            source,
            id_key="aggregateId",
            prefix="",
        )
        plain = checked.event_id, checked.aggregate_id, checked.action, checked.version
    event_id, aggregate_id, action, version = plain
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
        body=payload,
        properties=properties,
        subject=subject,
        document=document,
        format=FORMAT,
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
        body = "".join(_DATA_JSON(data, 0)).encode()
    except (TypeError, ValueError) as exc:
        raise PoisonEventError(f"event data is not serialisable: {exc}") from None
    get = data.get
    traceparent, dataschema = get("traceparent"), document.get("dataschema")
    properties = _own_properties(document.get("properties"), aggregate_type)
    subject = document.get("subject")
    if subject is not None and (not isinstance(subject, str) or not subject):
        raise PoisonEventError("event subject must be a non-empty string")
    # The stored fields last: an event wrong in several ways is set aside for the first above.
    own = f"{aggregate_type}Id"
    plain = plain_fields(get("id"), aggregate_type, get(own), get("action"), get("version"), source)
    if plain is None:
        checked = _checked(
            get("id"),
            aggregate_type,
            get(own),
            get("action"),
            get("version"),
            source,
            id_key=own,
            prefix="data.",
        )
        plain = checked.event_id, checked.aggregate_id, checked.action, checked.version
        source = checked.event_source
    event_id, aggregate_id, action, version = plain
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
        format=1,
    )


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
    """An event's application properties of the app's own (a session's event may carry some):
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
