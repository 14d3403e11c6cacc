"""Bulk operations (DESIGN §19): an operators' action on many items -- a failure group's retry
or discard, every dead letter of a subscription matching a filter resubmitted or discarded, a
re-drive of the stored events (`cosmos_outbox.operations._bulk._redrive_items`) -- is
an *operation*: created by one request, which answers at once with it; worked in batches by
whoever runs the relay (`cosmos_outbox.operations._bulk._worker`), never inside a request's bound;
kept in the outbox's container (`cosmos_outbox._mapper.operation`, by `OperationStore`), so
that every operator sees it with its progress and any relay host finishes it after another
died. What it is, as the ways in render it: `Operation`; its life:

    created -> canary -> running -> done         (a retry or resubmit with a canary)
    created -> running -> done                   (no canary, or a discard)
    canary -> paused (the canary failed, or was not seen applied) -> running | cancelled
    created | canary | running | paused -> cancelled (an operator's cancel)

Each item's effect is idempotent (a resubmission's MessageId is derived from the dead letter,
a replay's is the event's, a discard notice's from what it gives up: the topic's duplicate
detection drops a second send), and the batch in flight is written before it is worked: a worker
that dies mid-batch leaves it for the next one, which acts on what is left of it and counts
each item once."""

from __future__ import annotations

import dataclasses
import hashlib
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Literal

from cosmos_outbox._domain import DomainError
from cosmos_outbox._mapper import (
    ACTIVE_QUERY,
    OPERATION_TYPE,
    OPERATIONS_PARTITION,
    RECENT_QUERY,
    OperationRecord,
    OperationScope,
    operation_document,
    operation_record,
)
from cosmos_outbox._model import Model
from cosmos_outbox.errors import AlreadyExistsError, NotFoundError, PreconditionFailedError
from cosmos_outbox.operations._actor import Actor
from cosmos_outbox.operations._bulk._kinds import Kind, spec_of
from cosmos_outbox.ports import AsyncDocumentStore, BatchOperation

__all__ = [
    "Kind",
    "Operation",
    "OperationHeldError",
    "OperationList",
    "OperationStore",
    "State",
    "actor_of",
    "now_text",
    "view",
]

State = Literal["created", "canary", "running", "paused", "cancelled", "done"]
#: The kind named in a 404.
OPERATION = "operation"


class Operation(Model):
    """A bulk operation and its progress: what it does (`kind`, `selector`, `summary`), its
    `state`, how many items it holds (`items`; `itemsKnown` false until a worker counted them)
    and what became of them (`done`, `failed`, `skipped`: gone before it reached them; `sent`:
    messages sent for the done ones), the canary (its size, how long it waits to see the canary
    applied or failed again), who started it and why, what it says (`note`: the canary's
    verdict, why it paused or stopped), the last failures, what subscribers will see, and what
    an operator may do with it now (`canCancel`, `canContinue`)."""

    id: str
    kind: Kind
    state: State
    summary: str
    selector: OperationScope
    canary: int
    canary_wait_seconds: float
    items: int
    items_known: bool
    done: int
    failed: int
    skipped: int
    sent: int
    remaining: int
    in_flight: int
    who: str
    reason: str | None
    note: str | None
    failures: list[str]
    subscribers_will_see: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    can_cancel: bool
    can_continue: bool


#: The states of an operation that holds its items (and a cancelled or finished one with a
#: batch in flight).
OPEN_STATES = ("created", "canary", "running", "paused")
#: The stored form of a hold on an operation's items, in the operations' partition.
HOLD_TYPE = "outboxOperationHold"
_HOLD_TRIES = 5


class OperationHeldError(DomainError):
    """The items a new operation would act on are held by an open operation (409, naming it):
    wait for it to finish, or cancel it, then start again."""

    def __init__(self, holder: Operation) -> None:
        self.holder = holder
        super().__init__(
            f"operation {holder.id} ({holder.summary}; {holder.state}, started by "
            f"{holder.who}) already acts on these items: wait for it to finish, or cancel it "
            "first"
        )


class OperationList(Model):
    """The operations, the newest first: every one not finished, and the last finished ones."""

    operations: list[Operation]


def now_text(clock: Callable[[], float] = time.time) -> str:
    return datetime.fromtimestamp(clock(), UTC).isoformat()


def _hold_id(key: str) -> str:
    """The id of the hold on `key` (a group, an entity's dead letters)."""
    return f"operation-hold-{hashlib.sha256(key.encode()).hexdigest()[:32]}"


def _time(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def actor_of(record: OperationRecord) -> Actor:
    """Who started the operation (its audit lines name them)."""
    who = record.who
    kind = who.get("kind")
    if kind not in ("signed-in operator", "admin key", "nobody", "command line", "unknown"):
        kind = "unknown"
    return Actor(kind, name=who.get("name"), id=who.get("id"))  # type: ignore[arg-type]


def summary_of(record: OperationRecord) -> str:
    """The operation in one line: what it does, to what."""
    scope = record.scope
    spec = spec_of(record.kind)
    if spec.items == "group":
        where = "the quarantine" if scope.source == "quarantine" else f"{scope.entity}"
        return f"{spec.does} {scope.group} ({where}: {scope.cause})"
    if spec.items == "redrive":
        of = " ".join(p for p in (scope.aggregate_type, scope.aggregate_id) if p)
        return f"{spec.does} created since {scope.since}{f' of {of}' if of else ''} " + (
            f"to subscription {scope.entity}" if scope.entity else "to the topic"
        )
    named = [
        f"{label} {value}"
        for label, value in (
            ("of", scope.aggregate_type),
            ("id", scope.aggregate_id),
            ("action", scope.action),
            ("reason has", scope.text),
            ("since", scope.since),
            ("until", scope.until),
        )
        if value
    ]
    which = "every one" if scope.every else ", ".join(named)
    return f"{spec.does} {scope.entity} ({which})"


def view(record: OperationRecord) -> Operation:
    """The operation as the ways in render it."""
    counts = record.counts
    created = _time(record.created_at) or datetime.fromtimestamp(0, UTC)
    return Operation(
        id=record.id,
        kind=record.kind,
        state=record.state,
        summary=summary_of(record),
        selector=record.scope,
        canary=record.canary,
        canary_wait_seconds=record.canary_wait_seconds,
        items=counts.items,
        items_known=record.items_known,
        done=counts.done,
        failed=counts.failed,
        skipped=counts.skipped,
        sent=counts.sent,
        remaining=max(0, counts.items - counts.done - counts.failed - counts.skipped),
        in_flight=len(record.batch),
        who=str(actor_of(record)),
        reason=record.reason,
        note=record.note,
        failures=list(record.failures),
        subscribers_will_see=record.subscribers_will_see,
        created_at=created,
        updated_at=_time(record.updated_at) or created,
        finished_at=_time(record.finished_at),
        can_cancel=record.state in ("created", "canary", "running", "paused"),
        can_continue=record.state == "paused",
    )


def new_record(
    kind: Kind,
    scope: OperationScope,
    *,
    who: Actor,
    reason: str | None,
    canary: int,
    canary_wait_seconds: float,
    clock: Callable[[], float] = time.time,
) -> OperationRecord:
    """A new operation, created (a worker counts its items first)."""
    at = now_text(clock)
    return OperationRecord(
        id=str(uuid.uuid4()),
        kind=kind,
        state="created",
        scope=scope,
        who={"kind": who.kind, "name": who.name, "id": who.id},
        created_at=at,
        updated_at=at,
        reason=reason,
        canary=canary,
        canary_wait_seconds=canary_wait_seconds,
    )


class OperationStore:
    """The operations of one container (see `cosmos_outbox._mapper.operation`): created, read,
    listed, and changed by a conditional replace (the stored etag), so that two writers never
    lose each other's change: the loser reads it again and decides (`change`)."""

    def __init__(self, store: AsyncDocumentStore, *, clock: Callable[[], float] = time.time):
        self._store = store
        self._clock = clock

    async def create(
        self,
        record: OperationRecord,
        *,
        holds: str | None = None,
        shares: Sequence[str] = (),
    ) -> OperationRecord:
        """Store a new operation. `holds`: what items it acts on (a group, an entity's dead
        letters), held by one open operation at a time; `shares`: what it acts on part of (the
        entity a group's dead letters are at), shared with other open operations that share it
        too, never with one that holds it. The operation and its holds are written in one
        transactional batch, each hold under the etag it was read with: refused
        (OperationHeldError, naming the open one) while another open operation holds what it
        would hold or share, or shares what it would hold; two starts at once write one, the
        other reads the holds again and decides. A hold of operations that have finished (or
        been cancelled, their batch done) is taken over."""
        claims = [(holds, False)] if holds is not None else []
        claims += [(key, True) for key in shares]
        if not claims:
            return operation_record(await self._store.upsert(operation_document(record)))
        for _ in range(_HOLD_TRIES):
            writes = [await self._claim(record.id, key, shared) for key, shared in claims]
            try:
                await self._store.execute_batch(
                    OPERATIONS_PARTITION,
                    [*writes, BatchOperation("create", operation_document(record))],
                )
            except (AlreadyExistsError, PreconditionFailedError):
                continue  # another start came first: read its holds again
            return await self.get(record.id)
        raise PreconditionFailedError(
            f"the holds on {holds or ', '.join(shares)} changed under every start"
        )

    async def _claim(self, operation_id: str, key: str, shared: bool) -> BatchOperation:
        """The write of `key`'s hold taken by `operation_id` (alone, or `shared`), conditional
        on the hold as read (OperationHeldError: an open operation holds it, or shares it and
        this one would hold it)."""
        hold_id = _hold_id(key)
        existing = await self._store.read(OPERATIONS_PARTITION, hold_id)
        sharing: list[str] = []
        if existing is not None:
            # a hold written before holds were shared names one operation, held alone
            named = existing.get("operations") or [existing["operation"]]
            for held in [await self._open(str(i)) for i in named]:
                if held is None:
                    continue
                if not (shared and existing.get("shared")):
                    raise OperationHeldError(view(held))
                sharing.append(held.id)
        hold = {
            "id": hold_id,
            "partitionKey": OPERATIONS_PARTITION,
            "type": HOLD_TYPE,
            "holds": key,
            "shared": shared,
            "operation": operation_id,
            "operations": [*sharing, operation_id],
        }
        if existing is None:
            return BatchOperation("create", hold)
        return BatchOperation("replace", hold, if_match=existing.get("_etag"))

    async def holder(self, key: str) -> OperationRecord | None:
        """The open operation that holds `key`, or shares it (None: none): what one item's
        action must not act beside (a point read of the hold, one of each operation it names)."""
        existing = await self._store.read(OPERATIONS_PARTITION, _hold_id(key))
        if existing is None:
            return None
        for named in existing.get("operations") or [existing["operation"]]:
            if (held := await self._open(str(named))) is not None:
                return held
        return None

    async def _open(self, operation_id: str) -> OperationRecord | None:
        """The operation, while it holds its items (open, or a batch still in flight)."""
        found = await self._store.read(OPERATIONS_PARTITION, operation_id)
        if found is None or found.get("type") != OPERATION_TYPE:
            return None
        held = operation_record(found)
        return held if held.state in OPEN_STATES or held.batch else None

    async def get(self, operation_id: str) -> OperationRecord:
        """The operation (NotFoundError: none, or expired)."""
        found = await self._store.read(OPERATIONS_PARTITION, operation_id)
        if found is None or found.get("type") != OPERATION_TYPE:
            raise NotFoundError(OPERATION, operation_id)
        return operation_record(found)

    async def active(self) -> list[OperationRecord]:
        """The operations a worker has something to do with, the oldest first: one query in
        their partition."""
        found = await self._store.query(
            ACTIVE_QUERY, {"@type": OPERATION_TYPE}, partition_key=OPERATIONS_PARTITION
        )
        records = [operation_record(d) for d in found if isinstance(d, dict)]
        return sorted(records, key=lambda r: (r.created_at, r.id))

    async def recent(self, *, limit: int = 20) -> list[OperationRecord]:
        """Every operation not finished, and the newest of the others (`limit` in all at
        least), the newest first: one query in their partition, sorted here (a container may
        index nothing but `type`)."""
        found = await self._store.query(
            RECENT_QUERY, {"@type": OPERATION_TYPE}, partition_key=OPERATIONS_PARTITION
        )
        records = sorted(
            (operation_record(d) for d in found if isinstance(d, dict)),
            key=lambda r: (r.created_at, r.id),
            reverse=True,
        )
        return [r for n, r in enumerate(records) if n < limit or r.active]

    async def write(self, record: OperationRecord) -> OperationRecord:
        """Replace the stored operation with `record` if it is still the one `record` was read
        from (its etag); PreconditionFailedError when another writer came first."""
        if record.etag is None:
            raise PreconditionFailedError("an operation is written as it was read (its etag)")
        stamped = dataclasses.replace(record, updated_at=now_text(self._clock))
        stored = await self._store.replace(operation_document(stamped), if_match=record.etag)
        return operation_record(stored)

    async def change(
        self,
        operation_id: str,
        change: Callable[[OperationRecord], OperationRecord],
        *,
        attempts: int = 5,
    ) -> OperationRecord:
        """Read the operation, `change` it, write it; again from the read when another writer
        came first (at most `attempts` times). `change` may raise to refuse."""
        for attempt in range(attempts):
            current = await self.get(operation_id)
            try:
                return await self.write(change(current))
            except PreconditionFailedError:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
