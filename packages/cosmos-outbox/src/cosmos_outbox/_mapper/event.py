"""The event, written: an aggregate's `Event` or what a transaction publishes -> the event
document stored in the container (`event_document`, `aggregate_event_document`, `stamp`),
its scheduled states (`scheduled`, `cancelled`, `released`), and where an aggregate's documents
live (`aggregate_partition`, asked by every reader and writer of an aggregate's partition)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from cosmos_outbox import clock
from cosmos_outbox._domain import Aggregate, Event
from cosmos_outbox._mapper.document import EVENT_TYPE, parse_time, without_system_keys

#: The fields of an event that are its envelope, not its data: the `Event` model's own (an
#: option added to it is in the envelope, never in an event's body).
ENVELOPE_FIELDS: set[str] = set(Event.model_fields)
#: The most seconds Cosmos DB keeps a document for (`ttl` is a 32-bit integer).
MAX_TTL_SECONDS = 2**31 - 1
#: JSON text of a body: compact, UTF-8 as is, no cycle check (a body is a tree). NaN and the
#: infinities are not JSON (Cosmos DB refuses them): refused.
_BODY_JSON = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
)


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


class Schedule(NamedTuple):
    """A scheduled event's state as its document keeps it: its due time, and when it was
    released or cancelled (None: not), each as stored (the Azure host may have re-formatted
    them: `parse_time` reads them)."""

    deliver_at: object
    released_at: object
    cancelled_at: object

    @property
    def due(self) -> datetime | None:
        """The due time, when it is a time with its offset."""
        at = parse_time(self.deliver_at)
        return at if at is not None and at.tzinfo is not None else None

    @property
    def state(self) -> str:
        """cancelled, released or waiting (a cancel wins: the relay never sends it)."""
        if self.cancelled_at is not None:
            return "cancelled"
        return "released" if self.released_at is not None else "waiting"


def schedule_of(document: Mapping[str, Any]) -> Schedule | None:
    """The schedule of an event document (None: not a scheduled event's)."""
    if not scheduled(document):
        return None
    get = document.get
    return Schedule(get("deliverAt"), get("releasedAt"), get("cancelledAt"))


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
