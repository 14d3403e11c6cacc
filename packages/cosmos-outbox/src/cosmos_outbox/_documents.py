"""The stored documents, generic over aggregates. One envelope for every document:

    {"id", "partitionKey": <aggregate id>, "type", "data": {...}, "ttl"}

- an aggregate: `type` = its aggregate type (`order`), `data` = its fields, camelCase, minus
  the id (`cosmos_outbox._domain.Aggregate`: the model is the one list of fields), `ttl` -1;
- an event: `type` `domainEvent`, `aggregateType`, `source` (the CloudEvents source path of its
  aggregate type, `/<collection>`), `data` = the event (the message body), `ttl` from the
  settings;
- a quarantined event: `type` `quarantinedEvent`, the reason, a copy of the event document;
- an idempotency record: `type` `idempotencyRecord`, id `idem-<sha256 of scope and key>`, in
  its aggregate's partition, `fingerprint`, `request`, `aggregateType`, `version`, `answer`
  (`status`, `location`, `body`), `createdAt`, `ttl` from the settings
  (`cosmos_outbox._idempotency`). Written in the batch of the change it answers for; the relay
  skips it as it skips aggregates.

The etag and the other system properties (`_etag`, `_ts`, ...) stay here, never in the domain.
This module is the boundary both ways: documents are built from the domain here, and parsed
back into aggregates and typed outbox records here.
"""

from __future__ import annotations

import json
from _json import make_encoder
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from json.encoder import encode_basestring
from typing import Any

from pydantic import ValidationError

from cosmos_outbox._domain import AGGREGATES, Aggregate, Event, read_back
from cosmos_outbox._idempotency import Answer, IdempotencyRecord
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
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.ports import BatchOperation

EVENT_TYPE = "domainEvent"
IDEMPOTENCY_TYPE = "idempotencyRecord"
#: The message body's serialisation (compact, UTF-8 as is): json's own C encoder, as
#: `json.dumps(data, separators=(",", ":"), ensure_ascii=False)` runs it, built once for every
#: event (`JSONEncoder.encode` builds one, and a closure, per call: a third of the cost of
#: encoding an event's data). No cycle check: the data is parsed JSON, a tree.
_BODY_JSON = make_encoder(None, json.JSONEncoder().default, encode_basestring, None, ":", ",",
                          False, False, True)


def aggregate_document(aggregate: Aggregate) -> dict[str, Any]:
    return {
        "id": aggregate.id,
        "partitionKey": aggregate.id,
        "type": aggregate.aggregate_type,
        "data": aggregate.model_dump(mode="json", by_alias=True, exclude={"id"}),
        "ttl": -1,
    }


def aggregate_from_document[A: Aggregate](kind: type[A], document: Mapping[str, Any]) -> A:
    """The aggregate a stored document holds. NotFoundError when it is another kind of document
    (an event or a quarantined event with that id)."""
    if document.get("type") != kind.aggregate_type:
        raise NotFoundError(kind.aggregate_type, str(document.get("id")))
    return read_back(kind.model_validate({**document["data"], "id": document["id"]}))


def event_document(event: Event, *, source: str, ttl_seconds: int) -> dict[str, Any]:
    """The envelope of one event: same partition as its aggregate, expiring after `ttl_seconds`;
    `source` is the CloudEvents source path of its aggregate type."""
    return {
        "id": event.id,
        "partitionKey": event.aggregate_id,
        "type": EVENT_TYPE,
        "aggregateType": event.aggregate_type,
        "source": source,
        "data": event.model_dump(mode="json", by_alias=True),
        "ttl": ttl_seconds,
    }


def event_documents(aggregate: Aggregate, *, ttl_seconds: int) -> list[dict[str, Any]]:
    """The envelopes of the events the aggregate recorded (collected: it forgets them)."""
    return [event_document(e, source=aggregate.source(), ttl_seconds=ttl_seconds)
            for e in aggregate.collect_events()]


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


def read_feed(documents: Iterable[Mapping[str, Any]], *,
              legacy: LegacyEvents | None = None) -> Iterator[FeedItem]:
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


def unreadable(document: Mapping[str, Any], reason: str, *,
               legacy: LegacyEvents | None = None) -> Unreadable:
    """A stored event that is not a valid outbox record, with what can still be read of it:
    its partition is its aggregate's id; its action and version if they have the right type."""
    data = document.get("data")
    data = data if isinstance(data, Mapping) else {}
    kind = _aggregate_type(document, legacy)
    partition = document.get("partitionKey")
    action, version = data.get("action"), data.get("version")
    return Unreadable(
        str(document.get("id")), reason, without_system_keys(document),
        aggregate_type=kind if isinstance(kind, str) and kind else None,
        aggregate_id=partition if isinstance(partition, str) and partition else None,
        action=action if isinstance(action, str) else None,
        version=version if type(version) is int else None,
        event_source=_event_source(document, legacy) or _registered_source(kind) or "/",
    )


def _registered_source(aggregate_type: object) -> str | None:
    known = AGGREGATES.get(aggregate_type) if isinstance(aggregate_type, str) else None
    return known.source() if known is not None else None


def outbox_record(document: Mapping[str, Any], *,
                  legacy: LegacyEvents | None = None) -> OutboxRecord:
    """Parse one stored event. Raises PoisonEventError naming what is wrong."""
    data = document.get("data")
    if not isinstance(data, Mapping):
        raise PoisonEventError("event document has no 'data' object")
    aggregate_type = _aggregate_type(document, legacy)
    if not isinstance(aggregate_type, str) or not aggregate_type:
        raise PoisonEventError("event aggregateType must be a non-empty string")
    source = _event_source(document, legacy)
    if source is None:
        raise PoisonEventError("event source must be a non-empty string")
    try:
        body = "".join(_BODY_JSON(data, 0)).encode()
    except (TypeError, ValueError) as exc:
        raise PoisonEventError(f"event data is not serialisable: {exc}") from None
    get = data.get
    traceparent, dataschema = get("traceparent"), document.get("dataschema")
    properties = _own_properties(document.get("properties"), aggregate_type)
    subject = document.get("subject")
    if subject is not None and (not isinstance(subject, str) or not subject):
        raise PoisonEventError("event subject must be a non-empty string")
    # The stored fields last: an event wrong in several ways is set aside for the first above.
    plain = plain_fields(get("id"), aggregate_type, get(f"{aggregate_type}Id"), get("action"),
                         get("version"), source)
    if plain is None:
        checked = _checked(get("id"), aggregate_type, get(f"{aggregate_type}Id"), get("action"),
                           get("version"), source)
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
    )


def _checked(event_id: object, aggregate_type: str, aggregate_id: object, action: object,
             version: object, source: str) -> StoredFields:
    """The stored fields as `StoredFields` takes them; PoisonEventError naming the first one it
    rejects, by its stored name (`data.id`, `data.orderId`, ...)."""
    try:
        return StoredFields(event_id=event_id, aggregate_type=aggregate_type,
                            aggregate_id=aggregate_id, action=action, version=version,
                            event_source=source)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        name = str(error["loc"][0])
        key = {"event_id": "id", "aggregate_id": f"{aggregate_type}Id"}.get(name, name)
        raise PoisonEventError(f"event data.{key}: {error['msg']}") from None


def _own_properties(value: object, aggregate_type: str) -> dict[str, str | int]:
    """An event's application properties of the app's own (a session's event may carry some):
    string names, string or integer values, none of the outbox's names."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and type(v) in (str, int) for k, v in value.items()):
        raise PoisonEventError("event properties must map names to strings or integers")
    taken = sorted(k for k in value if reserved_property(k, aggregate_type))
    if taken:
        raise PoisonEventError(f"event properties {taken} are the outbox's")
    return dict(value)


def document_created_at(document: Mapping[str, Any]) -> float | None:
    """A stored event's creation time (epoch seconds) from `data.createdAt`, if readable;
    naive times are UTC."""
    data = document.get("data")
    at = parse_time(data.get("createdAt")) if isinstance(data, Mapping) else None
    if at is None:
        return None
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()


def selected(document: Mapping[str, Any], since: datetime,
             aggregate_type: str | None = None, *, legacy: LegacyEvents | None = None) -> bool:
    """Whether a stored event is re-driven: created at or after `since` (by `data.createdAt`; an
    event without a readable time is not selected), of `aggregate_type` when given."""
    if aggregate_type is not None and _aggregate_type(document, legacy) != aggregate_type:
        return False
    created = document_created_at(document)
    return created is not None and created >= since.timestamp()


def commit_operations(
    aggregate: Aggregate,
    events: list[Event],
    *,
    etag: str | None,
    event_ttl_seconds: int,
    traceparent: str | None,
) -> list[BatchOperation]:
    """What one command writes, as one batch in the aggregate's partition: the aggregate (create
    when `etag` is None, else replace conditioned on it), then one create per event."""
    operations = [BatchOperation("create" if etag is None else "replace",
                                 aggregate_document(aggregate), if_match=etag)]
    source = aggregate.source()
    for event in events:
        if traceparent and event.traceparent is None:
            event = event.model_copy(update={"traceparent": traceparent})
        operations.append(BatchOperation("create", event_document(
            event, source=source, ttl_seconds=event_ttl_seconds)))
    return operations


def idempotency_document(record: IdempotencyRecord, *, ttl_seconds: int) -> dict[str, Any]:
    """The stored record of a claimed Idempotency-Key, in its aggregate's partition, expiring
    after `ttl_seconds`. The key is not in it (the id is its hash)."""
    answer: dict[str, Any] = {"status": record.answer.status}
    if record.answer.location is not None:
        answer["location"] = record.answer.location
    if record.answer.body is not None:
        answer["body"] = record.answer.body
    return {
        "id": record.record_id,
        "partitionKey": record.aggregate_id,
        "type": IDEMPOTENCY_TYPE,
        "aggregateType": record.aggregate_type,
        "request": record.request,
        "fingerprint": record.fingerprint,
        "version": record.version,
        "answer": answer,
        "createdAt": record.created_at.isoformat(),
        "ttl": ttl_seconds,
    }


def claim_operation(record: IdempotencyRecord, *, ttl_seconds: int) -> BatchOperation:
    """The create of a record: a second claim of the same key fails on it (409)."""
    return BatchOperation("create", idempotency_document(record, ttl_seconds=ttl_seconds))


def idempotency_record(document: Mapping[str, Any]) -> IdempotencyRecord | None:
    """A stored record, typed; None for a document that is not one (or not readable as one)."""
    answer = document.get("answer")
    if document.get("type") != IDEMPOTENCY_TYPE or not isinstance(answer, Mapping):
        return None
    status, version = answer.get("status"), document.get("version")
    fingerprint = document.get("fingerprint")
    location = answer.get("location")
    if (type(status) is not int or type(version) is not int
            or not isinstance(fingerprint, str)):
        return None
    return IdempotencyRecord(
        record_id=str(document.get("id")),
        aggregate_type=str(document.get("aggregateType", "")),
        aggregate_id=str(document.get("partitionKey")),
        fingerprint=fingerprint,
        version=version,
        answer=Answer(status=status, body=answer.get("body"),
                      location=location if isinstance(location, str) else None),
        request=str(document.get("request", "")),
        created_at=parse_time(document.get("createdAt")) or datetime.now(UTC),
    )


def without_system_keys(document: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if not k.startswith("_")}


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
