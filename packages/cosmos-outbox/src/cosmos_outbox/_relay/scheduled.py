"""Scheduled events: their release at their due time, the one step between "committed" and "sent"
that a cancel can race, and the only one that can make a scheduled event go.

A scheduled event's document (`deliverAt`, `cosmos_outbox._mapper`) goes through three states,
each written on the condition of the etag it was read with, so that of two writers exactly one
commits:

    committed (deliverAt)  --release, at or after its due time-->  released (releasedAt): sent
                           --the app's cancel, in its batch----->  cancelled (cancelledAt): never

1. The relay (the change feed) reads a committed scheduled event and schedules its release on
   the schedule queue (`cosmos_outbox.ports.ScheduleQueue`: a Service Bus queue, the message
   scheduled for the due time, or for `HORIZON` ahead when that is later: the release schedules
   itself again until the due time). It sends nothing.
2. When the release comes (`release_due_events`, a Service Bus queue trigger of the relay's
   blueprint), `Releases.release` reads the event: cancelled, released already, or gone
   (expired: a warning) -- nothing to do; not due yet by this clock (the broker's clock ahead, or
   a step of a long delay) -- scheduled again for its due time; else rewritten as released, on
   the etag read (refused: read again and decide again).
3. The released document comes back through the change feed, and the relay sends it as it sends
   any event (batches, claim check, quarantine), without a version, saying when it was due.

So a cancel that commits before the release means the event is never sent, whatever the relay
was doing: a relay that had not read the event yet reads the cancelled document only (the change
feed keeps a document's latest version); a release scheduled already finds it cancelled; a relay
down at the due time leaves the release waiting in the queue, and it finds the event cancelled
when it comes. A release that commits first makes the cancel fail (TooLateToCancelError): the app
knows, nothing of its transaction is written. No Service Bus sequence number is kept anywhere,
and a subscriber that is not the library's never sees a cancelled event either.

This is the async API's; the sync API runs it over sync adapters.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from cosmos_outbox import clock
from cosmos_outbox._domain import utc_text
from cosmos_outbox._mapper import (
    EVENT_TYPE,
    SCHEDULED_WAITING,
    parse_time,
    released,
    schedule_of,
)
from cosmos_outbox._model import Model
from cosmos_outbox._records import Release
from cosmos_outbox.errors import NotFoundError, PreconditionFailedError
from cosmos_outbox.ports import AsyncDocumentStore, AsyncScheduleQueue

__all__ = [
    "HORIZON",
    "OVERDUE_AFTER",
    "ReleaseOutcome",
    "Releases",
    "ScheduleState",
    "Waiting",
    "schedule_state",
    "step",
    "waiting",
]

#: The log category operators filter on: the relay's.
logger = logging.getLogger("cosmos_outbox.relay")

#: The furthest ahead a release is scheduled on the queue: a longer delay takes several steps
#: (each release not yet due schedules itself again), so a release never waits on the queue
#: longer than this (the queue's message time to live must be longer).
HORIZON = timedelta(days=1)
#: How often a release reads and writes the event again when its write was refused on the etag.
_ATTEMPTS = 5
#: How long after its due time a scheduled event not released yet is overdue: its release has not
#: come (the release trigger not running, or its release dead-lettered at the schedule queue).
OVERDUE_AFTER = timedelta(minutes=1)


class ScheduleState(Model):
    """Where a scheduled event is: `waiting` (for its due time, or for its release: `overdue`
    when that is more than `OVERDUE_AFTER` late), `released` (sent by the relay) or `cancelled`
    (never sent), with the times the document keeps."""

    due_at: datetime
    state: str
    overdue: bool = False
    released_at: datetime | None = None
    cancelled_at: datetime | None = None


def schedule_state(
    document: Mapping[str, Any], now: datetime | None = None
) -> ScheduleState | None:
    """A stored event's schedule (None: it is not a scheduled event, or its due time is not
    a time)."""
    schedule = schedule_of(document)
    due = schedule.due if schedule is not None else None
    if schedule is None or due is None:
        return None
    released_at, cancelled_at = parse_time(schedule.released_at), parse_time(schedule.cancelled_at)
    if cancelled_at is not None:
        return ScheduleState(due_at=due, state="cancelled", cancelled_at=cancelled_at)
    if released_at is not None:
        return ScheduleState(due_at=due, state="released", released_at=released_at)
    late = (now or clock.now()) - due > OVERDUE_AFTER
    return ScheduleState(due_at=due, state="waiting", overdue=late)


class Waiting(Model):
    """The scheduled events not released nor cancelled: `waiting` (for their due time or their
    release), of which `overdue` (due more than a minute ago: their release has not come: the
    relay's `release_due_events` not running, or the release dead-lettered at the schedule
    queue), and when the next one is due."""

    waiting: int
    overdue: int
    next_due_at: datetime | None


async def waiting(store: AsyncDocumentStore) -> Waiting:
    """The scheduled events waiting in the outbox's container (one query across partitions:
    their due times)."""
    now = clock.now()
    due = [
        at
        for value in await store.query(SCHEDULED_WAITING, {"@type": EVENT_TYPE})
        if (at := parse_time(value)) is not None and at.tzinfo is not None
    ]
    late = [at for at in due if now - at > OVERDUE_AFTER]
    coming = [at for at in due if at >= now]
    return Waiting(waiting=len(due), overdue=len(late), next_due_at=min(coming) if coming else None)


class ReleaseOutcome(Enum):
    """What a release did."""

    #: the event is released: the relay sends it
    RELEASED = "released"
    #: released before (a release handed back twice): nothing to do
    ALREADY = "released already"
    #: the app cancelled it: never sent
    CANCELLED = "cancelled"
    #: not due yet by this clock: scheduled again for its due time
    NOT_YET = "not due yet"
    #: no such scheduled event (expired, or a release that is not one of a scheduled event)
    GONE = "gone"


def step(due: datetime, now: datetime) -> datetime:
    """When to schedule the release of an event due at `due`: then, or `HORIZON` from now."""
    return min(due, now + HORIZON)


class Releases:
    """Releases scheduled events when their time comes (see the module), over the outbox's
    store; a release not due yet is scheduled again on `schedule`. `event_ttl_seconds`: how
    long a released event's document is kept (the relay's allowance for an outage)."""

    def __init__(
        self,
        store: AsyncDocumentStore,
        schedule: AsyncScheduleQueue | None,
        *,
        event_ttl_seconds: int,
    ) -> None:
        self._store = store
        self._schedule = schedule
        self._event_ttl = event_ttl_seconds

    async def release(self, release: Release) -> ReleaseOutcome:
        """Release the event if it is due, cancelled by no one and released by no other
        release (see the module); what was done."""
        for _attempt in range(_ATTEMPTS):
            document = await self._store.read(release.partition_key, release.event_id)
            outcome = await self._decide(release, document)
            if outcome is not None:
                return outcome
            assert document is not None
            try:
                await self._store.replace(
                    released(document, utc_text(), self._event_ttl), if_match=document["_etag"]
                )
            except (PreconditionFailedError, NotFoundError):
                continue  # cancelled or released since it was read: decide again
            schedule = schedule_of(document)
            due = schedule.deliver_at if schedule is not None else None
            return _told(
                release, ReleaseOutcome.RELEASED, "scheduled event %s released (due %s)", due
            )
        raise PreconditionFailedError(
            f"scheduled event {release.event_id} kept changing while it was released; retry"
        )

    async def _decide(
        self, release: Release, document: Mapping[str, Any] | None
    ) -> ReleaseOutcome | None:
        """What a release does with the event as read (None: release it)."""
        schedule = (
            schedule_of(document)
            if document is not None and document.get("type") == EVENT_TYPE
            else None
        )
        if schedule is None:
            logger.warning(
                "the release of scheduled event %s found no such event in partition %s "
                "(expired, or never scheduled): nothing to release",
                release.event_id,
                release.partition_key,
                extra=_fields(release, ReleaseOutcome.GONE),
            )
            return ReleaseOutcome.GONE
        if schedule.cancelled_at is not None:
            message = "scheduled event %s was cancelled at %s: not released, never sent"
            return _told(release, ReleaseOutcome.CANCELLED, message, schedule.cancelled_at)
        if schedule.released_at is not None:
            return ReleaseOutcome.ALREADY
        due, now = schedule.due, clock.now()
        if due is not None and due > now:
            if self._schedule is None:
                raise RuntimeError("a release came early and there is no schedule queue")
            await self._schedule.schedule(
                [Release(release.partition_key, release.event_id, step(due, now))]
            )
            return ReleaseOutcome.NOT_YET
        return None


def _told(
    release: Release, outcome: ReleaseOutcome, message: str, detail: object
) -> ReleaseOutcome:
    """`outcome`, logged at INFO: `message` with the event id and `detail`, and the release's
    fields (the record names the caller's line)."""
    logger.info(
        message,
        release.event_id,
        detail,
        extra=_fields(release, outcome),
        stacklevel=2,
    )
    return outcome


def _fields(release: Release, outcome: ReleaseOutcome) -> dict[str, object]:
    return {
        "outbox.event_id": release.event_id,
        "outbox.partition_key": release.partition_key,
        "outbox.release": outcome.value,
    }
