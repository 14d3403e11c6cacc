"""Failed messages as data: each watched dead-letter queue drained into the outbox's container,
one `failedMessage` record per failure (the mapper's form: `cosmos_outbox._mapper.failure`) and
one summary per group in the group's partition, written in one transactional batch (the
group's counts exact at any size). Whatever runs the relay drains them: the Functions app's
Service Bus trigger on each dead-letter path (`ingest_failures_*`, `_blueprints`), the same
receiver in `cosmos-outbox relay` (`_relay_process.failure_receiver`).

`Failures.ingest` is written **before** the dead letter is completed, and keyed so that a second
write of the same delivery changes nothing: a crash between the write and the complete gives the
dead letter again, and its second write finds its sequence number among the record's attempts.
A retried message that fails again is the same record (its event id at the same entity), one
more attempt; with another cause it moves to that cause's group (the new group's batch first,
then the old one's: a crash between the two is finished by the delivery given again).

A record is open (counted in its group's `open`), archived (hidden; who and why) or resolved
(retried and accepted); archived and resolved ones expire after `retention_seconds`
(OUTBOX_FAILURE_RETENTION_SECONDS), open ones never."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cosmos_outbox._causes import cause_of, failure_text, group_id
from cosmos_outbox._mapper import sent_fields
from cosmos_outbox._mapper.failure import (
    FAILED_MESSAGE_TYPE,
    FAILURE_GROUP_TYPE,
    GROUP_SUMMARY_ID,
    FailureAttempt,
    FailureGroupRecord,
    FailureNote,
    FailureRecord,
    FailureState,
    failure_document,
    failure_id,
    failure_partition,
    failure_record,
    group_document,
    group_record,
)
from cosmos_outbox.errors import AlreadyExistsError, NotFoundError, PreconditionFailedError
from cosmos_outbox.ports import AsyncDocumentStore, BatchOperation, DeadLetter, DeadLetterEntity
from cosmos_outbox.settings._base import DEFAULT_FAILURE_RETENTION_SECONDS

if TYPE_CHECKING:
    from cosmos_outbox._mapper import SentFields

__all__ = [
    "DEFAULT_FAILURE_RETENTION_SECONDS",
    "Failures",
    "failure_key",
    "letter_of",
    "record_key",
]

#: Writes tried before a conflict (another writer of the same group) is given up.
_TRIES = 50
#: The longest pause after a conflict, in seconds (a random one: writers spread out).
_CONFLICT_PAUSE = 0.05
#: The source a dead letter's group is keyed by (`operations._groups`' ids, unchanged).
DEAD_LETTERS_SOURCE = "dead letters"
_BY_ID = "SELECT * FROM c WHERE c.type = @type AND c.id = @id"
_OF_TYPE = "SELECT * FROM c WHERE c.type = @type"


def failure_key(letter: DeadLetter, event_id: str | None) -> str:
    """What names a failure at its entity: its event id, else its MessageId, else its sequence
    number in the dead-letter queue."""
    return event_id or letter.message_id or f"sequence-{letter.sequence_number}"


class Failures:
    """The failed messages kept in `store` (see the module). `clock`: epoch seconds."""

    def __init__(
        self,
        store: AsyncDocumentStore,
        *,
        retention_seconds: int = DEFAULT_FAILURE_RETENTION_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.retention_seconds = retention_seconds
        self._clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    # -- the ingest ------------------------------------------------------------------------

    async def ingest(self, entity: DeadLetterEntity, letter: DeadLetter) -> FailureRecord:
        """Keep the dead letter `letter` of `entity` (see the module): its record, as stored."""
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
        now = self._now()
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
        record_id = failure_id(entity.name, failure_key(letter, described.event_id))
        summary = FailureGroupRecord(
            group=group,
            entity=entity.name,
            entity_kind=entity.kind,
            cause=cause,
            aggregate_type=described.aggregate_type,
            action=described.action,
        )
        for _ in range(_TRIES):
            copies = await self._copies(record_id)
            kept = next((c for c in copies if c.delivered(letter.sequence_number)), None)
            if kept is not None:  # this delivery is written already: finish a move, if any
                for stale in copies:
                    if stale.group != kept.group:
                        await self._drop(stale)
                return kept
            current = max(copies, key=lambda c: c.last_failed_at) if copies else None
            try:
                if current is None:
                    record = _first_failure(
                        record_id, group, entity, letter, described, cause, attempt
                    )
                    return await self._write(record, None, summary, now)
                record = current.with_attempt(attempt, group=group, cause=cause)
                if current.group == group:
                    return await self._write(record, current, summary, now)
                moved = await self._write(replace(record, etag=None), None, summary, now)
                await self._drop(current)
                return moved
            except (PreconditionFailedError, AlreadyExistsError):
                # another writer of this group meanwhile: read again, after a moment
                await asyncio.sleep(random.uniform(0, _CONFLICT_PAUSE))
        raise PreconditionFailedError(
            f"failure {record_id}: the group changed under every one of {_TRIES} writes"
        )

    async def _copies(self, record_id: str) -> list[FailureRecord]:
        found = await self._store.query(_BY_ID, {"@type": FAILED_MESSAGE_TYPE, "@id": record_id})
        return [failure_record(d) for d in found]

    async def _summary(self, template: FailureGroupRecord) -> FailureGroupRecord | None:
        found = await self._store.read(template.partition, GROUP_SUMMARY_ID)
        return group_record(found) if found is not None else None

    async def _write(
        self,
        record: FailureRecord,
        before: FailureRecord | None,
        template: FailureGroupRecord,
        now: datetime,
    ) -> FailureRecord:
        """`record` written over `before` (None: created), its group's summary with it."""
        stored = await self._summary(template)
        summary = stored if stored is not None else template
        if before is not None:
            summary = summary.counted(before.state, -1)
        summary = summary.counted(record.state, +1).seen(now)
        operations = [
            BatchOperation("create", failure_document(record))
            if before is None
            else BatchOperation("replace", failure_document(record), if_match=before.etag),
            _summary_write(summary, stored),
        ]
        etags = await self._store.execute_batch(record.partition, operations)
        return replace(record, etag=etags[0])

    async def _drop(self, record: FailureRecord) -> None:
        """`record` removed from its group (moved to another), its summary with it."""
        stored = await self._summary(_group_of(record))
        operations = [BatchOperation("delete", id=record.id, if_match=record.etag)]
        if stored is not None:
            operations.append(_summary_write(stored.counted(record.state, -1), stored))
        # gone, or changed: the next delivery of it reads again
        with contextlib.suppress(NotFoundError, PreconditionFailedError):
            await self._store.execute_batch(record.partition, operations)

    # -- reads -----------------------------------------------------------------------------

    async def groups(self) -> list[FailureGroupRecord]:
        """Every group's summary (one document per group)."""
        return [group_record(d) for d in await self._store.of_type(FAILURE_GROUP_TYPE)]

    async def group(self, group: str) -> FailureGroupRecord:
        found = await self._store.read(failure_partition(group), GROUP_SUMMARY_ID)
        if found is None:
            raise NotFoundError("failure group", group)
        return group_record(found)

    async def members(
        self, group: str, *, states: Sequence[FailureState] = ("open",)
    ) -> list[FailureRecord]:
        """The group's records in `states`, oldest failure first."""
        documents = await self._store.of_type(
            FAILED_MESSAGE_TYPE, partition_key=failure_partition(group)
        )
        records = [failure_record(d) for d in documents]
        return sorted(
            (r for r in records if r.state in states), key=lambda r: (r.first_failed_at, r.id)
        )

    async def sample(self, group: str, size: int) -> list[FailureRecord]:
        """Up to `size` of the group's open records, a page at a time (a preview's sample:
        its count is the summary's)."""
        found: list[FailureRecord] = []
        token: str | None = None
        while len(found) < size:
            page = await self._store.query_page(
                _OF_TYPE,
                {"@type": FAILED_MESSAGE_TYPE},
                partition_key=failure_partition(group),
                page_size=max(size, 10),
                continuation=token,
            )
            found += [r for r in map(failure_record, page.items) if r.state == "open"]
            if (token := page.continuation_token) is None:
                break
        return found[:size]

    async def read(self, group: str, record_id: str) -> FailureRecord | None:
        """The record of that id in `group` (None: not there: moved, or expired)."""
        found = await self._store.read(failure_partition(group), record_id)
        return failure_record(found) if found is not None else None

    async def record(self, record_id: str) -> FailureRecord:
        copies = await self._copies(record_id)
        if not copies:
            raise NotFoundError("failed message", record_id)
        return max(copies, key=lambda c: c.last_failed_at)

    # -- changes of state ------------------------------------------------------------------

    async def settle(
        self,
        records: Sequence[FailureRecord],
        state: FailureState,
        *,
        what: str,
        by: str,
        operation: str | None = None,
        note: str | None = None,
    ) -> list[FailureRecord]:
        """`records` (of one group) put in `state` with a note of what was done, when, by whom,
        in which operation; their group's counts in the same batch (chunks of 99: a batch holds
        100 operations). An archived or resolved record expires after the retention, an open
        one never. Those changed meanwhile are read again and tried once more."""
        done: list[FailureRecord] = []
        pending = list(records)
        for _ in range(_TRIES):
            if not pending:
                break
            retry: list[FailureRecord] = []
            for start in range(0, len(pending), 99):
                chunk = pending[start : start + 99]
                try:
                    done += await self._settle_chunk(chunk, state, what, by, operation, note)
                except PreconditionFailedError:
                    retry += [await self.record(r.id) for r in chunk]
            pending = retry
        if pending:
            raise PreconditionFailedError(f"{len(pending)} failure(s) changed under every write")
        return done

    async def _settle_chunk(
        self,
        chunk: list[FailureRecord],
        state: FailureState,
        what: str,
        by: str,
        operation: str | None,
        note: str | None,
    ) -> list[FailureRecord]:
        if not chunk:
            return []
        [group] = {r.group for r in chunk}
        stored = await self._summary(_group_of(chunk[0]))
        summary = stored if stored is not None else _group_of(chunk[0])
        now = self._now()
        changed: list[FailureRecord] = []
        for record in chunk:
            summary = summary.counted(record.state, -1).counted(state, +1)
            changed.append(
                replace(
                    record,
                    state=state,
                    ttl=None if state == "open" else self.retention_seconds,
                    history=(
                        *record.history,
                        FailureNote(at=now, what=what, by=by, operation=operation, note=note),
                    ),
                )
            )
        operations = [
            BatchOperation("replace", failure_document(r), if_match=r.etag) for r in changed
        ]
        operations.append(_summary_write(summary, stored))
        etags = await self._store.execute_batch(failure_partition(group), operations)
        return [replace(r, etag=e) for r, e in zip(changed, etags, strict=False)]


def letter_of(record: FailureRecord) -> DeadLetter:
    """A kept failure as the dead letter it was last (its last attempt's sequence number, reason
    and delivery count; enqueued: its first failure): what the dead letters' use cases read."""
    last = record.attempts[-1] if record.attempts else None
    return DeadLetter(
        sequence_number=last.sequence_number if last is not None else 0,
        body=record.body,
        message_id=record.message_id,
        session_id=record.session_id,
        subject=record.subject,
        content_type=record.content_type,
        correlation_id=record.correlation_id,
        application_properties=dict(record.properties),
        reason=record.reason,
        description=record.description,
        delivery_count=last.delivery_count if last is not None else 0,
        enqueued_at=record.first_failed_at.timestamp(),
    )


def record_key(record: FailureRecord) -> str:
    """A record's key as an operation's item: its first failure, then its id (in the order of
    its failures; one that came after an operation began sorts after its limit)."""
    return f"{record.first_failed_at.astimezone(UTC).isoformat()}|{record.id}"


def _first_failure(
    record_id: str,
    group: str,
    entity: DeadLetterEntity,
    letter: DeadLetter,
    described: SentFields,
    cause: str,
    attempt: FailureAttempt,
) -> FailureRecord:
    """The record of a failure seen for the first time: open, its one attempt."""
    return FailureRecord(
        id=record_id,
        group=group,
        entity=entity.name,
        entity_kind=entity.kind,
        event_id=described.event_id,
        message_id=letter.message_id,
        session_id=letter.session_id,
        subject=letter.subject,
        content_type=letter.content_type,
        correlation_id=letter.correlation_id,
        body=letter.body,
        properties=dict(letter.application_properties),
        aggregate_type=described.aggregate_type,
        aggregate_id=described.aggregate_id,
        action=described.action,
        version=described.version,
        reason=letter.reason,
        description=letter.description,
        cause=cause,
        state="open",
        first_failed_at=attempt.at,
        last_failed_at=attempt.at,
        attempt_count=1,
        attempts=(attempt,),
    )


def _group_of(record: FailureRecord) -> FailureGroupRecord:
    return FailureGroupRecord(
        group=record.group,
        entity=record.entity,
        entity_kind=record.entity_kind,
        cause=record.cause,
        aggregate_type=record.aggregate_type,
        action=record.action,
    )


def _summary_write(summary: FailureGroupRecord, stored: FailureGroupRecord | None) -> Any:
    document = group_document(summary)
    if stored is None:
        return BatchOperation("create", document)
    return BatchOperation("replace", document, if_match=stored.etag)
