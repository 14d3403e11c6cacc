"""The quarantine's use cases: its records, replay through the relay, discard (its notice sent
in its session to every subscription, then the record kept as discarded; docs/operating.md, "An
event is quarantined"), and the adoption of the records set aside before each quarantine was
kept as a failure record too (docs/upgrading.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from cosmos_outbox._domain import DomainError
from cosmos_outbox._mapper import DISCARD_NOTICE_SUBJECT
from cosmos_outbox._mapper.failure import FailureRecord
from cosmos_outbox._model import Model, of_attributes
from cosmos_outbox._quarantine import QuarantinedEvent, quarantined_of_failure
from cosmos_outbox._records import OutboxMessage
from cosmos_outbox.errors import PublishFailedError
from cosmos_outbox.operations._actor import current_actor
from cosmos_outbox.operations._audit import audit, what_event
from cosmos_outbox.operations._failures import Failures
from cosmos_outbox.operations._giving_up import Notice, notice_of_event, will_see_notice
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.ports import Page
from cosmos_outbox.telemetry import error_type


class Discarded(Model):
    """A quarantined event given up: what was given up, by whom and why, the notice sent (null
    when its aggregate or version could not be read), and what subscribers will see."""

    event_id: str
    aggregate_type: str | None
    aggregate_id: str
    action: str | None
    version: int | None
    status: str
    reason: str
    discarded_by: str | None
    discarded_at: datetime | None
    notice: Notice | None
    subscribers_will_see: str

    @classmethod
    def of(
        cls, entry: QuarantinedEvent, notice: OutboxMessage | None, subscribers_will_see: str
    ) -> Discarded:
        return of_attributes(
            cls,
            entry,
            reason=entry.discard_reason or "",
            notice=Notice.of(notice) if notice is not None else None,
            subscribers_will_see=subscribers_will_see,
        )


class Adopted(Model):
    """The quarantine's records adopted as failure records: how many unresolved records were
    read (`of`: how many the quarantine counted unresolved when the adoption began), how many
    of them had none yet (`new`; the rest were kept already, and are unchanged), how many
    were brought to their failure record's state (`healed`: resolved or discarded, their
    replay or discard stopped between its two writes) and how many new failure records were
    settled at once (`settled`: their quarantine record resolved or discarded meanwhile)."""

    read: int
    new: int
    of: int = 0
    healed: int = 0
    settled: int = 0


#: The quarantine records read (and adopted) at a time.
ADOPT_PAGE = 100


class QuarantineOperators:
    """The quarantine's use cases: its records a page at a time, one record, replay (through
    the relay) and discard (the event's version given up, with its notice)."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts

    async def page(self, *, page_size: int, continuation: str | None) -> Page[QuarantinedEvent]:
        return await self._parts.quarantine.list_page(
            page_size=page_size, continuation=continuation
        )

    async def get(self, event_id: str) -> QuarantinedEvent:
        """One quarantine record (NotFoundError: none for that event)."""
        return await self._parts.quarantine.get(event_id)

    async def count(self) -> int:
        """How many records are neither resolved nor discarded (one COUNT, `Quarantine.count`)."""
        return await self._parts.quarantine.count()

    async def adopt(
        self,
        *,
        page_size: int = ADOPT_PAGE,
        progress: Callable[[Adopted], object] | None = None,
    ) -> Adopted:
        """Keep each unresolved quarantine record that has no failure record yet as one (set
        aside before they were kept: `Failures.quarantine_adopted`), a page of `page_size`
        records at a time, so that the failure groups count the quarantine exactly from their
        summaries; a record that has its failure record is unchanged (adopting twice: nothing
        new), unless that failure record is settled already (resolved or archived: a replay or
        a discard stopped between its two writes), when the record is brought to its state
        (`Quarantine.settled_as`). Each record kept now is read again after: one resolved or
        discarded meanwhile (a replay or a discard that found no failure record to settle) has
        its new failure record settled as it is. `progress` is given the counts after each
        page. Refused (DomainError) when failure records are not kept (OUTBOX_FAILURE_INGEST
        `false`)."""
        failures = self._parts.failures
        if failures is None:
            raise DomainError(
                "the quarantine's records are adopted as failure records, which are kept only "
                "with OUTBOX_FAILURE_INGEST `true` or `elsewhere` (it is `false`): nothing done"
            )
        quarantine = self._parts.quarantine
        adopted = Adopted(read=0, new=0, of=await quarantine.count())
        token: str | None = None
        ttl = self._parts.event_ttl_seconds
        while True:
            page = await quarantine.list_page(page_size=page_size, continuation=token)
            unresolved = [e for e in page.items if not e.resolved and not e.discarded]
            fresh, settled = (
                await failures.quarantine_adopted(*unresolved) if unresolved else ([], [])
            )
            healed = [e for e, r in settled if await quarantine.settled_as(e, r, ttl_seconds=ttl)]
            caught = 0
            for entry in fresh:
                if await _caught_up(failures, await quarantine.read_again(entry)):
                    caught += 1
            adopted = adopted.model_copy(
                update={
                    "read": adopted.read + len(unresolved),
                    "new": adopted.new + len(fresh),
                    "healed": adopted.healed + len(healed),
                    "settled": adopted.settled + caught,
                }
            )
            if progress is not None:
                progress(adopted)
            if (token := page.continuation_token) is None:
                break
        read, new = adopted.read, adopted.new
        audit(
            "quarantine.adopt",
            f"{read} unresolved quarantine record(s) read, {new} kept as failure record(s) "
            f"(the other {read - new} were kept already), {adopted.healed} brought to their "
            f"failure record's state, {adopted.settled} resolved or discarded meanwhile",
            will_see="nothing new",
            read=read,
            new=new,
            healed=adopted.healed,
            settled=adopted.settled,
        )
        return adopted

    def of_record(self, record: FailureRecord) -> QuarantinedEvent:
        """The quarantine record a quarantine's failure record stands for (its event parsed as
        the relay parses it)."""
        return quarantined_of_failure(record, legacy=self._parts.legacy)

    async def replay(self, event_id: str) -> QuarantinedEvent:
        """Send the stored event through the relay again, with its own id. Sent: the record is
        resolved. Set aside again (or the send failed): it stays, with the new reason, and
        replays + 1. A resolved record is not sent again (replaying twice is harmless); a
        discarded one is refused (its version was given up: subscribers moved past it)."""
        entry = await self._parts.quarantine.get(event_id)
        if entry.discarded:
            raise DomainError(
                f"event {event_id} was discarded by {entry.discarded_by} "
                f"({entry.discard_reason}): its version was given up and subscribers moved "
                "past it; it is not sent again"
            )
        if entry.resolved:
            _audit("quarantine.replay", entry, "already resolved; nothing sent")
            return entry
        try:
            report = await self._parts.relay().relay([entry.event])
            reason = report.reasons.get(entry.event_id, "")
        except Exception as exc:  # the broker failed: recorded, and the record stays
            reason = f"replay failed to send: {error_type(exc)}"
        result = await self._parts.quarantine.replayed(
            entry,
            resolved=not reason,
            reason=reason,
            ttl_seconds=self._parts.event_ttl_seconds,
            by=str(current_actor()),
        )
        _audit(
            "quarantine.replay",
            result,
            "resolved" if result.resolved else f"still quarantined: {result.reason}",
            will_see=(
                f"event {result.event_id} (version {result.version}) in its session, under its "
                "own MessageId: a subscriber that received its quarantine notice applies it "
                "and the versions it held after it"
                if result.resolved
                else "nothing new"
            ),
        )
        return result

    async def discard(self, event_id: str, reason: str) -> Discarded:
        """Give the event up: its discard notice sent in its session (every subscription),
        then the record marked discarded (kept until it expires). Discarding it again answers
        what the first discard did, sending nothing. Who discarded it (the notice's
        `discardedBy`, the record's) is the current actor."""
        entry = await self._parts.quarantine.get(event_id)
        if entry.discarded:
            return Discarded.of(
                entry,
                None,
                f"nothing new: it was discarded at {entry.discarded_at} by "
                f"{entry.discarded_by}, and its notice sent then",
            )
        by = str(current_actor())
        notice = notice_of(entry, reason=reason, by=by)
        if notice is not None:
            try:
                await self._parts.relay().send([notice])
            except Exception as exc:  # nothing changed: the record stays quarantined
                raise PublishFailedError(
                    f"the discard notice failed to send: {error_type(exc)}"
                ) from exc
        why = "the event's aggregate or version cannot be read from its document"
        will_see = will_see_notice(notice, why_none=why)
        discarded = await self._parts.quarantine.discard(
            entry, by=by, reason=reason, ttl_seconds=self._parts.event_ttl_seconds
        )
        _audit("quarantine.discard", discarded, reason, will_see=will_see)
        return Discarded.of(discarded, notice, will_see)


async def _caught_up(failures: Failures, now: QuarantinedEvent | None) -> bool:
    """A quarantine record adopted just now, read again after: resolved or discarded meanwhile
    (its replay or discard found no failure record to settle), its new failure record settled
    as the replay or the discard would have (whether it was)."""
    if now is None or not (now.resolved or now.discarded):
        return False
    if now.discarded:
        by = now.discarded_by or "an operator"
        settled = await failures.quarantine_settled(
            now.event_id, "archived", what="discarded", by=by, note=now.discard_reason
        )
    else:
        settled = await failures.quarantine_settled(
            now.event_id,
            "resolved",
            what="replayed",
            by=str(current_actor()),
            note="resolved while the quarantine was adopted",
        )
    return settled is not None


def notice_of(entry: QuarantinedEvent, *, reason: str, by: str) -> OutboxMessage | None:
    """The discard notice a discard of `entry` sends (None: its aggregate or version cannot be
    read from its document: none is sent)."""
    return notice_of_event(entry.event, reason=reason, by=by)


def quarantine_will_see(action: str, *, done: int, notices: int) -> str:
    """What subscribers will see of `done` quarantined events replayed (`retry`) or discarded
    (`notices` of them with a discard notice, `notice_of`): the one sentence a group's preview,
    its operation and their audit lines say (a discard of events whose aggregate or version
    cannot be read sends nothing, and says so)."""
    if action == "retry":
        return (
            f"{done} quarantined event(s) sent again through the relay, each in its session "
            "under its own MessageId: a subscriber that received its quarantine notice applies "
            "it and what it held after it"
        )
    if not done:
        return "nothing: no quarantined event was given up"
    parts = []
    if notices:
        parts.append(
            f"{notices} quarantined event(s) given up, each with a discard notice "
            f"({DISCARD_NOTICE_SUBJECT}) in its session to every subscription, whose "
            "subscriber records an accepted gap and applies what it held after it"
        )
    if silent := done - notices:
        parts.append(
            f"{silent} quarantined event(s) given up with no notice sent: their aggregate or "
            "version cannot be read from the stored document, so there is no session (or no "
            "place in it) to tell; a subscriber holding later versions of them keeps holding "
            "them until an operator releases them there (cosmos-outbox subscribers release)"
        )
    return "; ".join(parts)


def _audit(
    action: str, entry: QuarantinedEvent, reason: str, *, will_see: str = "nothing new"
) -> None:
    audit(
        action,
        f"event {entry.event_id} "
        f"({what_event(entry.aggregate_type, entry.aggregate_id, entry.version)}): {reason}",
        will_see=will_see,
        reason=reason,
        **{f: getattr(entry, f) for f in _AUDITED},
    )


#: The quarantine record's fields its audit lines carry.
_AUDITED = ("event_id", "aggregate_type", "aggregate_id", "action", "version", "replays")
