"""An event's history, the journey's list of what happened to it, oldest first: created,
quarantined, replayed, discarded, dead-lettered where, resubmitted or discarded there and by
whom (the dead letters' watch remembers it: `_watch`), vanished, applied or given up by each
subscriber the app knows. Read from what the journey read already; no call of its own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cosmos_outbox._mapper import parse_time
from cosmos_outbox._model import Model
from cosmos_outbox._quarantine import QuarantinedEvent
from cosmos_outbox._records import OutboxRecord, Unreadable
from cosmos_outbox.operations._letters import Described, enqueued
from cosmos_outbox.operations._watch import WatchRecord

__all__ = ["Step", "SubscriberSight", "history"]

#: What a dead letter's fate after it was dead-lettered says in the history.
_FATES = {
    "resubmitted": "resubmitted to {at} by {by}",
    "discarded": "discarded at {at} by {by}",
    "vanished": "its dead letter left {at} without being applied",
    "applied": "applied at {at} after it left its dead-letter queue",
    "given up": "given up at {at} after it left its dead-letter queue",
}


class SubscriberSight(Model):
    """What one subscriber did with the event: `applied`, `held` (waiting for
    `waiting_for`), `given up` (an accepted gap), `not received`, `not for it` (its rules drop
    the event's message: a re-drive would not reach it either), `vanished` (a dead letter of
    it left its queue without being applied: `recover` says what to do), or `unknown` (the app
    does not know this subscription's subscriber, or its container did not answer). `rules`:
    what its rules do with the event's message (receives, drops, or unknown and why)."""

    subscription: str
    state: str
    rules: str | None = None
    #: None when unknown
    projection_version: int | None
    applied_at: str | None = None
    waiting_for: int | None = None
    given_up_by: str | None = None
    recover: str | None = None


class Step(Model):
    """One thing that happened to the event (its history), when it is known."""

    at: datetime | None
    what: str


def history(
    event: OutboxRecord | Unreadable | None,
    quarantined: QuarantinedEvent | None,
    letters: Sequence[tuple[str, Described]],
    watch: Sequence[WatchRecord],
    sights: Sequence[SubscriberSight],
) -> list[Step]:
    """What happened to the event, oldest first (unknown times last)."""
    steps: list[Step] = []
    created = getattr(event, "created_at", None)
    if created is not None:
        steps.append(Step(at=created, what="created (committed with its change)"))
    q = quarantined
    if q is not None:
        steps.append(Step(at=q.quarantined_at, what=f"quarantined by the relay: {q.reason}"))
        if q.replays:
            steps.append(Step(at=q.resolved_at, what=f"replayed {q.replays} time(s), {q.status}"))
        if q.discarded_at is not None:
            what = f"discarded by {q.discarded_by}: {q.discard_reason}"
            steps.append(Step(at=q.discarded_at, what=what))
    for record in watch:
        steps.append(
            Step(
                at=record.dead_lettered_at or record.seen_at,
                what=f"dead-lettered at {record.subscription}: {record.reason or '-'}",
            )
        )
        if record.fate in _FATES:
            said = _FATES[record.fate].format(at=record.subscription, by=record.by)
            steps.append(Step(at=record.fate_at, what=said))
    for name, described in letters:
        if name in {r.subscription for r in watch}:
            continue
        what = f"dead-lettered at {name}: {described.letter.reason or '-'}"
        steps.append(Step(at=enqueued(described.letter), what=what))
    for sight in sights:
        if sight.state == "applied":
            steps.append(
                Step(at=parse_time(sight.applied_at), what=f"applied by {sight.subscription}")
            )
        elif sight.state == "given up":
            steps.append(
                Step(at=None, what=f"given up at {sight.subscription} by {sight.given_up_by}")
            )
    return sorted(steps, key=lambda s: (s.at is None, s.at.timestamp() if s.at else 0.0))
