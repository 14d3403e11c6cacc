"""A bulk operation's stored form (`outboxOperation`): one document per operation in the outbox's
container, in a partition of its own (`outbox-operations`), so that whoever runs the relay finds
the operations to work with one query in one partition (`ACTIVE_QUERY`: the indexed `active`
flag, tested on the documents the indexed `type` selects), and the operators' panel lists
them the same way (sorted by the app). Written and read here only
(`operation_document`, `operation_record`); `cosmos_outbox.operations._bulk._operation` keeps them.

    {"id": <operation id>, "partitionKey": "outbox-operations", "type": "outboxOperation",
     "kind": "groups.retry", "state": "running", "active": true,
     "selector": {"group": "3f2a…", "source": "dead letters", "entity": "all-events",
                  "cause": "HandlerRefused: …", "aggregateType": "contact", "action": "…"},
     "canary": 5, "canaryWaitSeconds": 120,
     "counts": {"items": 2000, "done": 5, "failed": 0, "skipped": 0, "sent": 5},
     "itemsKnown": true, "limit": 8123, "cursor": "6130", "batch": ["6131", …],
     "canaryItems": [{"key": "6126", "messageId": "…", "eventId": "…", "aggregateType": "contact",
                      "aggregateId": "…", "version": 7}],
     "canarySentAt": "…", "watermarks": {"all-events": 8130}, "note": "…", "failures": ["…"],
     "who": {"kind": "signed-in operator", "name": "ada", "id": "…"}, "reason": "…",
     "createdAt": "…", "updatedAt": "…", "finishedAt": null, "owner": "host-1/3c2e",
     "leaseUntil": 1767225600.5, "batchSince": 1767225590.1, "audited": false, "ttl": -1}

`active`: the operation is to be worked (created, canary, running; or cancelled or finished with
a batch in flight or its audit line not written yet); paused ones wait for an operator. A
finished operation is kept for `FINISHED_TTL_SECONDS`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cosmos_outbox._model import Model

__all__ = [
    "ACTIVE_QUERY",
    "FINISHED_TTL_SECONDS",
    "OPERATIONS_PARTITION",
    "OPERATION_TYPE",
    "RECENT_QUERY",
    "CanaryItem",
    "OperationCounts",
    "OperationRecord",
    "OperationScope",
    "operation_document",
    "operation_record",
]

OPERATION_TYPE = "outboxOperation"
#: The partition every operation is kept in (few documents: one query finds the active ones).
OPERATIONS_PARTITION = "outbox-operations"
#: A finished operation is kept this long (30 days), then expires.
FINISHED_TTL_SECONDS = 30 * 24 * 3600
#: The operations to work, in their partition: one query selecting by the indexed `type` (the
#: one path every container of the outbox indexes: docs/indexing.md), `active` tested on what
#: it selects (a few documents).
ACTIVE_QUERY = "SELECT * FROM c WHERE c.type = @type AND c.active = true"
#: Every operation kept (finished ones for 30 days), in their partition: sorted by the app, as
#: a container may index nothing but `type` (an ORDER BY on an excluded path is refused).
RECENT_QUERY = "SELECT * FROM c WHERE c.type = @type"


class OperationScope(Model):
    """Which items an operation acts on, as stored and as the ways in show it (`Operation`'s
    `selector`): a failure group (`group`, and what it is: `source`, `entity`, `cause`,
    `aggregateType`, `action`), or the dead letters of `entity` matching a filter
    (`aggregateType`, `aggregateId`, `action`, `text` in the dead-letter reason or description,
    enqueued `since` / `until`, ISO 8601) or `every` one of them; or a re-drive's stored events,
    created `since` (of `aggregateType`, and `aggregateId`), sent to the topic or to one watched
    subscription (`entity`)."""

    group: str | None = None
    source: str | None = None
    entity: str | None = None
    cause: str | None = None
    aggregate_type: str | None = None
    aggregate_id: str | None = None
    action: str | None = None
    text: str | None = None
    since: str | None = None
    until: str | None = None
    every: bool = False


@dataclass(frozen=True)
class OperationCounts:
    """How many items the operation holds (`items`: counted when it began) and what became of
    them: done, failed, skipped (gone before it reached them); `sent`: messages sent for the
    done ones (a resubmission, a replay, a discard notice)."""

    items: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    sent: int = 0


@dataclass(frozen=True)
class CanaryItem:
    """One item of an operation's canary, as sent: what to look for to see it applied or
    failed again (its MessageId in a dead-letter queue; its event in a subscriber's inbox)."""

    key: str
    message_id: str | None
    event_id: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    version: int | None


@dataclass(frozen=True)
class OperationRecord:
    """An operation as stored (see the module); `etag`: the stored document's, for a
    conditional write."""

    id: str
    kind: str
    state: str
    scope: OperationScope
    who: Mapping[str, str | None]
    created_at: str
    updated_at: str
    reason: str | None = None
    canary: int = 0
    canary_wait_seconds: float = 0.0
    counts: OperationCounts = field(default_factory=OperationCounts)
    items_known: bool = False
    #: the last item key the operation holds (items beyond it came after it began)
    limit: str | None = None
    cursor: str | None = None
    batch: tuple[str, ...] = ()
    batch_since: float | None = None
    canary_items: tuple[CanaryItem, ...] = ()
    canary_sent_at: str | None = None
    watermarks: Mapping[str, int] = field(default_factory=dict)
    note: str | None = None
    failures: tuple[str, ...] = ()
    finished_at: str | None = None
    owner: str | None = None
    lease_until: float | None = None
    audited: bool = False
    subscribers_will_see: str = ""
    etag: str | None = None

    @property
    def active(self) -> bool:
        """Whether a worker has something to do with it (see the module)."""
        if self.state in ("created", "canary", "running"):
            return True
        return self.state in ("cancelled", "done") and (bool(self.batch) or not self.audited)


_SCOPE = {
    "group": "group",
    "source": "source",
    "entity": "entity",
    "cause": "cause",
    "aggregate_type": "aggregateType",
    "aggregate_id": "aggregateId",
    "action": "action",
    "text": "text",
    "since": "since",
    "until": "until",
}
_COUNTS = ("items", "done", "failed", "skipped", "sent")


def operation_document(record: OperationRecord) -> dict[str, Any]:
    """The stored document of `record` (see the module)."""
    scope = record.scope
    selector: dict[str, Any] = {
        stored: getattr(scope, name)
        for name, stored in _SCOPE.items()
        if getattr(scope, name) is not None
    }
    if scope.every:
        selector["every"] = True
    finished = record.state in ("done", "cancelled") and not record.active
    return {
        "id": record.id,
        "partitionKey": OPERATIONS_PARTITION,
        "type": OPERATION_TYPE,
        "kind": record.kind,
        "state": record.state,
        "active": record.active,
        "selector": selector,
        "canary": record.canary,
        "canaryWaitSeconds": record.canary_wait_seconds,
        "counts": {name: getattr(record.counts, name) for name in _COUNTS},
        "itemsKnown": record.items_known,
        "limit": record.limit,
        "cursor": record.cursor,
        "batch": list(record.batch),
        "batchSince": record.batch_since,
        "canaryItems": [
            {
                "key": c.key,
                "messageId": c.message_id,
                "eventId": c.event_id,
                "aggregateType": c.aggregate_type,
                "aggregateId": c.aggregate_id,
                "version": c.version,
            }
            for c in record.canary_items
        ],
        "canarySentAt": record.canary_sent_at,
        "watermarks": dict(record.watermarks),
        "note": record.note,
        "failures": list(record.failures),
        "who": dict(record.who),
        "reason": record.reason,
        "createdAt": record.created_at,
        "updatedAt": record.updated_at,
        "finishedAt": record.finished_at,
        "owner": record.owner,
        "leaseUntil": record.lease_until,
        "audited": record.audited,
        "subscribersWillSee": record.subscribers_will_see,
        "ttl": FINISHED_TTL_SECONDS if finished else -1,
    }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _whole(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def operation_record(document: Mapping[str, Any]) -> OperationRecord:
    """The operation a stored document holds (see the module); a field it lacks is its
    default."""
    selector = _mapping(document.get("selector"))
    counts = _mapping(document.get("counts"))
    scope = OperationScope(
        **{name: _text(selector.get(stored)) for name, stored in _SCOPE.items()},
        every=selector.get("every") is True,
    )
    canary = [
        CanaryItem(
            key=str(c.get("key", "")),
            message_id=_text(c.get("messageId")),
            event_id=_text(c.get("eventId")),
            aggregate_type=_text(c.get("aggregateType")),
            aggregate_id=_text(c.get("aggregateId")),
            version=c.get("version") if type(c.get("version")) is int else None,
        )
        for c in _list(document.get("canaryItems"))
        if isinstance(c, Mapping)
    ]
    who = _mapping(document.get("who"))
    return OperationRecord(
        id=str(document.get("id", "")),
        kind=str(document.get("kind", "")),
        state=str(document.get("state", "")),
        scope=scope,
        who={k: _text(who.get(k)) for k in ("kind", "name", "id")},
        created_at=str(document.get("createdAt", "")),
        updated_at=str(document.get("updatedAt", "")),
        reason=_text(document.get("reason")),
        canary=_whole(document.get("canary")),
        canary_wait_seconds=_number(document.get("canaryWaitSeconds")) or 0.0,
        counts=OperationCounts(**{name: _whole(counts.get(name)) for name in _COUNTS}),
        items_known=document.get("itemsKnown") is True,
        limit=_text(document.get("limit")),
        cursor=_text(document.get("cursor")),
        batch=tuple(str(k) for k in _list(document.get("batch"))),
        batch_since=_number(document.get("batchSince")),
        canary_items=tuple(canary),
        canary_sent_at=_text(document.get("canarySentAt")),
        watermarks={
            str(k): v for k, v in _mapping(document.get("watermarks")).items() if type(v) is int
        },
        note=_text(document.get("note")),
        failures=tuple(str(f) for f in _list(document.get("failures"))),
        finished_at=_text(document.get("finishedAt")),
        owner=_text(document.get("owner")),
        lease_until=_number(document.get("leaseUntil")),
        audited=document.get("audited") is True,
        subscribers_will_see=_text(document.get("subscribersWillSee")) or "",
        etag=_text(document.get("_etag")),
    )
