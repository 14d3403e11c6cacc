"""Dead letters at the subscribers, recoverable: the dead-letter queues of the topic's
subscriptions (and of queues an app names: `cosmos_outbox.ports.DeadLetterEntity`) counted,
listed with a filter, peeked, resubmitted and discarded, previewed first. How a resubmission
goes out and why (a MessageId of its own, to that subscription only, removed only once its send
was accepted): docs/operating-the-outbox.md, "Resubmissions and re-drives through duplicate
detection". A discard gives the version up at that subscription (`_giving_up`), then removes the
dead letter (one that is not an outbox event, with no notice). Each call handles at most
MAX_PER_CALL dead letters, within about half the operators' bound: the answer says how many
remain."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, cast

from cosmos_outbox._mapper import (
    DISCARD_NOTICE_SUBJECT,
    RESUBMISSION_PROPERTY,
    TARGET_PROPERTY,
    outgoing,
    sent_facts,
)
from cosmos_outbox.errors import DependencyUnavailableError, NotFoundError
from cosmos_outbox.operations._actor import current_actor
from cosmos_outbox.operations._audit import audit, logger
from cosmos_outbox.operations._deliveries import Received, received
from cosmos_outbox.operations._dependencies import COSMOS_DB, SERVICE_BUS, answered
from cosmos_outbox.operations._failure_view import FailureView
from cosmos_outbox.operations._failures import letter_of
from cosmos_outbox.operations._giving_up import notice_of_event
from cosmos_outbox.operations._letters import (
    PREVIEW_ITEMS,
    ActionReport,
    DeadLetterCounts,
    DeadLetterMessage,
    Described,
    EntityCount,
    Handled,
    HandledLetter,
    LetterFilter,
    LetterPreview,
    LetterSummary,
    Selection,
    describe,
)
from cosmos_outbox.ports import (
    AsyncDeadLetterQueues,
    DeadLetterEntity,
    Outgoing,
    TargetRuleCheck,
)
from cosmos_outbox.telemetry import error_type

if TYPE_CHECKING:
    from cosmos_outbox._mapper.failure import FailureRecord
    from cosmos_outbox.operations._failures import Failures
    from cosmos_outbox.operations._watch import DeadLetterWatch, VanishedLetter, WatchRecord

__all__ = [
    "COUNT_LIMIT",
    "MAX_PER_CALL",
    "DeadLetterOperators",
    "describe",
    "resubmission",
    "resubmission_id",
]

#: Namespace of the resubmissions' MessageIds.
RESUBMISSION_NAMESPACE = uuid.UUID("9d2c6e0b-7a14-5b3f-a8c9-4e1f0d7b6a25")
#: Dead letters handled per call (the answer says how many remain).
MAX_PER_CALL = 100
#: Dead letters counted per queue: beyond, the count is "at least".
COUNT_LIMIT = 1000
#: Dead letters peeked per round trip.
PEEK_BATCH = 100
#: The kind named in a 404.
DEAD_LETTER = "dead letter"
WATCHED = "watched subscription or queue"


def resubmission_id(event_id: str, target: str, number: int) -> str:
    """The MessageId of resubmission `number` of `event_id`'s dead letter at `target`."""
    return str(uuid.uuid5(RESUBMISSION_NAMESPACE, f"{event_id}@{target}#{number}"))


def resubmission(described: Described, entity: DeadLetterEntity) -> Outgoing:
    """The dead letter as it was sent, with a MessageId of its own, its resubmission's number
    and, for a subscription's, the subscription as its target (see the module)."""
    letter = described.letter
    number = described.resubmissions + 1
    properties = dict(letter.application_properties)
    properties[RESUBMISSION_PROPERTY] = number
    if entity.kind == "subscription":
        properties[TARGET_PROPERTY] = entity.name
    key = described.event_id or f"sequence-{letter.sequence_number}"
    return Outgoing(
        body=letter.body,
        message_id=resubmission_id(key, entity.name, number),
        session_id=letter.session_id,
        subject=letter.subject,
        content_type=letter.content_type,
        correlation_id=letter.correlation_id,
        application_properties=properties,
    )


def discard_of(
    described: Described, entity: DeadLetterEntity, *, reason: str, by: str
) -> Outgoing | None:
    """The notice that gives the dead letter's version up at `entity` (None: not an outbox
    message, nothing to tell)."""
    target = entity.name if entity.kind == "subscription" else None
    notice = notice_of_event(described, reason=reason, by=by, target=target)
    return outgoing(notice) if notice is not None else None


class DeadLetterOperators:
    """The dead letters' use cases over the port (`queues()`, made on first use; None: no
    Service Bus to read them) and the watched entities; `watch` remembers the dead letters so
    that one that leaves without being applied is said (`cosmos_outbox.operations._watch`).

    With `failures` (OUTBOX_FAILURE_INGEST on: the relay drains every watched dead-letter queue
    into failure records) the dead letters of an entity are its OPEN failure records, each as
    the dead letter it was last (`letter_of`: its last attempt's sequence number): counted
    exactly (its groups' summaries), listed, peeked (with its history), previewed and acted on
    whole (no COUNT_LIMIT); a resubmit sends each record's message again as a dead letter's
    resubmission is sent and marks the record resolved, a discard sends its discard notice and
    archives it (who, why, which operation: its history). The queues are not read (the ingest
    empties them) and the watch of vanished dead letters is not kept (the records are)."""

    def __init__(
        self,
        queues: Callable[[], AsyncDeadLetterQueues | None],
        watched: Sequence[DeadLetterEntity],
        *,
        watch: DeadLetterWatch | None = None,
        rules: Callable[[], Awaitable[TargetRuleCheck]] | None = None,
        failures: Failures | None = None,
    ) -> None:
        self._queues = queues
        self._failures = failures
        self.watched = tuple(watched)
        self._watch = watch
        #: each entity's last count read (the answer while its queue cannot be read)
        self._known: dict[str, EntityCount] = {}
        #: the topic's subscriptions and their rules as last read (the status keeps them)
        self._rules = rules

    async def deliveries(
        self, entity: DeadLetterEntity, sent: Sequence[Outgoing | None]
    ) -> list[Received]:
        """What each subscription of the topic receives of `sent` (a subscription's dead
        letters go to the topic: its rules decide, `_deliveries`); nothing for a queue's."""
        if entity.kind != "subscription" or self._rules is None:
            return []
        facts = [sent_facts(o) for o in sent if o is not None]
        names = [e.name for e in self.watched if e.kind == "subscription"]
        return received(await self._rules(), facts, names)

    async def watch(self) -> list[VanishedLetter]:
        """One look for dead letters that left their queue without being applied (the backlog
        timer's, each tick); the vanished ones, unresolved. Nothing when no watch is kept."""
        if self._watch is None or self._queues() is None or self._failures is not None:
            return []
        return await self._watch.sweep(self.scan)

    async def watched_records(self) -> list[WatchRecord]:
        """Every dead letter the watch remembers, and its fate (the journey's history)."""
        return await self._watch.records() if self._watch is not None else []

    async def vanished(self) -> list[VanishedLetter]:
        """The vanished dead letters the watch knows, unresolved (no Service Bus call)."""
        return await self._watch.vanished() if self._watch is not None else []

    async def send(self, entity: DeadLetterEntity, messages: Sequence[Outgoing]) -> None:
        """Send `messages` where `entity`'s dead letters go back (a failure record's retry or
        discard notice: no dead letter to remove), audited as a resubmission or discard is by
        the record's operation."""
        if messages:
            await answered(SERVICE_BUS, self._port().send(entity, messages))

    def entity(self, name: str) -> DeadLetterEntity:
        """The watched entity of that name (NotFoundError: not watched)."""
        for entity in self.watched:
            if entity.name.casefold() == name.casefold():
                return entity
        raise NotFoundError(WATCHED, name)

    def _port(self) -> AsyncDeadLetterQueues:
        queues = self._queues()
        if queues is None:
            raise NotFoundError(WATCHED, "(none: set OUTBOX_SUBSCRIPTIONS)")
        return queues

    async def pages(self, entity: DeadLetterEntity, after: int) -> AsyncIterator[list[Described]]:
        """The dead letters after sequence number `after`, in order, a peek (PEEK_BATCH) at a
        time, until one comes back short."""
        if self._failures is not None:  # the open records, a query of PEEK_BATCH at a time
            records = self._failures.open_after(entity.name, after, PEEK_BATCH)
            while (found := await answered(COSMOS_DB, _next(records))) is not None:
                kept = _as_letters(found)
                if kept:
                    yield [kept[n][0] for n in sorted(kept)]
            return
        port = self._port()
        start = after + 1
        while True:
            page = await answered(
                SERVICE_BUS, port.peek(entity, from_sequence=start, max_count=PEEK_BATCH)
            )
            yield [describe(m) for m in page]
            if len(page) < PEEK_BATCH:
                return
            start = page[-1].sequence_number + 1

    async def scan(
        self, entity: DeadLetterEntity, *, after: int = 0, limit: int = COUNT_LIMIT
    ) -> tuple[list[Described], bool]:
        """The dead letters after sequence number `after`, in order, at most `limit`; and
        whether there are more."""
        found: list[Described] = []
        async for page in self.pages(entity, after):
            found += page
            if len(found) >= limit and len(page) == PEEK_BATCH:
                return found[:limit], True
        return found[:limit], len(found) > limit

    async def count(self, entity: DeadLetterEntity) -> EntityCount:
        """How many dead letters `entity` holds (peeked: Listen rights only); a queue that
        cannot be read says why, with the last count known and when it was read, and does not
        fail the others' counts."""
        found = {"name": entity.name, "kind": entity.kind}
        try:
            if self._failures is not None:  # exact: the entity's groups' summaries
                number = await answered(COSMOS_DB, self._failures.open_count(entity.name))
                more = False
            else:
                letters, more = await self.scan(entity)
                number = len(letters)
        except Exception as exc:
            error = (
                str(exc)  # "Service Bus did not answer within 3 s"
                if isinstance(exc, DependencyUnavailableError)
                else f"{error_type(exc)}: {str(exc)[:200]}"
            )
            last = self._known.get(entity.name)
            if last is None:
                return EntityCount(**found, dead_letters=None, at_least=False, error=error)
            return last.model_copy(update={"error": error})
        counted = EntityCount(
            **found, dead_letters=number, at_least=more, counted_at=datetime.now(UTC)
        )
        self._known[entity.name] = counted
        return counted

    async def counts(self) -> DeadLetterCounts:
        """`count` of each watched entity."""
        return DeadLetterCounts(entities=[await self.count(entity) for entity in self.watched])

    async def page(
        self, entity: DeadLetterEntity, selected: LetterFilter, *, page_size: int, after: int
    ) -> tuple[list[LetterSummary], int | None]:
        """Up to `page_size` dead letters matching, after sequence number `after`; and the
        sequence number to go on after (None: no more). A page scanned COUNT_LIMIT dead letters
        at most: fewer items, and a number to go on after."""
        found: list[LetterSummary] = []
        scanned = 0
        async for page in self.pages(entity, after):
            for described in page:
                if selected.matches(described):
                    found.append(LetterSummary.of(described))
                    if len(found) == page_size:
                        number = described.letter.sequence_number
                        more, _ = await self.scan(entity, after=number, limit=1)
                        return found, number if more else None
            scanned += len(page)
            if scanned >= self._limit and len(page) == PEEK_BATCH:
                return found, page[-1].letter.sequence_number
        return found, None

    async def peek(self, entity: DeadLetterEntity, sequence_number: int) -> DeadLetterMessage:
        if self._failures is not None:
            kept = (await self._kept(entity, [sequence_number])).get(sequence_number)
            if kept is None:
                raise NotFoundError(DEAD_LETTER, f"{entity.name} #{sequence_number}")
            described, record = kept
            return DeadLetterMessage.of(described, FailureView.of(record))
        [*found] = await answered(
            SERVICE_BUS, self._port().peek(entity, from_sequence=sequence_number, max_count=1)
        )
        if not found or found[0].sequence_number != sequence_number:
            raise NotFoundError(DEAD_LETTER, f"{entity.name} #{sequence_number}")
        return DeadLetterMessage.of(describe(found[0]))

    async def _matching(
        self, entity: DeadLetterEntity, selection: Selection
    ) -> tuple[list[Described], bool]:
        """The dead letters a selection names (NotFoundError for numbers not there), and
        whether the scan stopped at its limit (more may match)."""
        if not selection.sequence_numbers:
            letters, more = await self.scan(entity, limit=self._limit)
            return [d for d in letters if selection.filter.matches(d)], more
        wanted = set(selection.sequence_numbers)
        span = max(wanted) - min(wanted) + 1  # sequence numbers are unique: no more in between
        limit = min(span, self._limit)
        letters, _ = await self.scan(entity, after=min(wanted) - 1, limit=limit)
        found = [d for d in letters if d.letter.sequence_number in wanted]
        missing = wanted - {d.letter.sequence_number for d in found}
        if missing:
            raise NotFoundError(
                DEAD_LETTER, f"{entity.name} #{', #'.join(map(str, sorted(missing)))}"
            )
        return found, False

    async def preview(
        self, entity: DeadLetterEntity, selection: Selection, *, action: str
    ) -> LetterPreview:
        """What `action` (resubmit or discard) on `selection` would touch (see LetterPreview),
        and what subscribers would see were each done: as the action says it. Refused as the
        action would be (NotFoundError for sequence numbers not there)."""
        if action not in ("resubmit", "discard"):
            raise ValueError(f"no such action to preview: {action}")
        letters, more = await self._matching(entity, selection)
        by = str(current_actor())
        planned = [Handled(d, _sent(action, d, entity, reason="", by=by), None) for d in letters]
        deliveries = await self.deliveries(entity, [h.sent for h in planned])
        return LetterPreview(
            action=cast(Literal["resubmit", "discard"], action),
            entity=entity.name,
            kind=entity.kind,
            matching=len(letters),
            at_least=more,
            per_call=MAX_PER_CALL,
            aggregates=len({(d.aggregate_type, d.aggregate_id) for d in letters if d.aggregate_id}),
            first=[LetterSummary.of(d) for d in letters[:PREVIEW_ITEMS]],
            not_outbox_messages=sum(1 for d in letters if not d.is_outbox_message),
            subscribers_will_see=_will_see(action, entity, planned) + as_rules_decide(deliveries),
            deliveries=deliveries,
        )

    async def resubmit(self, entity: DeadLetterEntity, selection: Selection) -> ActionReport:
        """Send the selected dead letters again (see the module), then remove each whose send
        was accepted."""
        return await self._act("resubmit", entity, selection, reason=None)

    async def discard(
        self, entity: DeadLetterEntity, selection: Selection, *, reason: str
    ) -> ActionReport:
        """Give the selected dead letters up at `entity`: the discard notice of each one's
        version sent in its session, to that subscription only, then the dead letter removed.
        The notices name who gave them up (`discardedBy`: the current actor)."""
        return await self._act("discard", entity, selection, reason=reason)

    async def _act(
        self,
        action: Literal["resubmit", "discard"],
        entity: DeadLetterEntity,
        selection: Selection,
        *,
        reason: str | None,
    ) -> ActionReport:
        """At most MAX_PER_CALL of the selection, within half the operators' bound (`act_on`)."""
        matching, _ = await self._matching(entity, selection)
        letters, remaining = matching[:MAX_PER_CALL], max(0, len(matching) - MAX_PER_CALL)
        budget = bounded_budget()
        return await self.act_on(
            action, entity, letters, reason=reason, remaining=remaining, budget=budget
        )

    async def act_on(
        self,
        action: Literal["resubmit", "discard"],
        entity: DeadLetterEntity,
        letters: list[Described],
        *,
        reason: str | None,
        remaining: int = 0,
        budget: float | None = None,
        operation: str | None = None,
    ) -> ActionReport:
        """`letters` (as peeked): the watch told, each moved (its resubmission or notice sent,
        then removed), in chunks while `budget` seconds last (None: all of them; a bulk
        operation's worker), the report audited (`remaining`: how many more match). With the
        failure records (see the class): each message sent, then its record settled (resolved
        or archived, noted with `operation`), nothing removed from a queue."""
        by = str(current_actor())
        plan = {
            d.letter.sequence_number: (d, _sent(action, d, entity, reason=reason or "", by=by))
            for d in letters
        }
        if self._failures is not None:
            handled = await self._settle(action, entity, plan, budget, reason, operation)
        else:
            fate: Literal["resubmitted", "discarded"] = (
                "resubmitted" if action == "resubmit" else "discarded"
            )
            await self._record(entity, letters, fate)
            handled = await self._move(entity, plan, budget)
        deliveries = await self.deliveries(entity, [h.sent for h in handled if h.outcome is None])
        will_see = _will_see(action, entity, handled) + as_rules_decide(deliveries)
        _audit(action, entity, handled, remaining, will_see, reason=reason)
        return ActionReport(
            action=action,
            entity=entity.name,
            done=sum(1 for h in handled if h.outcome is None),
            failed=sum(1 for h in handled if h.outcome is not None),
            remaining=remaining,
            handled=[HandledLetter.of(h) for h in handled],
            subscribers_will_see=will_see,
            deliveries=deliveries,
        )

    async def _record(
        self,
        entity: DeadLetterEntity,
        letters: list[Described],
        fate: Literal["resubmitted", "discarded"],
    ) -> None:
        """Tell the watch these dead letters leave by an operator's hand (before they do: a
        sweep meanwhile must not take them for vanished). A failure is logged, the action
        goes on."""
        if self._watch is None:
            return
        try:
            await self._watch.handled(entity, letters, fate=fate, by=str(current_actor()))
        except Exception:
            logger.warning("the dead letters' watch could not record a %s", fate, exc_info=True)

    async def _move(
        self,
        entity: DeadLetterEntity,
        plan: dict[int, tuple[Described, Outgoing | None]],
        budget: float | None,
    ) -> list[Handled]:
        """Move the planned dead letters, in chunks while the time budget lasts (None: no
        limit); those left when it ran out are reported as not handled (call again)."""
        port = self._port()
        handled: list[Handled] = []
        for part, late in _budgeted(sorted(plan), 10, budget):
            if late:
                handled += [Handled(plan[n][0], None, NOT_HANDLED) for n in part]
                break
            outcomes = await answered(SERVICE_BUS, port.move(entity, {n: plan[n][1] for n in part}))
            handled += [Handled(plan[n][0], plan[n][1], outcomes.get(n)) for n in part]
        return handled

    # -- the failure records (OUTBOX_FAILURE_INGEST; see the class) ------------------------

    @property
    def keeps_records(self) -> bool:
        """Whether the dead letters are failure records (the queues drained by the ingest)."""
        return self._failures is not None

    @property
    def _limit(self) -> int:
        """Dead letters read for a count, a page or a selection: COUNT_LIMIT of a queue; every
        record (exact)."""
        return sys.maxsize if self._failures is not None else COUNT_LIMIT

    async def _kept(
        self, entity: DeadLetterEntity, numbers: Sequence[int]
    ) -> dict[int, tuple[Described, FailureRecord]]:
        """`entity`'s open failure records of those sequence numbers (read by them, not every
        one), as dead letters, by their sequence numbers."""
        assert self._failures is not None
        records = await answered(COSMOS_DB, self._failures.open_numbered(entity.name, numbers))
        return _as_letters(records)

    async def _settle(
        self,
        action: Literal["resubmit", "discard"],
        entity: DeadLetterEntity,
        plan: dict[int, tuple[Described, Outgoing | None]],
        budget: float | None,
        reason: str | None,
        operation: str | None,
    ) -> list[Handled]:
        """Each planned record's message sent, then the record resolved (resubmit) or archived
        (discard), a chunk at a time while the budget lasts (as `_move`). Sent again after a
        failure between the two, a message has the same MessageId (the record unchanged):
        duplicate detection drops it."""
        assert self._failures is not None
        kept = await self._kept(entity, sorted(plan))
        by = str(current_actor())
        handled: list[Handled] = []
        for part, late in _budgeted(sorted(plan), 50, budget):
            if late:
                handled += [Handled(plan[n][0], None, NOT_HANDLED) for n in part]
                break
            gone = [n for n in part if n not in kept]
            handled += [
                Handled(plan[n][0], None, "no longer open (settled meanwhile)") for n in gone
            ]
            present = [n for n in part if n in kept]
            if not present:
                continue
            await self.send(entity, [m for n in present if (m := plan[n][1]) is not None])
            by_group: dict[str, list[FailureRecord]] = {}
            for n in present:
                by_group.setdefault(kept[n][1].group, []).append(kept[n][1])
            for records in by_group.values():
                await answered(
                    COSMOS_DB,
                    self._failures.settle(
                        records,
                        "resolved" if action == "resubmit" else "archived",
                        what="retried" if action == "resubmit" else "archived",
                        by=by,
                        operation=operation,
                        note=reason,
                    ),
                )
            handled += [Handled(plan[n][0], plan[n][1], None) for n in present]
        return handled

    async def failure(self, record_id: str) -> DeadLetterMessage:
        """A failed message kept as data, in any state: the message whole as it was dead-lettered
        last, with its record and history (`failure`). NotFoundError: none of that id (expired),
        or failures not kept as data."""
        if self._failures is None:
            raise NotFoundError(
                "failed message",
                f"{record_id} (failures are kept as data only with OUTBOX_FAILURE_INGEST on)",
            )
        record = await answered(COSMOS_DB, self._failures.record(record_id))
        return DeadLetterMessage.of(describe(letter_of(record)), FailureView.of(record))

    async def open_records_told(
        self, *, event_id: str | None = None, aggregate_id: str | None = None
    ) -> dict[str, list[Described]] | None:
        """The dead letters a journey tells of, when failures are kept as data (None: they
        are not, and the journey scans the queues): the open records of one event, or of one
        aggregate's events, as the dead letters they were last, by watched entity -- read by
        the event's or the aggregate's id, not by scanning every entity's records."""
        if self._failures is None:
            return None
        if event_id is not None:
            records = await answered(COSMOS_DB, self._failures.of_event(event_id))
        else:
            assert aggregate_id is not None
            records = await answered(COSMOS_DB, self._failures.open_of_aggregate(aggregate_id))
        told: dict[str, list[Described]] = {entity.name: [] for entity in self.watched}
        for record in records:
            name = next((n for n in told if n.casefold() == record.entity.casefold()), None)
            if record.state == "open" and name is not None:
                told[name].append(describe(letter_of(record)))
        return told

    async def failures_of_event(self, event_id: str) -> list[FailureView]:
        """The failure records of an event, in any state, with their history (none when
        failures are not kept as data)."""
        if self._failures is None:
            return []
        return [
            FailureView.of(r) for r in await answered(COSMOS_DB, self._failures.of_event(event_id))
        ]


async def _next(pages: AsyncIterator[list[FailureRecord]]) -> list[FailureRecord] | None:
    """The next page of `pages` (None: no more)."""
    return await anext(pages, None)


#: What a planned dead letter left when its call's time budget ran out is reported with.
NOT_HANDLED = "not handled in this call: call again"


def _budgeted(
    numbers: Sequence[int], size: int, budget: float | None
) -> Iterator[tuple[Sequence[int], bool]]:
    """`numbers` a chunk of `size` at a time (False: act on it) while `budget` seconds last
    (None: no limit; the first chunk always); once they ran out, the rest at once (True: not
    handled in this call)."""
    deadline = None if budget is None else time.monotonic() + budget
    for start in range(0, len(numbers), size):
        if start and deadline is not None and time.monotonic() > deadline:
            yield numbers[start:], True
            return
        yield numbers[start : start + size], False


def _as_letters(records: Sequence[FailureRecord]) -> dict[int, tuple[Described, FailureRecord]]:
    """Failure records as the dead letters they were last (`letter_of`), by their sequence
    numbers."""
    return {(d := describe(letter_of(r))).letter.sequence_number: (d, r) for r in records}


def bounded_budget() -> float:
    """What one request may spend moving dead letters: half the bound of its call."""
    from cosmos_outbox.http import bounded

    return bounded.bound_in_force() / 2


def _sent(
    action: str, described: Described, entity: DeadLetterEntity, *, reason: str, by: str
) -> Outgoing | None:
    """What `action` sends for a dead letter: its resubmission, or its discard notice (None:
    not an outbox event, removed with no notice)."""
    if action == "resubmit":
        return resubmission(described, entity)
    return discard_of(described, entity, reason=reason, by=by)


def as_rules_decide(deliveries: list[Received]) -> str:
    if not deliveries:
        return ""
    return ". As each subscription's rules decide: " + "; ".join(d.text() for d in deliveries)


def _will_see(action: str, entity: DeadLetterEntity, handled: list[Handled]) -> str:
    """What subscribers will see of what `action` did (or, previewed, would do) to `handled`."""
    done = [h for h in handled if h.outcome is None]
    notices = [h for h in done if h.sent is not None]
    first = notices[0].described if notices else None
    return letters_will_see(action, entity, done=len(done), notices=len(notices), first=first)


def letters_will_see(
    action: str,
    entity: DeadLetterEntity,
    *,
    done: int,
    notices: int,
    first: Described | None = None,
) -> str:
    """What subscribers will see of `done` dead letters resubmitted or discarded at `entity`
    (`notices` of the discarded ones with a discard notice; `first`: the first of those): the
    one sentence a preview, a report, an operation and their audit lines say."""
    if not done:
        return (
            f"nothing: no dead letter was {'resubmitted' if action == 'resubmit' else 'discarded'}"
        )
    if action == "resubmit" and entity.kind == "queue":
        return (
            f"{done} message(s) back on queue {entity.name}, each with a MessageId of its "
            "own (outboxResubmission = its number), everything else as it was sent"
        )
    if action == "resubmit":
        return (
            f"{done} message(s) at subscription {entity.name} only (outboxTarget), each in "
            "its session with a new MessageId that the topic's duplicate detection cannot drop "
            "and the event id unchanged (cloudEvents_id): a subscriber that deduplicates on the "
            "event id (the library's inbox) applies each once, and drops one it applied already; "
            "the versions it held behind one are applied after it. A subscription whose rule "
            "lacks the outboxTarget clause receives them too: the library's subscriber drops "
            "them, one that deduplicates on MessageId would apply them again"
        )
    parts = []
    if notices:
        example = (
            f" (the first: {first.aggregate_type} {first.aggregate_id} version {first.version})"
            if first is not None
            else ""
        )
        parts.append(
            f"{notices} {DISCARD_NOTICE_SUBJECT} notice(s), each in its aggregate's "
            f"session at subscription {entity.name} only{example}: the library's subscriber "
            "there records an accepted gap for each version and applies the versions it held "
            "after it"
        )
    if silent := done - notices:
        parts.append(
            f"{silent} dead letter(s) removed with no notice (not outbox events: no aggregate "
            "or version to give up)"
        )
    return "; ".join(parts)


def _audit(
    action: str,
    entity: DeadLetterEntity,
    handled: list[Handled],
    remaining: int,
    will_see: str,
    *,
    reason: str | None,
) -> None:
    done = [h for h in handled if h.outcome is None]
    numbers = [h.described.letter.sequence_number for h in done]
    failed = len(handled) - len(done)
    audit(
        f"deadletters.{action}",
        f"{len(done)} of {len(handled)} dead letter(s) of {entity.name} "
        f"{'resubmitted' if action == 'resubmit' else 'discarded'} "
        f"(sequence numbers {numbers}), {failed} not, {remaining} remaining"
        + (f"; reason: {reason}" if reason else ""),
        will_see=will_see,
        entity=entity.name,
        sequence_numbers=numbers,
        event_ids=[h.described.event_id for h in done],
        failed=failed,
        remaining=remaining,
        reason=reason,
    )
