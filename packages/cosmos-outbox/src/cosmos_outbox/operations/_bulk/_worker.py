"""The bulk operations' worker (`OperationWorker.tick`): run by whoever runs the relay -- the
Functions app's `outbox_operations` timer, `cosmos-outbox relay`'s loop -- on every host. How it
finds work cheaply: one query in the operations' partition (`OperationStore.active`, the indexed
`active` flag: a few request units a tick, nothing read when no operation is open). How two
hosts share it: a host takes an operation by a conditional write naming itself its owner until
`LEASE_SECONDS` from now, renewed by each of its writes; another takes it over once the lease
ran out (the owner died, or hangs).

One step at a time, each written before it is done: count the items (created), send the canary
and wait for its verdict (canary), a batch (running); a batch's keys are written with the cursor
after them, then acted on, then its outcome counted and the batch cleared. A worker killed
mid-batch leaves the batch in the document: the next one acts on what is left of it (each
effect idempotent, `cosmos_outbox.operations._bulk._items`) and counts each of its items once (one
gone from its queue meanwhile: done by the attempt that died). A finished operation (done,
cancelled) writes its audit line once, with its counts, as the operator who started it."""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from cosmos_outbox._mapper import OperationCounts, OperationRecord
from cosmos_outbox.errors import NotFoundError, PreconditionFailedError
from cosmos_outbox.operations._actor import acting_as
from cosmos_outbox.operations._audit import audit
from cosmos_outbox.operations._bulk._items import ItemOutcome, Items
from cosmos_outbox.operations._bulk._kinds import spec_of
from cosmos_outbox.operations._bulk._operation import OperationStore, actor_of, now_text, summary_of

__all__ = ["BATCH", "LEASE_SECONDS", "OperationWorker", "worker_name"]

logger = logging.getLogger("cosmos_outbox.operators")
#: How long a host holds an operation after its last write (another takes it over after).
LEASE_SECONDS = 60.0
#: Items acted on per batch.
BATCH = 50
#: How long a batch's items may stay "later" (locked, a dependency down) before they fail.
PATIENCE_SECONDS = 600.0
#: The failures an operation keeps (the last ones).
KEPT_FAILURES = 10


def worker_name() -> str:
    """This process's name as an operation's owner: its host, process id and a random tag."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:6]}"


class _LostError(Exception):
    """Another host took the operation over (this one's lease ran out): its work is dropped."""


class _StopError(Exception):
    """The operation changed under this step (an operator cancelled or paused it): the step
    is not written."""


class OperationWorker:
    """Works the open operations of `store` (see the module), each through its `Items`
    (`items_of(record)`), as `owner`."""

    def __init__(
        self,
        store: OperationStore,
        items_of: Callable[[OperationRecord], Items],
        *,
        owner: str,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self._items_of, self.owner = store, items_of, owner
        self._clock, self._monotonic = clock, monotonic

    async def tick(self, *, budget_seconds: float = 25.0) -> int:
        """Work the open operations, oldest first, until none has anything to do now or
        `budget_seconds` passed (a step begun is finished); the steps taken."""
        deadline = self._monotonic() + budget_seconds
        steps = 0
        for found in await self._store.active():
            record: OperationRecord | None = found
            while record is not None and self._monotonic() < deadline:
                record = await self._claimed(record)
                if record is None:
                    break
                try:
                    record, more = await self._step(record)
                except _LostError:
                    break
                except Exception:  # a dependency failed: the step is tried at the next tick
                    logger.warning("operation %s: a step failed", found.id, exc_info=True)
                    break
                steps += 1
                if not more:
                    break
        return steps

    # -- holding an operation ------------------------------------------------------------------

    def _lease(self, record: OperationRecord) -> OperationRecord:
        return dataclasses.replace(
            record, owner=self.owner, lease_until=self._clock() + LEASE_SECONDS
        )

    async def _claimed(self, record: OperationRecord) -> OperationRecord | None:
        """The operation held by this worker (its lease taken or renewed), or None: another
        holds it, or it has nothing to do any more."""
        free = record.owner in (None, self.owner) or (record.lease_until or 0) <= self._clock()
        if not free or not record.active:
            return None
        try:
            return await self._store.write(self._lease(record))
        except PreconditionFailedError:  # changed since it was read: read it again, next time
            return None
        except NotFoundError:
            return None

    async def _save(
        self, record: OperationRecord, change: Callable[[OperationRecord], OperationRecord]
    ) -> OperationRecord:
        """`change` written, the lease renewed; on a conflict (an operator's cancel, pause or
        continue came first) applied again to what is stored, while this worker holds it."""
        current = record
        for _ in range(5):
            try:
                return await self._store.write(self._lease(change(current)))
            except PreconditionFailedError:
                current = await self._store.get(record.id)
                if current.owner != self.owner:
                    raise _LostError(record.id) from None
        raise _LostError(record.id)

    # -- one step ------------------------------------------------------------------------------

    async def _step(self, record: OperationRecord) -> tuple[OperationRecord, bool]:
        """One step of the operation (see the module); the operation after it, and whether
        there is more to do now."""
        items = self._items_of(record)
        if record.batch:  # a batch in flight: this worker's, or one that died's
            return await self._settle(record, items, resumed=True)
        if record.state in ("done", "cancelled"):
            return await self._finish(record), False
        if record.state == "created":
            return await self._count(record, items), True
        if record.state == "canary" and record.canary_sent_at is None:
            return await self._batch(record, items, record.canary, canary=True)
        if record.state == "canary":
            return await self._judge(record, items)
        if record.state == "running":
            return await self._batch(record, items, items.batch or BATCH, canary=False)
        return record, False  # paused: an operator continues or cancels it

    async def _count(self, record: OperationRecord, items: Items) -> OperationRecord:
        count, limit = await items.count()

        def counted(current: OperationRecord) -> OperationRecord:
            if current.state != "created":
                return current
            gated = current.canary > 0 and spec_of(current.kind).canary and count > 0
            return dataclasses.replace(
                current,
                counts=dataclasses.replace(current.counts, items=count),
                items_known=True,
                limit=limit,
                state="canary" if gated else "running",
                subscribers_will_see=items.will_see(OperationCounts(items=count)),
            )

        return await self._save(record, counted)

    async def _batch(
        self, record: OperationRecord, items: Items, size: int, *, canary: bool
    ) -> tuple[OperationRecord, bool]:
        """The next batch written (its keys, the cursor after them), then acted on."""
        picked, cursor = await items.next(record.cursor, record.limit, size)
        marks = await items.watermarks() if canary and picked else {}
        now = self._clock()

        def taken(current: OperationRecord) -> OperationRecord:
            if current.state != record.state or current.batch:
                raise _StopError(current.id)
            if not picked:  # nothing left: done
                return dataclasses.replace(current, state="done", cursor=cursor)
            return dataclasses.replace(
                current,
                batch=tuple(p.key for p in picked),
                batch_since=now,
                cursor=cursor,
                canary_items=tuple(p.canary for p in picked if p.canary) if canary else (),
                watermarks=marks if canary else current.watermarks,
            )

        try:
            record = await self._save(record, taken)
        except _StopError:
            return await self._store.get(record.id), True
        if not record.batch:
            return record, True
        return await self._settle(record, items, resumed=False)

    async def _settle(
        self, record: OperationRecord, items: Items, *, resumed: bool
    ) -> tuple[OperationRecord, bool]:
        """The batch in flight acted on, its outcome counted and the batch cleared (items
        left for later stay in it). `resumed`: begun by an earlier attempt, so an item gone
        from its queue was done by that attempt."""
        with acting_as(actor_of(record)):
            outcomes = await items.act(record.batch)
        waited = self._clock() - (record.batch_since or self._clock())
        outcomes = [_patience(o, waited) for o in outcomes]
        later = tuple(o.key for o in outcomes if o.state == "later")
        gone = sum(1 for o in outcomes if o.state == "gone")
        failures = [o.why for o in outcomes if o.state == "failed" and o.why]
        now = now_text(self._clock)

        def counted(current: OperationRecord) -> OperationRecord:
            counts = current.counts
            counts = dataclasses.replace(
                counts,
                done=counts.done
                + sum(1 for o in outcomes if o.state == "done")
                + (gone if resumed else 0),
                failed=counts.failed + len(failures),
                skipped=counts.skipped + (0 if resumed else gone),
                sent=counts.sent
                + sum(1 for o in outcomes if o.sent and (o.state == "done" or resumed)),
            )
            canary_sent = current.state == "canary" and current.canary_sent_at is None
            return dataclasses.replace(
                current,
                counts=counts,
                batch=later,
                batch_since=current.batch_since if later else None,
                failures=(*current.failures, *failures)[-KEPT_FAILURES:],
                canary_sent_at=now if canary_sent and not later else current.canary_sent_at,
                subscribers_will_see=items.will_see(counts),
            )

        record = await self._save(record, counted)
        return record, not later

    async def _judge(self, record: OperationRecord, items: Items) -> tuple[OperationRecord, bool]:
        """The canary's verdict: failed (paused, saying why), seen applied or not failed
        within its wait (running), or not yet (waits)."""
        verdict = await canary_verdict(record, items, self._clock())
        if verdict is None:
            return record, False
        state, note = verdict

        def judged(current: OperationRecord) -> OperationRecord:
            if current.state != "canary":
                raise _StopError(current.id)
            return dataclasses.replace(current, state=state, note=note)

        try:
            record = await self._save(record, judged)
        except _StopError:
            return await self._store.get(record.id), True
        if state == "paused":
            logger.warning("operation %s paused after its canary: %s", record.id, note)
        return record, state == "running"

    async def _finish(self, record: OperationRecord) -> OperationRecord:
        """A done or cancelled operation closed: its audit line, once (the write that marks it
        audited comes first: a worker that dies after it leaves no second line)."""

        def closed(current: OperationRecord) -> OperationRecord:
            if current.audited or current.batch:
                raise _StopError(current.id)
            return dataclasses.replace(
                current, audited=True, finished_at=current.finished_at or now_text(self._clock)
            )

        try:
            record = await self._save(record, closed)
        except _StopError:
            return record
        audited(record)
        return record


def _patience(outcome: ItemOutcome, waited: float) -> ItemOutcome:
    """An item left for later too long fails (saying why it waited)."""
    if outcome.state != "later" or waited < PATIENCE_SECONDS:
        return outcome
    why = f"{outcome.key}: not handled within {PATIENCE_SECONDS:g} s: {outcome.why or ''}"
    return ItemOutcome(outcome.key, "failed", why=why)


async def canary_verdict(
    record: OperationRecord, items: Items, now: float
) -> tuple[str, str] | None:
    """The canary's verdict (see `OperationWorker._judge`): (the state it leads to, what it
    says), or None while it waits."""
    canary = record.canary_items
    sent = len(canary) or record.counts.done + record.counts.failed
    left = max(0, record.counts.items - record.counts.done - record.counts.failed)
    choose = f"the other {left} are untouched: continue (act on them anyway) or cancel"
    if not left and not record.counts.failed:
        return "running", f"the canary held every item ({sent}): nothing left to wait for"
    if record.counts.failed:
        first = record.failures[-1] if record.failures else ""
        return "paused", (
            f"the canary failed: {record.counts.failed} of {sent} could not be sent again "
            f"({first}); {choose}"
        )
    again = await items.failed_again(canary, record.watermarks)
    if again:
        return "paused", (
            f"the canary failed again: {len(again)} of {sent} came back as dead letters "
            f"({again[0]}); {choose}"
        )
    applied = await items.applied(canary)
    if applied is not None and applied[0] >= len(canary):
        return (
            "running",
            f"the canary succeeded: {applied[0]} of {sent} seen applied by {applied[1]}",
        )
    waited = now - datetime.fromisoformat(record.canary_sent_at or now_text()).timestamp()
    wait = record.canary_wait_seconds
    if waited < wait:
        return None
    if applied is None:
        return "running", (
            f"the canary succeeded as far as this app can see: none of {sent} came back as a "
            f"dead letter within {wait:g} s (whether their subscriber applied them it cannot "
            "see: no projection container of theirs is known, OUTBOX_SUBSCRIPTIONS)"
        )
    return "paused", (
        f"the canary was not seen applied: {applied[0]} of {sent} applied by {applied[1]} "
        f"within {wait:g} s, none back as a dead letter; {choose}"
    )


def audited(record: OperationRecord) -> None:
    """The operation's audit line (as the operator who started it)."""
    counts = record.counts
    with acting_as(actor_of(record)):
        audit(
            f"operations.{record.kind}",
            f"operation {record.id} ({summary_of(record)}) {record.state}: {counts.done} of "
            f"{counts.items} done, {counts.failed} failed, {counts.skipped} skipped, "
            f"{counts.sent} message(s) sent"
            + (f"; reason: {record.reason}" if record.reason else "")
            + (f"; {record.note}" if record.note else ""),
            will_see=record.subscribers_will_see,
            operation=record.id,
            kind=record.kind,
            state=record.state,
            items=counts.items,
            done=counts.done,
            failed=counts.failed,
            skipped=counts.skipped,
            sent=counts.sent,
        )
