"""Failures of either kind by their records (OUTBOX_FAILURE_INGEST): a dead letter drained and an
event the relay quarantined are one kind of record (`failedMessage`: `cosmos_outbox._mapper.
failure`), so one set of use cases lists them (`page`: by kind, state and group, exact from the
store) and acts on one by its id, dispatching on its kind to the use case of its own: a retry
is a dead letter's resubmit (`DeadLetterOperators.act_on`) or a quarantined event's replay
(`QuarantineOperators.replay`), an archive a dead letter's discard (its notice sent, its record
archived with who and why) or a quarantined event's discard (its notice sent, its record
archived), an unarchive a dead letter's record brought back among the open ones, refused for a
quarantined event as a quarantine group's unarchive is (its version was given up). An action on
a failure an open bulk operation acts on (its group's, its entity's dead letters') is refused
(409, naming it)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from cosmos_outbox._domain import DomainError
from cosmos_outbox._mapper.failure import FailureRecord, FailureState
from cosmos_outbox._model import Model, of_attributes
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.operations._actor import current_actor
from cosmos_outbox.operations._audit import audit, what_event
from cosmos_outbox.operations._dead_letters import DeadLetterOperators, bounded_budget
from cosmos_outbox.operations._deliveries import Received
from cosmos_outbox.operations._dependencies import COSMOS_DB, answered
from cosmos_outbox.operations._failure_reads import FailureKind, kind_of
from cosmos_outbox.operations._failure_view import FailureView
from cosmos_outbox.operations._failures import letter_of
from cosmos_outbox.operations._groups import not_unarchived
from cosmos_outbox.operations._letters import ActionReport, describe
from cosmos_outbox.operations._quarantined import QuarantineOperators, quarantine_will_see
from cosmos_outbox.ports import Page

if TYPE_CHECKING:
    from cosmos_outbox.operations._bulk._operators import BulkOperators
    from cosmos_outbox.operations._failures import Failures

__all__ = ["FailureActed", "FailureKind", "FailureOperators", "FailureSummary"]

FailureAction = Literal["retry", "archive", "unarchive"]


class FailureSummary(Model):
    """A failure record of either kind, summarised: its id (`failures/{failureId}` reads it
    whole), `kind` (deadLetter: drained from `entity`'s dead-letter queue; quarantine: an event
    the relay set aside), its group, its state (open, archived, resolved), its event, why it
    failed last, when it failed first and last, and how often."""

    id: str
    kind: FailureKind
    group: str
    entity: str
    state: FailureState
    event_id: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    action: str | None
    version: int | None
    reason: str | None
    cause: str
    first_failed_at: datetime
    last_failed_at: datetime
    attempt_count: int

    @classmethod
    def of(cls, record: FailureRecord) -> FailureSummary:
        return of_attributes(cls, record, kind=kind_of(record))


class FailureActed(Model):
    """One failure acted on by its id: the action, its kind, whether it went through (`done`;
    a replay quarantined again, a dead letter's message not accepted: not), what came of it in
    words (`outcome`), what subscribers will see, what each subscription receives of a dead
    letter's message as its rules decide, and its record as it is now (`failure`)."""

    id: str
    kind: FailureKind
    action: FailureAction
    done: bool
    outcome: str
    subscribers_will_see: str
    deliveries: list[Received] = []
    failure: FailureView


class FailureOperators:
    """The failure records' use cases of either kind (see the module), over the dead letters'
    and the quarantine's, and the bulk operations' holds."""

    def __init__(
        self,
        failures: Failures | None,
        letters: DeadLetterOperators,
        quarantine: QuarantineOperators,
        bulk: BulkOperators,
    ) -> None:
        self._failures, self._letters, self._quarantine, self._bulk = (
            failures,
            letters,
            quarantine,
            bulk,
        )

    def _kept(self) -> Failures:
        if self._failures is None:
            raise NotFoundError(
                "failed messages", "(failures are kept as data only with OUTBOX_FAILURE_INGEST on)"
            )
        return self._failures

    async def page(
        self,
        *,
        kind: FailureKind | None = None,
        state: FailureState | None = None,
        group: str | None = None,
        page_size: int,
        continuation: str | None = None,
    ) -> Page[FailureSummary]:
        """A page of the failure records of `kind`, in `state`, of `group` (None: any), exact
        from the store (`Failures.listed`), and the store's token of the next page."""
        found = await answered(
            COSMOS_DB,
            self._kept().listed(
                kind=kind,
                state=state,
                group=group,
                page_size=page_size,
                continuation=continuation,
            ),
        )
        return Page([FailureSummary.of(r) for r in found.items], found.continuation_token)

    async def _record(self, failure_id: str) -> FailureRecord:
        """The record of that id (NotFoundError: none, or failures not kept as data), once no
        open bulk operation acts on it (OperationHeldError, 409, naming the one that does)."""
        record = await answered(COSMOS_DB, self._kept().record(failure_id))
        dead_letter = kind_of(record) == "deadLetter"
        await answered(
            COSMOS_DB, self._bulk.holding(record.group, record.entity if dead_letter else None)
        )
        return record

    async def retry(self, failure_id: str) -> FailureActed:
        """Send the failure again: a dead letter resubmitted to its subscription (its record
        resolved once the send was accepted), a quarantined event replayed through the relay
        (resolved when sent, else still quarantined with the new reason). DomainError (409): a
        dead letter's record that is not open, a quarantined event that was discarded."""
        record = await self._record(failure_id)
        if kind_of(record) == "quarantine":
            replayed = await self._quarantine.replay(_event_of(record))
            if record.state == "resolved":  # the replay sent nothing (replaying twice: harmless)
                return await self._acted(
                    record, "retry", done=True, outcome="resolved already", will_see="nothing new"
                )
            sent = replayed.resolved
            return await self._acted(
                record,
                "retry",
                done=sent,
                outcome="resolved" if sent else f"still quarantined: {replayed.reason}",
                will_see=quarantine_will_see("retry", done=1, notices=0) if sent else "nothing new",
            )
        report = await self._act_on_letter(record, "resubmit", reason=None)
        return await self._reported(record, "retry", report, "resolved")

    async def archive(self, failure_id: str, reason: str) -> FailureActed:
        """Give the failure up, with `reason`: a dead letter discarded at its subscription (its
        discard notice sent in its session, its record archived with who and why), a
        quarantined event discarded (its notice sent to every subscription, its record
        archived). DomainError (409): a dead letter's record that is not open."""
        record = await self._record(failure_id)
        if kind_of(record) == "quarantine":
            discarded = await self._quarantine.discard(_event_of(record), reason)
            return await self._acted(
                record,
                "archive",
                done=True,
                outcome=f"archived: discarded by {discarded.discarded_by}",
                will_see=discarded.subscribers_will_see,
            )
        report = await self._act_on_letter(record, "discard", reason=reason)
        return await self._reported(record, "archive", report, "archived")

    async def unarchive(self, failure_id: str) -> FailureActed:
        """Bring an archived dead letter's record back among the open ones (noted unarchived,
        by whom; its retention removed), as a group's unarchive brings its records back.
        DomainError (409): a quarantined event's (given up: as a quarantine group's), a record
        that is not archived."""
        record = await self._record(failure_id)
        if kind_of(record) == "quarantine":
            raise not_unarchived(f"failure {record.id} is the quarantine's")
        _open_as(record, "archived", "unarchive")
        await answered(
            COSMOS_DB,
            self._kept().settle([record], "open", what="unarchived", by=str(current_actor())),
        )
        acted = await self._acted(
            record, "unarchive", done=True, outcome="open", will_see="nothing new"
        )
        audit(
            "failures.unarchive",
            f"failure {record.id} at {record.entity} "
            f"({what_event(record.aggregate_type, record.aggregate_id, record.version)}) "
            "brought back among the open ones",
            will_see=acted.subscribers_will_see,
            failure_id=record.id,
            entity=record.entity,
            event_id=record.event_id,
        )
        return acted

    async def _act_on_letter(
        self, record: FailureRecord, action: Literal["resubmit", "discard"], *, reason: str | None
    ) -> ActionReport:
        """The dead letters' resubmit or discard of the record's dead letter (`act_on`: sent,
        its record settled, audited), at its watched entity (NotFoundError: not watched now)."""
        _open_as(record, "open", "retry" if action == "resubmit" else "archive")
        entity = self._letters.entity(record.entity)
        letter = describe(letter_of(record))
        return await self._letters.act_on(
            action, entity, [letter], reason=reason, budget=bounded_budget()
        )

    async def _reported(
        self, record: FailureRecord, action: FailureAction, report: ActionReport, done: str
    ) -> FailureActed:
        failed = next((h.failure for h in report.handled if h.failure), None)
        return await self._acted(
            record,
            action,
            done=report.done > 0,
            outcome=done if report.done else f"not done: {failed}",
            will_see=report.subscribers_will_see,
            deliveries=report.deliveries,
        )

    async def _acted(
        self,
        record: FailureRecord,
        action: FailureAction,
        *,
        done: bool,
        outcome: str,
        will_see: str,
        deliveries: list[Received] | None = None,
    ) -> FailureActed:
        """The answer: the record read again, as it is now."""
        now = await answered(COSMOS_DB, self._kept().record(record.id))
        return FailureActed(
            id=record.id,
            kind=kind_of(record),
            action=action,
            done=done,
            outcome=outcome,
            subscribers_will_see=will_see,
            deliveries=deliveries or [],
            failure=FailureView.of(now),
        )


def _event_of(record: FailureRecord) -> str:
    """The event id of a quarantine's record (its quarantine record's key)."""
    if not record.event_id:
        raise NotFoundError("quarantined event", f"(none named by failure {record.id})")
    return record.event_id


def _open_as(record: FailureRecord, state: FailureState, action: FailureAction) -> None:
    """DomainError (409) unless the dead letter's record is in `state`: what `action` needs."""
    if record.state == state:
        return
    last = record.history[-1] if record.history else None
    said = f" ({last.what} by {last.by} at {last.at.isoformat()})" if last is not None else ""
    raise DomainError(
        f"failure {record.id} is {record.state}{said}, not {state}: nothing to {action}"
    )
