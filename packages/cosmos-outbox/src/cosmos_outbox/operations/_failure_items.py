"""What `Failures` keeps, before it is written: a failure seen (`Pending`: where its record goes,
the attempt it adds) -- a dead letter drained (`letter_pending`), or a quarantined event
(`quarantine_pending`: the quarantine's failures are records of the same kind, of the
pseudo-entity `quarantine`) -- and a record to write over what it was (`Write`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cosmos_outbox._causes import cause_of, failure_text, group_id
from cosmos_outbox._mapper import SentFields, headers_of, sent_fields
from cosmos_outbox._mapper.failure import (
    FailureAttempt,
    FailureGroupRecord,
    FailureNote,
    FailureRecord,
    failure_id,
)
from cosmos_outbox.ports import DeadLetter, DeadLetterEntity

if TYPE_CHECKING:
    from cosmos_outbox._quarantine import QuarantinedEvent

__all__ = [
    "DEAD_LETTERS_SOURCE",
    "QUARANTINED_AGAIN",
    "QUARANTINE_ENTITY",
    "QUARANTINE_SOURCE",
    "Pending",
    "Write",
    "failure_key",
    "group_of",
    "letter_pending",
    "quarantine_pending",
]

#: The source a dead letter's group is keyed by (`operations._groups`' ids, unchanged).
DEAD_LETTERS_SOURCE = "dead letters"
#: The source a quarantined event's group is keyed by (`operations._groups`' ids, unchanged).
QUARANTINE_SOURCE = "quarantine"
#: The entity (and its kind) of the quarantine's records: `failure_id("quarantine", event id)`.
QUARANTINE_ENTITY = "quarantine"
#: What a settled quarantine record's history notes when its event is set aside again, and who.
QUARANTINED_AGAIN = "quarantined again"
QUARANTINED_BY = "the relay"


def failure_key(letter: DeadLetter, event_id: str | None) -> str:
    """What names a failure at its entity: its event id, else its MessageId, else its sequence
    number in the dead-letter queue."""
    return event_id or letter.message_id or f"sequence-{letter.sequence_number}"


@dataclass(frozen=True)
class Pending:
    """A failure being kept: where its record goes, and the attempt it adds. `letter`: what
    failed, as a dead letter (a quarantined event's: its stored document as the body, its
    event id as the MessageId, its replays so far as the attempt's number). `again`: what the
    history of a settled record (resolved, archived) notes when this failure opens it again,
    by whom, always one more attempt, even of a number it holds (a quarantine: a new one once
    its record was settled); None: the number names the failure's delivery, kept once
    whatever the record's state (a dead letter's sequence number)."""

    index: int
    entity: str
    entity_kind: str
    letter: DeadLetter
    described: SentFields
    cause: str
    group: str
    record_id: str
    attempt: FailureAttempt
    again: FailureNote | None = None

    @property
    def summary(self) -> FailureGroupRecord:
        """Its group's summary, nothing counted yet (`group_of` its first failure's record)."""
        return group_of(self.first_failure())

    def first_failure(self) -> FailureRecord:
        """The record of a failure seen for the first time: open, its one attempt."""
        letter, described = self.letter, self.described
        return FailureRecord(
            id=self.record_id,
            group=self.group,
            entity=self.entity,
            entity_kind=self.entity_kind,
            event_id=described.event_id,
            **headers_of(letter),
            body=letter.body,
            properties=dict(letter.application_properties),
            aggregate_type=described.aggregate_type,
            aggregate_id=described.aggregate_id,
            action=described.action,
            version=described.version,
            reason=letter.reason,
            description=letter.description,
            cause=self.cause,
            state="open",
            first_failed_at=self.attempt.at,
            last_failed_at=self.attempt.at,
            attempt_count=1,
            attempts=(self.attempt,),
        )


def group_of(record: FailureRecord) -> FailureGroupRecord:
    """The summary of `record`'s group, nothing counted: what names the group."""
    return FailureGroupRecord(
        group=record.group,
        entity=record.entity,
        entity_kind=record.entity_kind,
        cause=record.cause,
        aggregate_type=record.aggregate_type,
        action=record.action,
    )


@dataclass(frozen=True)
class Write:
    """A record to write over `before` (None: created); `moved_from`: its copy in another group,
    dropped once it is written."""

    item: Pending
    record: FailureRecord
    before: FailureRecord | None
    moved_from: FailureRecord | None


def letter_pending(
    index: int, entity: DeadLetterEntity, letter: DeadLetter, now: datetime
) -> Pending:
    """A dead letter of `entity` drained at `now`, as kept."""
    described = sent_fields(
        letter.application_properties,
        message_id=letter.message_id,
        session_id=letter.session_id,
        subject=letter.subject,
    )
    cause = cause_of(failure_text(letter.reason, letter.description))
    group = group_id(
        DEAD_LETTERS_SOURCE, entity.name, cause, described.aggregate_type, described.action
    )
    return _pending(
        index,
        entity.name,
        entity.kind,
        letter,
        described,
        cause,
        group,
        failure_id(entity.name, failure_key(letter, described.event_id)),
        now,
    )


def quarantine_pending(index: int, entry: QuarantinedEvent, now: datetime) -> Pending:
    """A quarantined event (the record as it is being written) set aside at `now`, as kept: in
    its cause's group as the quarantine's groups key it (`group_id("quarantine", None, ...)`),
    its attempt numbered by the record's replays (a second write of the same quarantine, the
    relay reading its lease again, is the same attempt; a replay that fails again one more).
    A record settled already (resolved: a replay sent; archived: a discard) is opened again by
    it as one more attempt, noted `quarantined again` by the relay with the reason, whatever
    its replays (a replay or a discard that stopped before its quarantine record was written
    leaves that record's number): written twice, the open record holds it, once."""
    letter = DeadLetter(
        sequence_number=entry.replays,
        body=json.dumps(dict(entry.event.document), default=str, ensure_ascii=False).encode(),
        message_id=entry.event_id,
        session_id=entry.aggregate_id,
        subject=entry.action,
        content_type="application/json",
        correlation_id=None,
        # what the event's message would have carried (`sent_fields` reads them back), and
        # where the quarantine record (and its event) is kept: the event's own partition
        application_properties={
            "aggregateType": entry.aggregate_type,
            **({f"{entry.aggregate_type}Id": entry.aggregate_id} if entry.aggregate_type else {}),
            "action": entry.action,
            "version": entry.version,
            "partitionKey": entry.partition_key,
        },
        reason=entry.reason,
        description=None,
        delivery_count=0,
        enqueued_at=None,
    )
    described = SentFields(
        event_id=entry.event_id,
        aggregate_type=entry.aggregate_type,
        aggregate_id=entry.aggregate_id,
        action=entry.action,
        version=entry.version,
        source=None,
        resubmissions=0,
        target=None,
    )
    cause = cause_of(entry.reason)
    group = group_id(QUARANTINE_SOURCE, None, cause, entry.aggregate_type, entry.action)
    record_id = failure_id(QUARANTINE_ENTITY, entry.event_id)
    pending = _pending(
        index, QUARANTINE_ENTITY, QUARANTINE_ENTITY, letter, described, cause, group, record_id, now
    )
    again = FailureNote(at=now, what=QUARANTINED_AGAIN, by=QUARANTINED_BY, note=entry.reason)
    return replace(pending, again=again)


def _pending(
    index: int,
    entity: str,
    kind: str,
    letter: DeadLetter,
    described: SentFields,
    cause: str,
    group: str,
    record_id: str,
    now: datetime,
) -> Pending:
    attempt = FailureAttempt(
        at=now,
        sequence_number=letter.sequence_number,
        reason=letter.reason,
        description=letter.description,
        delivery_count=letter.delivery_count,
        enqueued_at=(
            datetime.fromtimestamp(letter.enqueued_at, UTC)
            if letter.enqueued_at is not None
            else None
        ),
    )
    return Pending(
        index=index,
        entity=entity,
        entity_kind=kind,
        letter=letter,
        described=described,
        cause=cause,
        group=group,
        record_id=record_id,
        attempt=attempt,
    )
