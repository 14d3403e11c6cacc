"""A failed message as the operators see it (OUTBOX_FAILURE_INGEST): its record's state, and
its history: each attempt that failed (when, the dead letter's sequence
number, the reason, how many deliveries) and each thing done to it (retried, archived,
unarchived: when, by whom, in which operation, why). A dead letter's peek carries it, the
journey of an event lists its event's, `Operations.dead_letters.failure` reads one by id."""

from __future__ import annotations

from datetime import datetime

from cosmos_outbox._mapper.failure import FailureRecord
from cosmos_outbox._model import Model, of_attributes

__all__ = ["FailureAttemptView", "FailureNoteView", "FailureView"]


class FailureAttemptView(Model):
    """One delivery of the message that was dead-lettered (and kept)."""

    at: datetime
    sequence_number: int
    reason: str | None
    description: str | None
    delivery_count: int
    enqueued_at: datetime | None


class FailureNoteView(Model):
    """One thing done to the failure: `what` (retried, archived, unarchived), when, by whom,
    in which operation (None: a call of its own), and the note given (a discard's reason)."""

    at: datetime
    what: str
    by: str
    operation: str | None = None
    note: str | None = None


class FailureView(Model):
    """A failed message's record and its history, oldest first (see the module); a quarantined
    event's too (`entity_kind` quarantine: its attempts are its quarantines). `state`:
    open (in its group), archived (hidden; who and why in `history`) or resolved (retried);
    `attemptCount` counts every attempt, `attempts` lists the last 50."""

    id: str
    group: str
    entity: str
    entity_kind: str
    event_id: str | None
    message_id: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    action: str | None
    version: int | None
    state: str
    reason: str | None
    description: str | None
    cause: str
    first_failed_at: datetime
    last_failed_at: datetime
    attempt_count: int
    attempts: list[FailureAttemptView]
    history: list[FailureNoteView]
    #: seconds it is kept for once archived or resolved (None: open, kept)
    ttl: int | None = None

    @classmethod
    def of(cls, record: FailureRecord) -> FailureView:
        return of_attributes(
            cls,
            record,
            attempts=[of_attributes(FailureAttemptView, a) for a in record.attempts],
            history=[of_attributes(FailureNoteView, n) for n in record.history],
        )
