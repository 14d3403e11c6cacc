"""The stored documents of aggregates and Idempotency-Key records, generic over aggregates; the
event documents are `cosmos_outbox._event_document`'s (re-exported here for the readers of the
change feed). One envelope for an aggregate:

    {"id", "partitionKey": <aggregate id>, "type": <aggregate type>, "data": {...}, "ttl": -1}

- an aggregate: `type` = its aggregate type (`order`), `data` = its fields, camelCase, minus
  the id (`cosmos_outbox._domain.Aggregate`: the model is the one list of fields);
- an idempotency record: `type` `idempotencyRecord`, id `idem-<sha256 of scope and key>`, in
  its aggregate's partition, `fingerprint`, `request`, `aggregateType`, `version`, `answer`
  (`status`, `location`, `body`), `createdAt`, `ttl` from the settings
  (`cosmos_outbox._idempotency`). Written in the batch of the change it answers for; the relay
  skips it as it skips aggregates.

The etag and the other system properties (`_etag`, `_ts`, ...) stay here, never in the domain.
This module is the boundary both ways: documents are built from the domain here, and parsed
back into aggregates and typed records here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from cosmos_outbox._domain import Aggregate, Event, read_back
from cosmos_outbox._event_document import (
    EVENT_TYPE,
    aggregate_event_document,
    document_created_at,
    outbox_record,
    parse_time,
    read_feed,
    selected,
    unreadable,
    without_system_keys,
)
from cosmos_outbox._idempotency import Answer, IdempotencyRecord
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.ports import BatchOperation

A = TypeVar("A", bound="Aggregate")

__all__ = [
    "EVENT_TYPE",
    "IDEMPOTENCY_TYPE",
    "aggregate_document",
    "aggregate_from_document",
    "claim_operation",
    "commit_operations",
    "document_created_at",
    "event_documents",
    "idempotency_document",
    "idempotency_record",
    "outbox_record",
    "parse_time",
    "read_feed",
    "selected",
    "unreadable",
    "without_system_keys",
]

IDEMPOTENCY_TYPE = "idempotencyRecord"


def aggregate_document(aggregate: Aggregate) -> dict[str, Any]:
    return {
        "id": aggregate.id,
        "partitionKey": aggregate.id,
        "type": aggregate.aggregate_type,
        "data": aggregate.model_dump(mode="json", by_alias=True, exclude={"id"}),
        "ttl": -1,
    }


def aggregate_from_document(kind: type[A], document: Mapping[str, Any]) -> A:
    """The aggregate a stored document holds. NotFoundError when it is another kind of document
    (an event or a quarantined event with that id)."""
    if document.get("type") != kind.aggregate_type:
        raise NotFoundError(kind.aggregate_type, str(document.get("id")))
    return read_back(kind.model_validate({**document["data"], "id": document["id"]}))


def event_documents(aggregate: Aggregate, *, ttl_seconds: int) -> list[dict[str, Any]]:
    """The envelopes of the events the aggregate recorded (collected: it forgets them)."""
    return [
        aggregate_event_document(e, source=aggregate.source(), ttl_seconds=ttl_seconds)
        for e in aggregate.collect_events()
    ]


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
    operations = [
        BatchOperation(
            "create" if etag is None else "replace", aggregate_document(aggregate), if_match=etag
        )
    ]
    source = aggregate.source()
    for event in events:
        if traceparent and event.traceparent is None:
            event = event.model_copy(update={"traceparent": traceparent})
        operations.append(
            BatchOperation(
                "create",
                aggregate_event_document(event, source=source, ttl_seconds=event_ttl_seconds),
            )
        )
    return operations


def idempotency_document(record: IdempotencyRecord, *, ttl_seconds: int) -> dict[str, Any]:
    """The stored record of a claimed Idempotency-Key, in its aggregate's partition, expiring
    after `ttl_seconds`. The key is not in it (the id is its hash)."""
    answer: dict[str, Any] = {"status": record.answer.status}
    if record.answer.location is not None:
        answer["location"] = record.answer.location
    if record.answer.body is not None:
        answer["body"] = record.answer.body
    return record_document(
        record_id=record.record_id,
        partition_key=record.aggregate_id,
        aggregate_type=record.aggregate_type,
        request=record.request,
        fingerprint=record.fingerprint,
        version=record.version,
        answer=answer,
        created_at=record.created_at.isoformat(),
        ttl_seconds=ttl_seconds,
    )


def record_document(
    *,
    record_id: str,
    partition_key: str,
    aggregate_type: str,
    request: str,
    fingerprint: str,
    version: int,
    answer: dict[str, Any],
    created_at: str,
    ttl_seconds: int,
) -> dict[str, Any]:
    """An Idempotency-Key's record document, its keys written here only (the aggregates' write
    path through `idempotency_document`, the session's straight from its claim)."""
    return {
        "id": record_id,
        "partitionKey": partition_key,
        "type": IDEMPOTENCY_TYPE,
        "aggregateType": aggregate_type,
        "request": request,
        "fingerprint": fingerprint,
        "version": version,
        "answer": answer,
        "createdAt": created_at,
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
    if type(status) is not int or type(version) is not int or not isinstance(fingerprint, str):
        return None
    return IdempotencyRecord(
        record_id=str(document.get("id")),
        aggregate_type=str(document.get("aggregateType", "")),
        aggregate_id=str(document.get("partitionKey")),
        fingerprint=fingerprint,
        version=version,
        answer=Answer(
            status=status,
            body=answer.get("body"),
            location=location if isinstance(location, str) else None,
        ),
        request=str(document.get("request", "")),
        created_at=parse_time(document.get("createdAt")) or datetime.now(UTC),
    )
