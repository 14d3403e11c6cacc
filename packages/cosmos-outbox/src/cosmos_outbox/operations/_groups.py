"""Failures grouped by cause (ServicePulse's failure groups): the quarantined events and every
watched subscription's dead letters, grouped by where they are, their cause (`cause_of`: what
varies made a placeholder) and their event type, with an id derived from that key; a group
retried or discarded through the same use cases as one row, at most MAX_PER_CALL a call."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Literal

from cosmos_outbox._mapper import message_facts, to_message
from cosmos_outbox._model import Model
from cosmos_outbox._quarantine import QuarantinedEvent
from cosmos_outbox._records import OutboxMessage, OutboxRecord
from cosmos_outbox.errors import DependencyUnavailableError, NotFoundError
from cosmos_outbox.operations._actor import current_actor
from cosmos_outbox.operations._audit import audit
from cosmos_outbox.operations._dead_letters import MAX_PER_CALL, DeadLetterOperators
from cosmos_outbox.operations._deliveries import Received, received
from cosmos_outbox.operations._dependencies import (
    COSMOS_DB,
    SERVICE_BUS,
    Unanswered,
    answered,
    unanswered,
)
from cosmos_outbox.operations._letters import Described, Selection, enqueued
from cosmos_outbox.operations._quarantined import (
    QuarantineOperators,
    notice_of,
    quarantine_will_see,
)
from cosmos_outbox.ports import TargetRuleCheck

__all__ = [
    "FailureGroup",
    "FailureGroups",
    "GroupOperators",
    "GroupOutcome",
    "cause_of",
    "failure_text",
    "letter_text",
]

#: Quarantine records read to group them, at most (beyond: the counts are "at least").
QUARANTINE_LIMIT = 2000
#: A group's members listed in its answer, at most (its count says how many).
MEMBERS_LISTED = 100
_VARIABLE = re.compile(
    r"(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"|\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b"
    r"|\b0x[0-9a-f]+\b|\d+(?:\.\d+)?",
    re.IGNORECASE,
)
_ERROR_TYPE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exceeded|Failed|Expired))\b")


def cause_of(text: str | None) -> str:
    """A failure's text, what varies made a placeholder (`<n>` a number, `<id>` a GUID, `'…'` a
    quoted value), its spaces collapsed."""

    def placeholder(found: re.Match[str]) -> str:
        value = found.group(0)
        return "'…'" if value[0] in "'\"" else "<id>" if "-" in value else "<n>"

    return " ".join(_VARIABLE.sub(placeholder, text or "").split())[:300]


def failure_text(reason: str | None, description: str | None) -> str:
    """A dead letter's failure in one text: its reason, then its description, said once when
    the description repeats it ("KeyError" and "KeyError: 'id'" are "KeyError: 'id'", not
    "KeyError: KeyError: 'id'": issue 92, M6)."""
    reason, description = (reason or "").strip(), (description or "").strip()
    if not description or description == reason:
        return reason
    if not reason or description.startswith(reason):
        return description
    return f"{reason}: {description}"
def letter_text(described: Described) -> str:
    """A dead letter's failure, as grouped: its reason and description."""
    return failure_text(described.letter.reason, described.letter.description)


class FailureGroup(Model):
    """Failures of one cause: where (the quarantine, or `entity`'s dead letters), the exception
    type when the text names one, the cause, the event type, how many, first and last seen
    (`seen`: what those times are: when each was quarantined; for dead letters, when each
    message was enqueued, the only time Service Bus keeps of a dead letter: its failure came
    later), its members (their event ids, or a dead letter's sequence number when it carries
    none; at most MEMBERS_LISTED)."""

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
    seen: Literal["quarantined", "enqueued"] = "quarantined"
    examples: list[str]
    members: list[str] = []


class FailureGroups(Model):
    """The groups, the largest first; `at_least`: a source read to its limit; `unanswered`: a
    source that could not be read."""

    groups: list[FailureGroup]
    at_least: bool
    unanswered: list[Unanswered] = []


class GroupOutcome(Model):
    """A group's retry or discard, previewed or done: the events this call handles (`matching`)
    and handled (`done`, `failed` with why), those left for the next call, what subscribers will
    see and what each subscription receives as its rules decide."""

    group: FailureGroup
    action: Literal["retry", "discard"]
    previewed: bool
    matching: int
    done: int = 0
    failed: list[str] = []
    remaining: int = 0
    subscribers_will_see: str
    deliveries: list[Received] = []


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
        key = f"{source}\n{entity}\n{cause}\n{aggregate_type}\n{action}"
        times = [m[3] for m in members if m[3] is not None]
        kind = _ERROR_TYPE.match(cause)
        group = FailureGroup(
            id=hashlib.sha256(key.encode()).hexdigest()[:12],
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
            examples=[_name(m[4]) for m in members[:3]],
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
    ) -> None:
        self._quarantine, self._letters, self._rules = quarantine, dead_letters, rules
        self._base = source_base

    async def groups(self) -> FailureGroups:
        """Every failure group (see the module)."""
        found, at_least, missing = await self._read()
        ordered = sorted((g for g, _ in found.values()), key=lambda g: (-g.count, g.cause, g.id))
        return FailureGroups(groups=ordered, at_least=at_least, unanswered=missing)

    async def _read(self) -> tuple[dict[str, Any], bool, list[Unanswered]]:
        """The groups by id (each with its members), whether a source was read to its limit,
        and the sources that could not be read: the quarantine (Cosmos DB) and each watched
        entity's dead letters (Service Bus) are read apart, so that one dependency that does
        not answer leaves the other's groups shown (DESIGN §19, "reads degrade")."""
        records: list[QuarantinedEvent] = []
        token: str | None = None
        missing: list[Unanswered] = []
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
        found = _grouped("quarantine", None, items)
        at_least = token is not None
        for entity in self._letters.watched:
            try:
                letters, more = await self._letters.scan(entity)
            except Exception as exc:
                missing.append(unanswered(SERVICE_BUS, f"the dead letters at {entity.name}", exc))
                continue
            at_least = at_least or more
            items = [
                (letter_text(d), d.aggregate_type, d.action, enqueued(d.letter), d) for d in letters
            ]
            found |= _grouped("dead letters", entity.name, items)
        return found, at_least, missing

    async def find(self, group_id: str) -> FailureGroup:
        """The failure group of that id as it is now (NotFoundError: none)."""
        found = (await self._read())[0].get(group_id)
        if found is None:
            raise NotFoundError("failure group", group_id)
        group: FailureGroup = found[0]
        return group

    async def act(
        self,
        group_id: str,
        action: Literal["retry", "discard"],
        *,
        reason: str | None = None,
        preview: bool = False,
    ) -> GroupOutcome:
        """Retry (replay; for dead letters, resubmit) or discard the group's events, at most
        MAX_PER_CALL of them; with `preview`, what that would do, nothing done."""
        groups, _, missing = await self._read()
        found = groups.get(group_id)
        if found is None and missing:  # it may be among what could not be read
            raise DependencyUnavailableError(
                missing[0].dependency, f"did not answer ({missing[0].part}): {missing[0].error}"
            )
        if found is None:
            raise NotFoundError("failure group", group_id)
        group, members = found
        act = self._letters_act if group.source == "dead letters" else self._quarantine_act
        outcome = await act(group, members[:MAX_PER_CALL], action, reason or "", preview)
        left = outcome.remaining + max(0, len(members) - MAX_PER_CALL)
        outcome = outcome.model_copy(update={"remaining": left})
        if not preview:
            audit(
                f"groups.{action}",
                f"failure group {group.id} ({group.source}"
                f"{f' at {group.entity}' if group.entity else ''}: {group.cause}): "
                f"{outcome.done} of {outcome.matching} done, {len(outcome.failed)} failed, "
                f"{left} remaining" + (f"; reason: {reason}" if reason else ""),
                will_see=outcome.subscribers_will_see,
                group=group.id,
                done=outcome.done,
                remaining=left,
            )
        return outcome

    async def _letters_act(
        self, group: FailureGroup, members: list[Member], action: str, reason: str, preview: bool
    ) -> GroupOutcome:
        entity = self._letters.entity(group.entity or "")
        numbers = tuple(m.letter.sequence_number for m in members if isinstance(m, Described))
        selection = Selection(sequence_numbers=numbers)
        shown: dict[str, Any] = {"group": group, "action": action, "previewed": preview}
        if preview:
            verb = "resubmit" if action == "retry" else "discard"
            seen = await self._letters.preview(entity, selection, action=verb)
            return GroupOutcome(**shown, matching=seen.matching, **_told(seen))
        report = (
            await self._letters.resubmit(entity, selection)
            if action == "retry"
            else await self._letters.discard(entity, selection, reason=reason)
        )
        return GroupOutcome(
            **shown,
            matching=len(numbers),
            done=report.done,
            failed=[
                f"{h.event_id or h.sequence_number}: {h.failure}"
                for h in report.handled
                if h.failure
            ],
            remaining=report.remaining,
            **_told(report),
        )

    async def _quarantine_act(
        self, group: FailureGroup, members: list[Member], action: str, reason: str, preview: bool
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
        failed = (
            [] if preview else [why for r in records if (why := await self._one(r, action, reason))]
        )
        done = len(records) if preview else len(records) - len(failed)
        notices = sum(1 for m in sent if m is not None) if action == "discard" else 0
        return GroupOutcome(
            group=group,
            action=action,
            previewed=preview,
            matching=len(records),
            done=0 if preview else done,
            failed=failed,
            subscribers_will_see=quarantine_will_see(action, done=done, notices=notices)
            + ". As each subscription's rules decide: "
            + ("; ".join(d.text() for d in deliveries) or "-"),
            deliveries=deliveries,
        )

    async def _one(self, record: QuarantinedEvent, action: str, reason: str) -> str | None:
        """One quarantined event replayed or discarded; why not (None: done)."""
        try:
            if action == "discard":
                await self._quarantine.discard(record.event_id, reason)
                return None
            result = await self._quarantine.replay(record.event_id)
        except Exception as exc:
            return f"{record.event_id}: {type(exc).__name__}: {exc!s:.200}"
        return None if result.resolved else f"{record.event_id}: still quarantined: {result.reason}"


def _told(answer: Any) -> dict[str, Any]:
    """What an answer of the dead letters' use cases says subscribers will see and receive."""
    return {"subscribers_will_see": answer.subscribers_will_see, "deliveries": answer.deliveries}
