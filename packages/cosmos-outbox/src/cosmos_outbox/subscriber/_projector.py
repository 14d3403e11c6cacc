"""The projector: one event in, the projection change and its inbox record out, in ONE
transactional batch in the aggregate's partition of the projection container: an exactly-once
effect for an at-least-once delivery.

What the projection holds and how an event changes it is the app's (`Projection`: `handles`
and `apply`); the rest is here. Documents, all partitioned by aggregate id (`/partitionKey`):

- the projection, id = aggregate id, `version` = last applied;
- one inbox record per processed event, id `inbox-<event id>`, `type` `inboxRecord`, expiring
  after the inbox TTL (`INBOX_TTL_SECONDS`);
- one held event per event that arrived after a gap, id `held-<version>`, `type` `heldEvent`,
  kept (no TTL) until the missing version arrives and it is applied;
- one gap record per quarantine notice (the outbox set the event of that version aside), id
  `gap-<version>`, `type` `quarantinedGap`, with the event id, action and reason: the gap is a
  known one, not a loss. The events after it are held as for any gap; the record is deleted in
  the batch that applies that version when the operator replays the event;
- one accepted gap per version an operator gave up (`OutboxEventDiscarded`: a quarantined event
  discarded at the outbox, a dead letter discarded at this subscription, or the version
  released by an operator), id `gap-<version>`, `type` `acceptedGap`, with the event id, action,
  reason, who gave it up and when, expiring with the inbox records: the notice is applied as
  that version (a version step: `Projection.apply` is called with it, as for an action the
  projection does not handle), and the events held after it are applied in the same batches.

Per event version:

- version <= last applied: a duplicate (already applied) -> acknowledged, no effect;
- version == last + 1: applied;
- version > last + 1: a gap (an earlier event has not arrived: it was quarantined by the relay,
  dead-lettered, or is still on its way) -> the event is held until the missing one arrives
  (or an operator gives it up), then applied with every held event that follows on without a
  gap. Every hold says why, where an operator reads it: a warning naming the missing version,
  what is known of it (quarantined by the outbox, with the reason; else not received) and the
  command that releases it; the `subscriber.events.held` metric; and `status()`.

A scheduled event (`IncomingEvent.scheduled`: published with a due time, delivered then) takes no
place in the aggregate's order: it is applied when it arrives, to the projection as it is then,
which keeps its version; it is never held behind a missing version, and no version is ever held
behind it (a reminder due tomorrow never holds today's events). Its inbox record makes a
redelivery a duplicate.

An event whose inbox record exists is acknowledged without effect; so is one whose version is
not above the projection's (which also covers a redelivery after its inbox record expired).
An event whose action the projection does not handle is applied as a version step only (its
inbox record says `ignored`): later versions are not held behind it.
A conflict (another delivery of the same aggregate's events won the race: 409 on the inbox
record, 412 on the projection's etag) fails the batch as a whole, nothing is written, and the
error propagates: the host abandons the message and its redelivery finds the inbox record.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from cosmos_outbox._sync_over_async import as_async
from cosmos_outbox.errors import AlreadyExistsError
from cosmos_outbox.ports import AsyncDocumentStore, BatchOperation, DocumentStore
from cosmos_outbox.subscriber import _telemetry as telemetry
from cosmos_outbox.subscriber._bookkeeping import (
    ACCEPTED_GAP_TYPE,
    GAP_TYPE,
    HELD_TYPE,
    INBOX_TYPE,
    gap_id,
    held_id,
    hold_reason,
    inbox_id,
    last_version,
)
from cosmos_outbox.subscriber._events import (
    DISCARD_NOTICE,
    NOTICES,
    QUARANTINE_NOTICE,
    IncomingEvent,
)
from cosmos_outbox.subscriber._status import SubscriberStatus, subscriber_status

__all__ = [
    "ACCEPTED_GAP_TYPE",
    "GAP_TYPE",
    "HELD_TYPE",
    "INBOX_TYPE",
    "AsyncProjector",
    "Decision",
    "Outcome",
    "Projection",
    "Result",
    "decide",
    "gap_id",
    "held_id",
    "inbox_id",
    "last_version",
]

logger = logging.getLogger("cosmos_outbox.subscriber")


class Projection(abc.ABC):
    """What a read model holds and how an event changes it: the app's part of a projector.
    Pure: no storage, no I/O."""

    @abc.abstractmethod
    def handles(self, action: str) -> bool:
        """Whether an event of this action changes the projection (else: a version step)."""

    @abc.abstractmethod
    def apply(self, projection: Mapping[str, Any] | None, event: IncomingEvent) -> dict[str, Any]:
        """The projection document after `event` (the next version; None: the first), with
        `id`, `partitionKey` (the aggregate id) and `version` (the event's)."""


class Decision(Enum):
    APPLY = "apply"
    DUPLICATE = "duplicate"
    HOLD = "hold"


def decide(projection: Mapping[str, Any] | None, event: IncomingEvent) -> Decision:
    last = last_version(projection)
    if event.version <= last:
        return Decision.DUPLICATE
    if event.version == last + 1:
        return Decision.APPLY
    return Decision.HOLD


# Held events applied per batch (a batch holds at most 100 operations: the projection, the
# inbox record and one delete per held event).
MAX_HELD_PER_BATCH = 50


class Outcome(Enum):
    APPLIED = "applied"
    #: applied as a version step only: the projection does not handle its action
    IGNORED = "ignored"
    DUPLICATE = "duplicate"
    HELD = "held"
    GAP_RECORDED = "gap recorded"
    #: an operator gave the version up: recorded as an accepted gap, the held versions after
    #: it applied
    GAP_ACCEPTED = "gap accepted"


@dataclass
class Result:
    outcome: Outcome
    applied: list[int] = field(default_factory=list)
    missing: int | None = None


def _held_event(document: dict[str, Any], aggregate_type: str) -> IncomingEvent:
    e = document["event"]
    return IncomingEvent(
        event_id=e["id"],
        aggregate_id=document["partitionKey"],
        type=e["type"],
        version=int(e["version"]),
        data=e["data"],
        aggregate_type=aggregate_type,
    )


class _AlreadyProcessedError(Exception):
    """The event's inbox record exists: a batch creating it failed with 409."""


class AsyncProjector:
    """Applies events to the projection container (`cosmos_outbox.aio.Projector`; the sync
    `Projector` runs it), over a document store: `cosmos_outbox.cosmos.AsyncCosmosDocumentStore`
    (or its sync one: awaited as it is).

    Point reads only (a partition-scoped query costs more RUs than a point read, and a local
    endpoint scans every document for one): the projection, then for an event to apply the held
    event and the known gap that may follow it, then one transactional batch. Whether the event
    was processed already is its version (not above the projection's) or, for an event held or
    noticed before, the batch's create of its inbox record failing with 409."""

    def __init__(
        self,
        store: AsyncDocumentStore | DocumentStore,
        projection: Projection,
        *,
        inbox_ttl_seconds: int,
    ) -> None:
        self._store = as_async(store)
        self._projection = projection
        self._inbox_ttl = inbox_ttl_seconds

    async def _read(self, item: str, partition: str) -> dict[str, Any] | None:
        return await self._store.read(partition, item)

    def _inbox_record(self, event: IncomingEvent, *, held: bool) -> dict[str, Any]:
        return {
            "id": inbox_id(event.event_id),
            "partitionKey": event.aggregate_id,
            "type": INBOX_TYPE,
            "eventId": event.event_id,
            "action": event.type,
            "version": event.version,
            "held": held,
            "ignored": event.type in NOTICES or not self._projection.handles(event.type),
            "processedAt": datetime.now(UTC).isoformat(),
            "ttl": self._inbox_ttl,
        }

    async def _batch(
        self, operations: list[BatchOperation], partition: str, *, inbox_first: bool
    ) -> None:
        """One transactional batch. When its first operation creates the incoming event's
        inbox record and that fails with 409, the event was processed before."""
        try:
            await self._store.execute_batch(partition, operations)
        except AlreadyExistsError as exc:
            if inbox_first and exc.operation_index == 0:
                raise _AlreadyProcessedError from None
            raise

    async def handle(self, event: IncomingEvent) -> Result:
        try:
            return await self._handle(event)
        except _AlreadyProcessedError:
            return Result(Outcome.DUPLICATE)

    async def status(self, *, aggregate_id: str | None = None) -> SubscriberStatus:
        """What this projector holds and why, and the gaps operators accepted (of one aggregate
        when given): `cosmos_outbox.subscriber.subscriber_status` on its container."""
        return await subscriber_status(self._store, aggregate_id=aggregate_id)

    async def _handle(self, event: IncomingEvent) -> Result:
        partition = event.aggregate_id
        projection = await self._read(partition, partition)
        if event.type == QUARANTINE_NOTICE:
            return await self._record_gap(projection, event)
        if event.scheduled:
            return await self._apply_scheduled(projection, event)
        if event.type == DISCARD_NOTICE and event.version == 0:
            logger.warning(
                "%s %s: a discard notice without a version (event %s): nothing to give up",
                event.aggregate_type,
                partition,
                event.data.get("eventId"),
            )
            return Result(Outcome.DUPLICATE)
        decision = decide(projection, event)
        if decision is Decision.DUPLICATE:
            if event.type == DISCARD_NOTICE:
                logger.info(
                    "%s %s: version %d was given up (%s), but it was applied already",
                    event.aggregate_type,
                    partition,
                    event.version,
                    event.data.get("reason"),
                )
            return Result(Outcome.DUPLICATE)
        if decision is Decision.HOLD:
            missing = last_version(projection) + 1
            orphan = await self._read(held_id(missing), partition)
            if orphan is not None:
                # the missing version is held already (a delivery that raced the last apply
                # held it): apply from it, then decide again
                await self._apply(
                    projection, _held_event(orphan, event.aggregate_type), incoming=False
                )
                return await self._handle(event)
            return await self._hold(event, missing)
        applied = await self._apply(projection, event, incoming=True)
        if event.type == DISCARD_NOTICE:
            outcome = Outcome.GAP_ACCEPTED
        elif self._projection.handles(event.type):
            outcome = Outcome.APPLIED
        else:
            outcome = Outcome.IGNORED
        return Result(outcome, applied=applied)

    async def _hold(self, event: IncomingEvent, missing: int) -> Result:
        """Hold `event` until version `missing` of its aggregate arrives, saying why."""
        partition = event.aggregate_id
        held = {
            "id": held_id(event.version),
            "partitionKey": partition,
            "type": HELD_TYPE,
            "aggregateType": event.aggregate_type,
            "missingVersion": missing,
            "heldAt": datetime.now(UTC).isoformat(),
            "event": {
                "id": event.event_id,
                "type": event.type,
                "version": event.version,
                "data": dict(event.data),
            },
            "ttl": -1,
        }
        await self._write_with_inbox(event, held, held=True)
        telemetry.held(event.aggregate_type)
        known = await self._read(gap_id(missing), partition)
        why, release = hold_reason(event.aggregate_type, partition, missing, known)
        logger.warning(
            "%s %s: event %s version %d held, version %d missing: %s; %s",
            event.aggregate_type,
            partition,
            event.event_id,
            event.version,
            missing,
            why,
            release,
            extra={
                "outcome": "held",
                "aggregateType": event.aggregate_type,
                "aggregateId": partition,
                "version": event.version,
                "missingVersion": missing,
                "reason": why,
                "release": release,
            },
        )
        return Result(Outcome.HELD, missing=missing)

    async def _apply_scheduled(
        self, projection: dict[str, Any] | None, event: IncomingEvent
    ) -> Result:
        """A scheduled event, applied as it arrives (see the module): its inbox record and the
        projection after it (its version kept), in one batch; an action the projection does
        not handle leaves the projection as it is (its inbox record says `ignored`)."""
        partition = event.aggregate_id
        operations = [BatchOperation("create", self._inbox_record(event, held=False))]
        handled = self._projection.handles(event.type)
        if handled:
            updated = {
                **self._projection.apply(projection, event),
                "version": last_version(projection),
            }
            if projection is None:
                operations.append(BatchOperation("create", updated))
            else:
                operations.append(BatchOperation("replace", updated, if_match=projection["_etag"]))
        await self._batch(operations, partition, inbox_first=True)
        return Result(Outcome.APPLIED if handled else Outcome.IGNORED)

    async def _write_with_inbox(
        self, event: IncomingEvent, record: dict[str, Any], *, held: bool
    ) -> None:
        """The event's inbox record and one record of its aggregate (held event, known gap), in
        one batch: both or neither."""
        await self._batch(
            [
                BatchOperation("create", self._inbox_record(event, held=held)),
                BatchOperation("upsert", record),
            ],
            event.aggregate_id,
            inbox_first=True,
        )

    def _accepted_gap(self, notice: IncomingEvent) -> dict[str, Any]:
        """The record of a version an operator gave up (the discard notice's data)."""
        data = notice.data
        return {
            "id": gap_id(notice.version),
            "partitionKey": notice.aggregate_id,
            "type": ACCEPTED_GAP_TYPE,
            "aggregateType": notice.aggregate_type,
            "version": notice.version,
            "eventId": data.get("eventId"),
            "action": data.get("action"),
            "reason": data.get("reason"),
            "discardedBy": data.get("discardedBy"),
            "discardedAt": data.get("discardedAt"),
            "subscription": data.get("subscription"),
            "noticeId": notice.event_id,
            "acceptedAt": datetime.now(UTC).isoformat(),
            "ttl": self._inbox_ttl,
        }

    def _accepted(self, notice: IncomingEvent, step: list[IncomingEvent]) -> None:
        telemetry.gap_accepted(notice.aggregate_type)
        after = [item.version for item in step if item.version > notice.version]
        logger.warning(
            "%s %s: version %d given up by %s (event %s, %s: %s): accepted gap; %s",
            notice.aggregate_type,
            notice.aggregate_id,
            notice.version,
            notice.data.get("discardedBy"),
            notice.data.get("eventId"),
            notice.data.get("action"),
            notice.data.get("reason"),
            f"versions {after} applied after it" if after else "nothing was held after it",
            extra={
                "outcome": Outcome.GAP_ACCEPTED.value,
                "aggregateType": notice.aggregate_type,
                "aggregateId": notice.aggregate_id,
                "version": notice.version,
                "eventId": notice.data.get("eventId"),
                "reason": notice.data.get("reason"),
                "discardedBy": notice.data.get("discardedBy"),
                "applied": after,
            },
        )

    async def _record_gap(self, projection: dict[str, Any] | None, event: IncomingEvent) -> Result:
        """A quarantine notice: the event of `event.version` was set aside by the outbox. Its
        gap is recorded (with the notice's inbox record, in one batch) unless that version is
        already applied (a replay came first) or unknown."""
        partition = event.aggregate_id
        if event.version == 0 or event.version <= last_version(projection):
            return Result(Outcome.DUPLICATE)
        gap = {
            "id": gap_id(event.version),
            "partitionKey": partition,
            "type": GAP_TYPE,
            "aggregateType": event.aggregate_type,
            "version": event.version,
            "eventId": event.data.get("eventId"),
            "action": event.data.get("action"),
            "reason": event.data.get("reason"),
            "noticedAt": datetime.now(UTC).isoformat(),
            "ttl": -1,
        }
        await self._write_with_inbox(event, gap, held=False)
        logger.warning(
            "%s %s: version %d was quarantined by the outbox (event %s): %s",
            event.aggregate_type,
            partition,
            event.version,
            gap["eventId"],
            gap["reason"],
        )
        return Result(Outcome.GAP_RECORDED, missing=event.version)

    async def _apply(
        self, projection: dict[str, Any] | None, event: IncomingEvent, *, incoming: bool
    ) -> list[int]:
        """Apply `event` (the incoming one, or a held one) and the held events that follow on
        without a gap, in batches of at most MAX_HELD_PER_BATCH held events: the projection
        after them (created, or replaced if its etag is unchanged), the inbox record of the
        incoming event, the deletion of the held events applied and of the known gaps (quarantine
        notices) their versions close."""
        partition = event.aggregate_id
        applied: list[int] = []
        step = [event]
        while True:
            limit = MAX_HELD_PER_BATCH + (1 if incoming and not applied else 0)
            following = await self._read(held_id(step[-1].version + 1), partition)
            while following is not None and len(step) < limit:
                step.append(_held_event(following, event.aggregate_type))
                following = await self._read(held_id(step[-1].version + 1), partition)
            updated = projection
            for item in step:
                updated = self._projection.apply(updated, item)
            assert updated is not None
            with_inbox = incoming and not applied
            operations: list[BatchOperation] = []
            if with_inbox:
                operations.append(BatchOperation("create", self._inbox_record(event, held=False)))
            if projection is None:
                operations.append(BatchOperation("create", updated))
            else:
                operations.append(BatchOperation("replace", updated, if_match=projection["_etag"]))
            released = [item for item in step if not (with_inbox and item is event)]
            operations += [BatchOperation("delete", id=held_id(item.version)) for item in released]
            for item in step:
                if item.type == DISCARD_NOTICE:
                    operations.append(BatchOperation("upsert", self._accepted_gap(item)))
                elif await self._read(gap_id(item.version), partition) is not None:
                    operations.append(BatchOperation("delete", id=gap_id(item.version)))
            await self._batch(operations, partition, inbox_first=with_inbox)
            telemetry.released(event.aggregate_type, len(released))
            for item in step:
                if item.type == DISCARD_NOTICE:
                    self._accepted(item, step)
            applied += [item.version for item in step]
            if following is None:
                return applied
            # the batch was full and a held event follows: go on from the projection written
            projection = await self._read(partition, partition)
            assert projection is not None
            step = [_held_event(following, event.aggregate_type)]
            incoming = False
