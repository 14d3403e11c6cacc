"""The stored event document, read (either format): what a stored event must be
(`StoredFields`), its fields (`fields`, `envelope_and_data`), the outbox record the relay sends
from (`read_feed`, `outbox_record`) or the reason it cannot (`unreadable`), its times."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from cosmos_outbox._domain import AGGREGATES
from cosmos_outbox._mapper.properties import (
    DELIVER_AT_PROPERTY,
    FORMAT,
    FORMAT_PROPERTY,
    REDRIVE_PROPERTY,
    RESUBMISSION_PROPERTY,
    TARGET_PROPERTY,
)
from cosmos_outbox._records import (
    FeedItem,
    LegacyEvents,
    NotAnEvent,
    OutboxRecord,
    PoisonEventError,
    Unreadable,
)

#: The `type` of an event document.
EVENT_TYPE = "domainEvent"
#: The envelope's names in the data of a format 1 event (and `<aggregateType>Id`).
FORMAT_1_ENVELOPE = frozenset({"id", "version", "createdAt", "traceparent", "action"})
#: The same for a format 1 event's data, as it was (its stored data: no NaN can be in it).
_DATA_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)


# -- what a stored event must be ---------------------------------------------------------------

_MAX_ID = 128
Identifier = Annotated[str, Field(min_length=1, max_length=_MAX_ID)]


class StoredFields(BaseModel):
    """The fields of an outbox record read from the stored data, and their rules: the reason a
    stored event that breaks one is quarantined with (`outbox_record` names the field as
    stored). `plain_fields` is the same verdict, checked cheaply first."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
        {k: v for k, v in stored.items() if k not in FORMAT_1_ENVELOPE and k != own},
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
    identity = (found.event_id, found.aggregate_type, found.aggregate_id, found.version)
    context = (found.created_at, found.traceparent, found.deliver_at)
    envelope = event_envelope((*identity, found.action), context, stored=True)
    return {**envelope, **found.data}


def event_envelope(
    identity: tuple[object, object, object, object, object],
    context: tuple[object, object, object] = (None, None, None),
    *,
    stored: bool = False,
) -> dict[str, Any]:
    """An event's envelope as one object, camelCase, as `Aggregate.parse_event` reads it beside
    the event's data: `identity` its id, aggregate type, aggregate id, version and action (the
    aggregate id as `<aggregateType>Id`), `context` its time, trace context and due time. From a
    stored event (`envelope_and_data`, `stored`: its time and trace context as read, None
    included) or a subscriber's (`IncomingEvent.envelope_and_data`: one it lacks left out); a
    due time only for a scheduled event."""
    event_id, aggregate_type, aggregate_id, version, action = identity
    created_at, traceparent, deliver_at = context
    envelope: dict[str, Any] = {"id": event_id, f"{aggregate_type}Id": aggregate_id}
    envelope |= {"version": version, "action": action}
    given = {"createdAt": created_at, "traceparent": traceparent}
    envelope |= {name: value for name, value in given.items() if stored or value is not None}
    if deliver_at is not None:
        envelope["deliverAt"] = deliver_at
    return envelope


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
    # a scheduled event has no version of its aggregate (0) and its three instants
    deliver_at, released_at, cancelled_at = schedule if schedule is not None else (None,) * 3
    return OutboxRecord(
        event_id=event_id,
        aggregate_id=aggregate_id,
        action=action,
        version=0 if schedule is not None else version,
        aggregate_type=aggregate_type,
        created_at=parse_time(get("createdAt")),
        traceparent=traceparent if isinstance(traceparent, str) and traceparent else None,
        event_source=source,
        dataschema=dataschema if isinstance(dataschema, str) and dataschema else None,
        body=body,
        properties=properties,
        subject=subject,
        document=document,
        partition_key=_text_of(document.get("partitionKey")),
        format=format,
        deliver_at=deliver_at,
        released_at=released_at,
        cancelled_at=cancelled_at,
    )


def _text_of(value: object) -> str | None:
    return value if isinstance(value, str) else None


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


def created_at_of(document: Mapping[str, Any]) -> datetime | None:
    """A stored event's creation time, if readable (as stored: naive when it was)."""
    return parse_time(fields(document).created_at)


def document_created_at(document: Mapping[str, Any]) -> float | None:
    """A stored event's creation time (epoch seconds), if readable; naive times are UTC."""
    at = created_at_of(document)
    if at is None:
        return None
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()


def named_aggregate(document: Mapping[str, Any]) -> str | None:
    """The aggregate a document of the outbox's container names (an event's `aggregateId`, a
    quarantine record's, or its event's), None when it names none."""
    named = document.get("aggregateId")
    if named is None and isinstance(document.get("data"), Mapping):
        named = document["data"].get("aggregateId")
    return named if isinstance(named, str) else None


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


def stored_body(document: Mapping[str, Any]) -> str:
    """A format 2 event document's body as stored (JSON text; empty when it has none)."""
    body = document.get("body")
    return body if isinstance(body, str) else ""


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
