"""The bulk operations' use cases (`Operations.bulk`): start one (a failure group's retry or
discard; the dead letters of a subscription matching a filter, or every one, resubmitted or
discarded; a re-drive of the stored events), read them, cancel one, continue one paused after
its canary -- each a request's worth of work: one read of what it names, one write -- and
`work`, the worker's tick (`cosmos_outbox.operations._bulk._worker`), which whoever runs the relay
calls."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal, Unpack

from cosmos_outbox._domain import DomainError
from cosmos_outbox._mapper import OperationRecord, OperationScope
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.operations._actor import current_actor
from cosmos_outbox.operations._bulk._items import Items, LetterItems, QuarantineItems, RecordItems
from cosmos_outbox.operations._bulk._kinds import BULK_KINDS, ItemsOf, KindSpec, spec_of
from cosmos_outbox.operations._bulk._operation import (
    Operation,
    OperationHeldError,
    OperationList,
    OperationStore,
    actor_of,
    new_record,
    now_text,
    view,
)
from cosmos_outbox.operations._bulk._redrive_items import RedriveItems
from cosmos_outbox.operations._bulk._worker import OperationWorker, audited, worker_name
from cosmos_outbox.operations._dead_letters import DeadLetterOperators
from cosmos_outbox.operations._groups import GroupOperators, cause_of, letter_text
from cosmos_outbox.operations._letters import Described, LetterFilter
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.operations._quarantined import QuarantineOperators
from cosmos_outbox.operations._redrive import RedriveOperators, RedriveScope, scope_of

__all__ = ["BulkOperators"]


#: A failure group's fields its operation's scope keeps (which group it acts on, were it gone).
_WHAT_A_GROUP_IS = {"source", "entity", "cause", "aggregate_type", "action"}


@functools.cache
def _owner() -> str:
    """This process's name as a worker (one per process)."""
    return worker_name()


class BulkOperators:
    """The bulk operations' use cases (see the module), over the outbox's container and the
    quarantine's and dead letters' use cases."""

    def __init__(
        self,
        parts: Parts,
        quarantine: QuarantineOperators,
        letters: DeadLetterOperators,
        groups: GroupOperators,
        redrive: RedriveOperators,
    ) -> None:
        self._parts, self._quarantine, self._letters, self._groups = (
            parts,
            quarantine,
            letters,
            groups,
        )
        self._redrive = redrive
        self._store = OperationStore(parts.store, clock=parts.clock)
        #: a group of failure records' open records, listed for its operation's steps
        self._listed: dict[str, tuple[float, list[str]]] = {}

    # -- starting one ----------------------------------------------------------------------------

    async def start_group(
        self,
        group_id: str,
        action: Literal["retry", "discard"],
        *,
        reason: str | None = None,
        canary: int | None = None,
        canary_wait_seconds: float | None = None,
    ) -> Operation:
        """A failure group's retry (a quarantined event replayed, a dead letter resubmitted;
        `canary` items first, `BULK_KINDS.canary` unless said) or discard (`reason` required), as an
        operation (NotFoundError: no such group now; OperationHeldError, 409: an open
        operation acts on the group already, or on the dead letters of the group's entity).

        Its items: counted by a worker; the group held by it alone while it is open, and the
        entity a dead letters' group is at shared: another group's operation there may run
        with it, an operation on the entity's dead letters (`start_letters`, which could act
        on the same ones) may not."""
        group = await self._groups.find(group_id)
        scope = OperationScope(group=group.id, **group.model_dump(include=_WHAT_A_GROUP_IS))
        record = self._new(spec_of(f"groups.{action}"), scope, reason, canary, canary_wait_seconds)
        letters = group.source == "dead letters" and group.entity
        at = [_letters_of(self._entity_name(group.entity or ""))] if letters else []
        return view(await self._store.create(record, holds=f"group:{group.id}", shares=at))

    async def start_letters(
        self,
        entity: str,
        action: Literal["resubmit", "discard"],
        selected: LetterFilter,
        *,
        every: bool = False,
        reason: str | None = None,
        canary: int | None = None,
        canary_wait_seconds: float | None = None,
    ) -> Operation:
        """Every dead letter of a watched subscription (or queue) matching `selected` (or
        `every` one) resubmitted (`canary` first) or discarded (`reason` required), as an
        operation (NotFoundError: not watched; OperationHeldError, 409: an open operation acts
        on that entity's dead letters already, or on a failure group's there: the entity held
        by it alone while it is open, whatever its filter, as a group's operation shares it)."""
        watched = self._letters.entity(entity)
        if every == (not selected.empty):
            raise ValueError("name the dead letters one way: a filter, or every one")
        scope = OperationScope(
            entity=watched.name,
            aggregate_type=selected.aggregate_type,
            aggregate_id=selected.aggregate_id,
            action=selected.action,
            text=selected.reason,
            since=selected.since.isoformat() if selected.since else None,
            until=selected.until.isoformat() if selected.until else None,
            every=every,
        )
        record = self._new(
            spec_of(f"deadletters.{action}"), scope, reason, canary, canary_wait_seconds
        )
        return view(await self._store.create(record, holds=_letters_of(watched.name)))

    async def start_redrive(
        self,
        since: datetime,
        *,
        reason: str | None = None,
        **scope: Unpack[RedriveScope],
    ) -> Operation:
        """A re-drive of the stored events created at or after `since` (of one aggregate type,
        and one aggregate of it, if given; to one watched subscription if given: NotFoundError
        for another) as an operation: the events stored when a worker counts them, sent in
        batches under the operation's id as the re-drive id (`_redrive_items`)."""
        aggregate_type, aggregate_id, subscription = scope_of(**scope)
        selector = OperationScope(
            entity=self._redrive.target(subscription),
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            since=since.isoformat(),
        )
        record = self._new(spec_of("redrive"), selector, reason, None, None)
        return view(await self._store.create(record))

    async def holding(self, group: str, entity: str | None = None) -> None:
        """OperationHeldError (409, naming it) when an open operation acts on the failure group
        `group`, or on `entity`'s dead letters (None: the quarantine's, at none): what one
        failure's action by its id must not meet (it could act on the same one twice)."""
        keys = [f"group:{group}"] + ([_letters_of(self._entity_name(entity))] if entity else [])
        for key in keys:
            if (held := await self._store.holder(key)) is not None:
                raise OperationHeldError(view(held))

    def _entity_name(self, name: str) -> str:
        """A watched entity's name as watched (`name` itself if it is not watched now)."""
        try:
            return self._letters.entity(name).name
        except NotFoundError:
            return name

    def _new(
        self,
        spec: KindSpec,
        scope: OperationScope,
        reason: str | None,
        canary: int | None,
        wait: float | None,
    ) -> OperationRecord:
        if spec.reason and not reason:
            raise ValueError(f"a {spec.action} needs a reason")
        bounds = BULK_KINDS.canary
        size = (bounds.size if canary is None else canary) if spec.canary else 0
        if not 0 <= size <= bounds.most:
            raise ValueError(f"a canary is 0 to {bounds.most} items")
        waits = bounds.wait_seconds if wait is None else wait
        if not 0 <= waits <= bounds.most_wait_seconds:
            raise ValueError(f"a canary waits 0 to {bounds.most_wait_seconds:g} s")
        return new_record(
            spec.kind,
            scope,
            who=current_actor(),
            reason=reason,
            canary=size,
            canary_wait_seconds=waits if size else 0.0,
            clock=self._parts.clock,
        )

    # -- reading, cancelling, continuing ---------------------------------------------------------

    async def get(self, operation_id: str) -> Operation:
        """One operation and its progress (NotFoundError: none, or expired)."""
        return view(await self._store.get(operation_id))

    async def list(self, *, limit: int = 20) -> OperationList:
        """Every open operation, and the newest finished ones (`limit` in all, at least)."""
        return OperationList(operations=[view(r) for r in await self._store.recent(limit=limit)])

    async def cancel(self, operation_id: str) -> Operation:
        """Stop the operation: no batch is begun after this; one in flight is finished by its
        worker, which then closes it (its audit line); with none, closed now. DomainError: it
        is finished already."""
        by = str(current_actor())
        now = now_text(self._parts.clock)

        def cancelled(current: OperationRecord) -> OperationRecord:
            if current.state in ("done", "cancelled"):
                raise DomainError(f"operation {current.id} is {current.state}: nothing to cancel")
            closed = not current.batch
            return dataclasses.replace(
                current,
                state="cancelled",
                note=f"cancelled by {by} at {now}"
                + (f" (before: {current.note})" if current.note else ""),
                audited=closed,
                finished_at=now if closed else None,
            )

        record = await self._store.change(operation_id, cancelled)
        if record.audited:
            audited(record)
        return view(record)

    async def resume(self, operation_id: str) -> Operation:
        """Continue an operation paused after its canary: its other items acted on, as
        though the canary had succeeded. DomainError: it is not paused."""
        by = str(current_actor())

        def resumed(current: OperationRecord) -> OperationRecord:
            if current.state != "paused":
                raise DomainError(f"operation {current.id} is {current.state}, not paused")
            return dataclasses.replace(
                current, state="running", note=f"continued by {by} after: {current.note}"
            )

        return view(await self._store.change(operation_id, resumed))

    # -- working them ----------------------------------------------------------------------------

    async def work(self, *, budget_seconds: float = 25.0, owner: str | None = None) -> int:
        """Work the open operations for up to `budget_seconds` (a step begun is finished), as
        `owner` (default: this process); the steps taken. What the relay's hosts call
        (the Functions app's timer, `cosmos-outbox relay`)."""
        worker = OperationWorker(
            self._store, self.items_of, owner=owner or _owner(), clock=self._parts.clock
        )
        return await worker.tick(budget_seconds=budget_seconds)

    def items_of(self, record: OperationRecord) -> Items:
        """The items `record` acts on (see `cosmos_outbox.operations._bulk._items`), by what its
        kind's items are (`BULK_KINDS`)."""
        spec = spec_of(record.kind)
        builders: dict[ItemsOf, Callable[[OperationRecord, KindSpec], Items]] = {
            "group": self._group_items,
            "letters": self._letter_items,
            "redrive": self._redrive_items,
        }
        return builders[spec.items](record, spec)

    def _redrive_items(self, record: OperationRecord, spec: KindSpec) -> Items:
        scope = record.scope
        return RedriveItems(
            self._redrive,
            self._parts.relay,
            record.id,
            since=datetime.fromisoformat(scope.since or ""),
            aggregate_type=scope.aggregate_type,
            aggregate_id=scope.aggregate_id,
            subscription=scope.entity,
            clock=self._now,
        )

    def _group_items(self, record: OperationRecord, spec: KindSpec) -> Items:
        """A failure group's: the quarantine's events, its failure records when the app keeps
        them, else the dead letters themselves."""
        scope = record.scope
        if scope.source == "quarantine":
            return QuarantineItems(
                self._parts.quarantine,
                self._quarantine,
                "retry" if spec.sends else "discard",
                lambda r: (
                    (cause_of(r.reason), r.aggregate_type, r.action)
                    == (scope.cause, scope.aggregate_type, scope.action)
                ),
                reason=record.reason,
                letters=self._letters,
                clock=self._now,
            )
        if self._parts.failures is None:
            return self._letter_items(record, spec)
        return RecordItems(
            self._parts.failures,
            self._letters,
            self._letters.entity(scope.entity or ""),
            scope.group or "",
            "resubmit" if spec.sends else "discard",
            operation=record.id,
            by=str(actor_of(record)),
            reason=record.reason,
            subscribers=self._parts.subscribers,
            clock=self._parts.clock,
            listed=self._listed,
            picks_canary=record.state == "canary",
        )

    def _letter_items(self, record: OperationRecord, spec: KindSpec) -> Items:
        return LetterItems(
            self._letters,
            self._letters.entity(record.scope.entity or ""),
            "resubmit" if spec.sends else "discard",
            _matcher(record, spec),
            reason=record.reason,
            subscribers=self._parts.subscribers,
            operation=record.id,
        )

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._parts.clock(), UTC)


def _letters_of(entity: str) -> str:
    """What an operation on `entity`'s dead letters holds (a group's there shares it)."""
    return f"deadletters:{entity}"


def _matcher(record: OperationRecord, spec: KindSpec) -> Callable[[Described], bool]:
    """Which dead letters a dead-letter operation holds (its group's, or its filter's)."""
    scope = record.scope
    if spec.items == "group":
        key = (scope.cause, scope.aggregate_type, scope.action)
        return lambda d: (cause_of(letter_text(d)), d.aggregate_type, d.action) == key
    if scope.every:
        return lambda d: True
    selected = LetterFilter(
        aggregate_type=scope.aggregate_type,
        aggregate_id=scope.aggregate_id,
        action=scope.action,
        reason=scope.text,
        since=datetime.fromisoformat(scope.since) if scope.since else None,
        until=datetime.fromisoformat(scope.until) if scope.until else None,
    )
    return selected.matches
