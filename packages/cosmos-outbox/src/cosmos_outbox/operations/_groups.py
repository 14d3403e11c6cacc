"""Failures grouped by cause (ServicePulse's failure groups): the quarantined events and every
watched subscription's dead letters, grouped by where they are, their cause (`cause_of`: what
varies made a placeholder) and their event type, with an id derived from that key; a group
previewed through the same use cases as one row (its first MAX_PER_CALL events), and retried or
discarded whole by a bulk operation (`cosmos_outbox.operations._bulk._operators`). With the
failure records kept (OUTBOX_FAILURE_INGEST), every group is its summary's, the quarantine's
too (each quarantined event is a record: `cosmos_outbox._quarantine`), exact at any size: listed
with a few examples read from its records (one query a group), and previewed whole (each open
record's message, read a page at a time: what each subscription receives counted for all)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Literal

from cosmos_outbox._causes import ERROR_TYPE as _ERROR_TYPE
from cosmos_outbox._causes import cause_of, failure_text, group_id
from cosmos_outbox._domain import DomainError
from cosmos_outbox._mapper import message_facts, sent_facts, to_message
from cosmos_outbox._mapper.failure import FailureGroupRecord
from cosmos_outbox._model import Model
from cosmos_outbox._quarantine import QuarantinedEvent
from cosmos_outbox._records import OutboxMessage, OutboxRecord
from cosmos_outbox._subscription_facts import Facts
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.http import bounded
from cosmos_outbox.operations._actor import current_actor
from cosmos_outbox.operations._dead_letters import (
    MAX_PER_CALL,
    DeadLetterOperators,
    as_rules_decide,
    discard_of,
    letters_will_see,
    resubmission,
)
from cosmos_outbox.operations._deliveries import Received, received
from cosmos_outbox.operations._dependencies import (
    COSMOS_DB,
    SERVICE_BUS,
    Unanswered,
    answered,
    unanswered,
)
from cosmos_outbox.operations._failure_items import QUARANTINE_ENTITY
from cosmos_outbox.operations._failures import Failures, letter_of
from cosmos_outbox.operations._letters import Described, Selection, describe, enqueued
from cosmos_outbox.operations._quarantined import (
    QuarantineOperators,
    notice_of,
    quarantine_will_see,
)
from cosmos_outbox.ports import DeadLetterEntity, TargetRuleCheck

__all__ = [
    "FailureGroup",
    "FailureGroups",
    "GroupOperators",
    "GroupOutcome",
    "Unarchived",
    "cause_of",
    "failure_text",
    "group_id",
    "letter_text",
]

logger = logging.getLogger("cosmos_outbox.operators")
#: Quarantine records read to group them, at most (beyond: the counts are "at least"), where
#: the failure records are not kept (or the quarantine holds records set aside before them).
QUARANTINE_LIMIT = 2000
#: A group's members listed in its answer, at most (its count says how many).
MEMBERS_LISTED = 100
#: A group's examples in the list of groups: the last of its members to fail (a group read
#: from the quarantine's records or the dead letters: its first ones).
EXAMPLES = 3
#: The share of a bounded call's time left below which the groups are listed without examples.
EXAMPLES_SHARE = 0.3
#: The share of a bounded call's time left below which a group's preview reads no more pages.
PREVIEW_SHARE = 0.3


def letter_text(described: Described) -> str:
    """A dead letter's failure, as grouped: its reason and description."""
    return failure_text(described.letter.reason, described.letter.description)


class FailureGroup(Model):
    """Failures of one cause: where (the quarantine, or `entity`'s dead letters), the exception
    type when the text names one, the cause, the event type, how many, first and last seen
    (`seen`: what those times are: when each was quarantined; for dead letters, when each
    message was enqueued, the only time Service Bus keeps of a dead letter: its failure came
    later), its members (their event ids, or a dead letter's sequence number when it carries
    none; at most MEMBERS_LISTED) and a few of them as `examples` (at most EXAMPLES; a group of
    failure records, in the list of groups: its last open records to be dead-lettered, read
    from the store, its `members` not listed there)."""

    id: str
    source: Literal["quarantine", "dead letters"]
    entity: str | None
    error_type: str | None
    cause: str
    aggregate_type: str | None
    action: str | None
    count: int
    first_seen: datetime | None
    last_seen: datetime | None
    seen: Literal["quarantined", "enqueued", "failed"] = "quarantined"
    examples: list[str]
    members: list[str] = []


class FailureGroups(Model):
    """The groups, the largest first; `at_least`: a source read to its limit; `unanswered`: a
    source that could not be read."""

    groups: list[FailureGroup]
    at_least: bool
    unanswered: list[Unanswered] = []


class GroupOutcome(Model):
    """A group's retry or discard, previewed (`previewed`: always, since the group's operation
    does it): the events the preview looked at (`matching`: a group of failure records, all of
    its open ones; else its first MAX_PER_CALL), what subscribers will see and what each
    subscription receives of them as its rules decide (`done`, `failed`, `remaining`: kept for
    the clients that read them, 0 and empty)."""

    group: FailureGroup
    action: Literal["retry", "discard"]
    previewed: bool
    matching: int
    done: int = 0
    failed: list[str] = []
    remaining: int = 0
    subscribers_will_see: str
    deliveries: list[Received] = []


class Unarchived(Model):
    """A group's archived failure records brought back: how many (`unarchived`), how many are
    still archived (`remaining`: call again), and the group as it is now (its exact count)."""

    group: FailureGroup
    unarchived: int
    remaining: int


Member = QuarantinedEvent | Described
#: A member as grouped: its text, aggregate type, action, when seen, itself.
_Item = tuple[str, str | None, str | None, datetime | None, Member]


def _grouped(source: str, entity: str | None, items: list[_Item]) -> dict[str, Any]:
    """Group `items` by cause and event type: by id, (its FailureGroup, its members)."""
    found: dict[tuple[str, str | None, str | None], list[_Item]] = {}
    for item in items:
        found.setdefault((cause_of(item[0]), item[1], item[2]), []).append(item)
    groups = {}
    for (cause, aggregate_type, action), members in found.items():
        times = [m[3] for m in members if m[3] is not None]
        kind = _ERROR_TYPE.match(cause)
        group = FailureGroup(
            id=group_id(source, entity, cause, aggregate_type, action),
            source=source,
            entity=entity,
            error_type=kind.group(1) if kind else None,
            cause=cause,
            aggregate_type=aggregate_type,
            action=action,
            count=len(members),
            first_seen=min(times, default=None),
            last_seen=max(times, default=None),
            seen="quarantined" if source == "quarantine" else "enqueued",
            examples=[_name(m[4]) for m in members[:EXAMPLES]],
            members=[_name(m[4]) for m in members[:MEMBERS_LISTED]],
        )
        groups[group.id] = (group, [m[4] for m in members])
    return groups


def _name(member: Member) -> str:
    if isinstance(member, QuarantinedEvent):
        return member.event_id
    return member.event_id or f"sequence {member.letter.sequence_number}"


class GroupOperators:
    """Failure groups over the quarantine's and the dead letters' use cases (see the module)."""

    def __init__(
        self,
        quarantine: QuarantineOperators,
        dead_letters: DeadLetterOperators,
        rules: Callable[[], Awaitable[TargetRuleCheck]],
        *,
        source_base: str = "",
        failures: Failures | None = None,
    ) -> None:
        self._quarantine, self._letters, self._rules = quarantine, dead_letters, rules
        self._base = source_base
        #: the failure records (OUTBOX_FAILURE_INGEST): the dead letters' groups read from them
        self._failures = failures

    async def groups(self) -> FailureGroups:
        """Every failure group (see the module)."""
        found, at_least, missing = await self._read()
        ordered = sorted((g for g, _ in found.values()), key=lambda g: (-g.count, g.cause, g.id))
        return FailureGroups(groups=ordered, at_least=at_least, unanswered=missing)

    async def _read(self) -> tuple[dict[str, Any], bool, list[Unanswered]]:
        """The groups by id (each with its members), whether a source was read to its limit,
        and the sources that could not be read: the quarantine (Cosmos DB) and each watched
        entity's dead letters (Service Bus) are read apart, so that one dependency that does
        not answer leaves the other's groups shown (DESIGN §19, "reads degrade"). With the
        failure records kept, every group is its summary's (exact at any size), the
        quarantine's too, unless the quarantine holds records its summaries do not count
        (`_counted`): then the quarantine's groups are read from its records as before."""
        missing: list[Unanswered] = []
        if self._failures is None:
            found, at_least = await self._scanned(missing)
        else:
            try:
                summaries = await answered(COSMOS_DB, self._failures.groups())
            except Exception as exc:
                missing.append(unanswered(COSMOS_DB, "the failure records", exc))
                summaries = []
            counted = await self._counted(summaries)
            found, at_least = ({}, False) if counted else await self._scanned(missing)
            stored = [
                stored_group(s)
                for s in summaries
                if s.open and (counted or s.entity_kind != QUARANTINE_ENTITY)
            ]
            for group in await self._with_examples(stored, missing):
                found[group.id] = (group, [])
            return found, at_least, missing
        for entity in self._letters.watched:
            try:
                letters, more = await self._letters.scan(entity)
            except Exception as exc:
                missing.append(unanswered(SERVICE_BUS, f"the dead letters at {entity.name}", exc))
                continue
            at_least = at_least or more
            items: list[_Item] = [
                (letter_text(d), d.aggregate_type, d.action, enqueued(d.letter), d) for d in letters
            ]
            found |= _grouped("dead letters", entity.name, items)
        return found, at_least, missing

    async def _with_examples(
        self, groups: list[FailureGroup], missing: list[Unanswered]
    ) -> list[FailureGroup]:
        """Groups of failure records with their examples (`EXAMPLES` of their open records,
        the last dead-lettered first: `Failures.latest_open`), one query in each group's
        partition, in turn; once one is not answered, the rest are left without (the groups
        shown, their counts exact: `missing` says so), and so are they once the call's bound
        keeps less than EXAMPLES_SHARE of itself (the list answered in time, whatever the
        number of groups: a query takes 20-90 ms on funcstack's endpoint, bench.failure_groups)."""
        assert self._failures is not None
        shared = bounded.budget()
        shown: list[FailureGroup] = []
        for at, group in enumerate(groups):
            if shared is not None and shared.left() < shared.seconds * EXAMPLES_SHARE:
                logger.info(
                    "%d failure group(s) listed without examples: no time left", len(groups) - at
                )
                return shown + groups[at:]
            try:
                latest = await answered(COSMOS_DB, self._failures.latest_open(group.id, EXAMPLES))
            except Exception as exc:
                missing.append(unanswered(COSMOS_DB, "the failure groups' examples", exc))
                return shown + groups[at:]
            names = [event_id or f"sequence {number}" for event_id, number in latest]
            shown.append(group.model_copy(update={"examples": names}))
        return shown

    async def _counted(self, summaries: list[FailureGroupRecord]) -> bool:
        """Whether the summaries count every quarantine record not resolved: the quarantine's
        records are kept as failure records since they are (`cosmos_outbox._quarantine`), and
        one set aside before is in the quarantine only. Decided by one COUNT of the quarantine
        (`Quarantine.count`) against the summaries' open total: the store holding more than they
        count (records from before), the quarantine's groups are read from its records as
        before (to QUARANTINE_LIMIT: "at least" beyond), and a warning says by how many (so
        too for a replay or a discard stopped between its failure record settled and its
        quarantine record written); the quarantine's adoption (`QuarantineOperators.adopt`)
        keeps the former and brings the latter to their failure records' state, after which
        the summaries count them again. As many or fewer (a crash between a failure record
        and its quarantine record, which the relay finishes), the summaries. A quarantine that
        does not answer: read as before (which says it did not answer)."""
        listed = sum(s.open for s in summaries if s.entity_kind == QUARANTINE_ENTITY)
        try:
            stored = await answered(COSMOS_DB, self._quarantine.count())
        except Exception:
            return False
        if stored > listed:
            logger.warning(
                "the quarantine holds %d record(s) not resolved, its failure records count %d: "
                "%d set aside before they were kept (or a replay or discard stopped between its "
                "two writes); its groups read from its records (to %d) until "
                "`cosmos-outbox quarantine adopt` keeps or settles them",
                stored,
                listed,
                stored - listed,
                QUARANTINE_LIMIT,
            )
            return False
        return True

    async def _scanned(self, missing: list[Unanswered]) -> tuple[dict[str, Any], bool]:
        """The quarantine's groups read from its records (to QUARANTINE_LIMIT), and whether it
        was read to its limit (its counts "at least"); a quarantine that does not answer added
        to `missing`."""
        records: list[QuarantinedEvent] = []
        token: str | None = None
        try:
            while len(records) < QUARANTINE_LIMIT:
                page = await answered(
                    COSMOS_DB, self._quarantine.page(page_size=100, continuation=token)
                )
                records += [r for r in page.items if not r.resolved and not r.discarded]
                if (token := page.continuation_token) is None:
                    break
        except Exception as exc:
            missing.append(unanswered(COSMOS_DB, "the quarantine", exc))
            records, token = [], None
        items: list[_Item] = [
            (r.reason, r.aggregate_type, r.action, r.quarantined_at, r) for r in records
        ]
        return _grouped("quarantine", None, items), token is not None

    async def _members(self, group_id: str, limit: int) -> tuple[FailureGroup, list[Member]]:
        """The group of that id as far as its first `limit` members (their count, first and
        last seen), read until they are found: the quarantine a page at a time, then each
        watched subscription's dead letters (NotFoundError: no such group now; a source that
        does not answer: DependencyUnavailableError naming it, never a 404 for a group that
        may be there)."""
        if self._failures is not None:
            stored = await self._stored_members(group_id, limit)
            if stored is not None:
                return stored
        found: list[_Item] = []
        where: tuple[str, str | None] = ("quarantine", None)
        token: str | None = None
        read = 0
        while len(found) < limit and read < QUARANTINE_LIMIT:
            page = await answered(
                COSMOS_DB, self._quarantine.page(page_size=100, continuation=token)
            )
            read += len(page.items)
            found += [
                (r.reason, r.aggregate_type, r.action, r.quarantined_at, r)
                for r in page.items
                if not r.resolved and not r.discarded and _id_of("quarantine", None, r) == group_id
            ]
            if (token := page.continuation_token) is None:
                break
        if not found and self._failures is not None:
            raise NotFoundError("failure group", group_id)
        for entity in self._letters.watched:
            if found:
                break
            where = ("dead letters", entity.name)
            async for letters in self._letters.pages(entity, 0):
                found += [
                    (letter_text(d), d.aggregate_type, d.action, enqueued(d.letter), d)
                    for d in letters
                    if _id_of("dead letters", entity.name, d) == group_id
                ]
                if len(found) >= limit:
                    break
        if not found:
            raise NotFoundError("failure group", group_id)
        [(group, members)] = _grouped(*where, found[:limit]).values()
        return group, members

    async def _stored_members(
        self, group_id: str, limit: int
    ) -> tuple[FailureGroup, list[Member]] | None:
        """A group of failure records: its summary (its exact count) and a sample of `limit` of
        its open records, as the dead letters (or the quarantine records) they were; None when
        no summary counts it open (a quarantine group set aside before its records were kept is
        read from the quarantine)."""
        assert self._failures is not None
        summary = await self._open_summary(group_id)
        if summary is None:
            return None
        records = await answered(COSMOS_DB, self._failures.sample(group_id, limit))
        members: list[Member] = [
            self._quarantine.of_record(r)
            if r.entity_kind == QUARANTINE_ENTITY
            else describe(letter_of(r))
            for r in records
        ]
        names = [_name(m) for m in members]
        group = stored_group(summary).model_copy(
            update={"examples": names[:3], "members": names[:MEMBERS_LISTED]}
        )
        return group, members

    async def _open_summary(self, group_id: str) -> FailureGroupRecord | None:
        """The summary of the group of failure records of that id; None when there is none, or
        it counts none open."""
        assert self._failures is not None
        try:
            summary = await answered(COSMOS_DB, self._failures.group(group_id))
        except NotFoundError:
            return None
        return summary if summary.open else None

    async def unarchive(self, group_id: str) -> Unarchived:
        """Bring a group's archived failure records back among the open ones (OUTBOX_FAILURE_
        INGEST; each noted unarchived, by whom; their TTL removed), at most MAX_PER_CALL a
        call (`remaining` says how many more: call again); the group's counts in the same
        batches. NotFoundError: no such group of records (or the records are not kept);
        DomainError: a group of the quarantine (its discarded events were given up: their
        notices sent, subscribers moved past them)."""
        if self._failures is None:
            raise NotFoundError("failure group of records", group_id)
        failures = self._failures
        try:
            summary = await answered(COSMOS_DB, failures.group(group_id))
        except NotFoundError:
            raise NotFoundError("failure group", group_id) from None
        if summary.entity_kind == QUARANTINE_ENTITY:
            raise not_unarchived(f"group {group_id} is the quarantine's")
        archived = await answered(COSMOS_DB, failures.members(group_id, states=("archived",)))
        chosen = archived[:MAX_PER_CALL]
        by = str(current_actor())
        await answered(COSMOS_DB, failures.settle(chosen, "open", what="unarchived", by=by))
        summary = await answered(COSMOS_DB, failures.group(group_id))
        return Unarchived(
            group=stored_group(summary),
            unarchived=len(chosen),
            remaining=len(archived) - len(chosen),
        )

    async def find(self, group_id: str) -> FailureGroup:
        """The failure group of that id, found by its first member (its count is that far:
        a bulk operation counts its items itself; NotFoundError: no such group now)."""
        return (await self._members(group_id, 1))[0]

    async def preview(
        self, group_id: str, action: Literal["retry", "discard"], *, reason: str | None = None
    ) -> GroupOutcome:
        """What a retry (replay; for dead letters, resubmit) or a discard of the group would do,
        nothing done: what subscribers will see, what each subscription receives. A group of
        failure records: all of it, each open record's message read (`_records_preview`);
        else its first MAX_PER_CALL events (the group's operation does the rest alike)."""
        if self._failures is not None:
            summary = await self._open_summary(group_id)
            if summary is not None:
                return await self._records_preview(stored_group(summary), action)
        group, members = await self._members(group_id, MAX_PER_CALL)
        if group.source == "dead letters":
            return await self._letters_preview(group, members, action)
        return await self._quarantine_preview(group, members, action)

    async def _letters_preview(
        self, group: FailureGroup, members: list[Member], action: str
    ) -> GroupOutcome:
        entity = self._letters.entity(group.entity or "")
        numbers = tuple(m.letter.sequence_number for m in members if isinstance(m, Described))
        verb = "resubmit" if action == "retry" else "discard"
        seen = await self._letters.preview(entity, Selection(sequence_numbers=numbers), action=verb)
        return GroupOutcome(
            group=group, action=action, previewed=True, matching=seen.matching, **_told(seen)
        )

    async def _records_preview(self, group: FailureGroup, action: str) -> GroupOutcome:
        """A group of failure records previewed whole: every open record's message (a dead
        letter's resubmission or discard notice, a quarantined event's replay or notice) read
        a page at a time (`Failures.open_page`: without bodies but for the quarantine's, whose
        message is made from its stored event), so that what each subscription receives is
        counted for each of them, as its rules decide, and `matching` is the records read (its
        summary's count, but for a change meanwhile). Its members listed: the first
        MEMBERS_LISTED read; its examples: the list's (`_with_examples`). A group too large to
        read within the call's bound (the pages read while it keeps PREVIEW_SHARE of itself:
        about 1,300 records a second on funcstack's endpoint, bench.failure_groups): counted
        for those read, `matching` its summary's count, and the answer says so."""
        assert self._failures is not None
        quarantine = group.source == "quarantine"
        entity = None if quarantine else self._letters.entity(group.entity or "")
        by = str(current_actor())
        names: list[str] = []
        facts: list[Facts] = []
        read = notices = 0
        token: str | None = None
        shared = bounded.budget()
        while True:
            records, token = await answered(
                COSMOS_DB, self._failures.open_page(group.id, token, bodies=quarantine)
            )
            for record in records:
                read += 1
                member: Member = (
                    self._quarantine.of_record(record)
                    if quarantine
                    else describe(letter_of(record))
                )
                if len(names) < MEMBERS_LISTED:
                    names.append(_name(member))
                sent = _sent_facts(member, entity, action, by=by, base=self._base)
                if sent is not None:
                    facts.append(sent)
                    if action == "discard":
                        notices += 1
            if token is None:
                break
            if shared is not None and shared.left() < shared.seconds * PREVIEW_SHARE:
                break  # no time left for the rest: counted for those read, and said so
        [group] = await self._with_examples([group.model_copy(update={"members": names})], [])
        watched = [e.name for e in self._letters.watched if e.kind == "subscription"]
        deliveries = (
            received(await self._rules(), facts, watched)
            if entity is None or entity.kind == "subscription"
            else []
        )
        if entity is None:  # the quarantine's words, as its first events' preview says them
            will_see = (
                quarantine_will_see(action, done=read, notices=notices)
                + ". As each subscription's rules decide: "
                + ("; ".join(d.text() for d in deliveries) or "-")
            )
        else:
            verb = "resubmit" if action == "retry" else "discard"
            will_see = letters_will_see(verb, entity, done=read, notices=notices) + as_rules_decide(
                deliveries
            )
        if token is not None:
            will_see += (
                f" (what each subscription receives counted for the first {read} of its "
                f"{group.count} events: the rest were not read within the call's bound)"
            )
        return GroupOutcome(
            group=group,
            action=action,
            previewed=True,
            matching=read if token is None else max(read, group.count),
            subscribers_will_see=will_see,
            deliveries=deliveries,
        )

    async def _quarantine_preview(
        self, group: FailureGroup, members: list[Member], action: str
    ) -> GroupOutcome:
        records = [m for m in members if isinstance(m, QuarantinedEvent)]
        by = str(current_actor())
        sent: list[OutboxMessage | None]
        if action == "retry":
            sent = [to_message(r.event) for r in records if isinstance(r.event, OutboxRecord)]
        else:
            sent = [notice_of(r, reason="", by=by) for r in records]
        facts = [message_facts(m, base=self._base) for m in sent if m is not None]
        names = [e.name for e in self._letters.watched if e.kind == "subscription"]
        deliveries = received(await self._rules(), facts, names)
        notices = sum(1 for m in sent if m is not None) if action == "discard" else 0
        return GroupOutcome(
            group=group,
            action=action,
            previewed=True,
            matching=len(records),
            subscribers_will_see=quarantine_will_see(action, done=len(records), notices=notices)
            + ". As each subscription's rules decide: "
            + ("; ".join(d.text() for d in deliveries) or "-"),
            deliveries=deliveries,
        )


def not_unarchived(what: str) -> DomainError:
    """The refusal (409) to bring a quarantine's archived record back: `what` (a group of the
    quarantine, one of its records) was given up, its discard notice sent."""
    return DomainError(
        f"{what}: its discarded events were given up (each one's discard notice sent, its "
        "subscribers moved past it); none is brought back"
    )


def stored_group(summary: FailureGroupRecord) -> FailureGroup:
    """A group of failure records, from its summary: its exact open count (the quarantine's:
    its source the quarantine, seen when quarantined)."""
    kind = _ERROR_TYPE.match(summary.cause)
    quarantine = summary.entity_kind == QUARANTINE_ENTITY
    return FailureGroup(
        id=summary.group,
        source="quarantine" if quarantine else "dead letters",
        entity=None if quarantine else summary.entity,
        error_type=kind.group(1) if kind else None,
        cause=summary.cause,
        aggregate_type=summary.aggregate_type,
        action=summary.action,
        count=summary.open,
        first_seen=summary.first_failed_at,
        last_seen=summary.last_failed_at,
        seen="quarantined" if quarantine else "failed",
        examples=[],
        members=[],
    )


def _sent_facts(
    member: Member, entity: DeadLetterEntity | None, action: str, *, by: str, base: str
) -> Facts | None:
    """What the rules see of the message a retry or discard of `member` sends (None: it sends
    none): a quarantined event's message (a replay sends an outbox record's) or discard
    notice; a dead letter's resubmission to `entity`, or its discard notice there."""
    if isinstance(member, QuarantinedEvent):
        message: OutboxMessage | None
        if action == "discard":
            message = notice_of(member, reason="", by=by)
        else:
            event = member.event
            message = to_message(event) if isinstance(event, OutboxRecord) else None
        return message_facts(message, base=base) if message is not None else None
    assert entity is not None
    sent = (
        resubmission(member, entity)
        if action == "retry"
        else discard_of(member, entity, reason="", by=by)
    )
    return sent_facts(sent) if sent is not None else None


def _id_of(source: str, entity: str | None, member: Member) -> str:
    """The id of the group `member` belongs to."""
    text = member.reason if isinstance(member, QuarantinedEvent) else letter_text(member)
    return group_id(source, entity, cause_of(text), member.aggregate_type, member.action)


def _told(answer: Any) -> dict[str, Any]:
    """What an answer of the dead letters' use cases says subscribers will see and receive."""
    return {"subscribers_will_see": answer.subscribers_will_see, "deliveries": answer.deliveries}
