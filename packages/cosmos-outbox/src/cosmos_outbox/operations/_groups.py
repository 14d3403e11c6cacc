"""Failures grouped by cause (issue 72 item 6): with a thousand poison events or dead letters, on
call acts on causes, not rows (ServicePulse's failure groups). The quarantined events still
quarantined and the dead letters of every watched subscription are grouped by where they are
(the quarantine, or the subscription), their cause (the exception type and its message, its
numbers, ids and quoted values made placeholders: `cause_of`) and their event type (aggregate
type and action): each group with its count, when it was first and last seen, and its first
events. A group is named by an id derived from that key, so the same failures keep their id
from one read to the next.

A whole group is retried or discarded through the same use cases as one row (a quarantined
event replayed through the relay or given up with its notice; a dead letter resubmitted to its
subscription or given up there, previews and their subscriptions' deliveries included), at most
MAX_PER_CALL of its members a call (`remaining` says how many are left: call again). Each
member's action writes its own audit line; the group's writes one more naming the group."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Literal

from cosmos_outbox._mapper import message_facts, to_message
from cosmos_outbox._model import Model
from cosmos_outbox._quarantine import QuarantinedEvent
from cosmos_outbox._records import OutboxRecord
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.operations._actor import current_actor
from cosmos_outbox.operations._audit import audit
from cosmos_outbox.operations._dead_letters import MAX_PER_CALL, DeadLetterOperators
from cosmos_outbox.operations._deliveries import Received, received
from cosmos_outbox.operations._dependencies import SERVICE_BUS, Unanswered, unanswered
from cosmos_outbox.operations._giving_up import notice_of_event
from cosmos_outbox.operations._letters import Described, Selection, enqueued
from cosmos_outbox.operations._quarantined import QuarantineOperators
from cosmos_outbox.ports import TargetRuleCheck

__all__ = ["FailureGroup", "FailureGroups", "GroupOperators", "GroupOutcome", "cause_of"]

#: Quarantine records read to group them, at most (beyond: the counts are "at least").
QUARANTINE_LIMIT = 2000
#: What a cause's variable parts become: quoted values, GUIDs, hex and decimal numbers.
_VARIABLE = re.compile(
    r"(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"|\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b|\b0x[0-9a-f]+\b"
    r"|\d+(?:\.\d+)?",
    re.IGNORECASE,
)
_ERROR_TYPE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exceeded|Failed|Expired))\b")
EXAMPLES = 3


def cause_of(text: str | None) -> str:
    """A failure's text with what varies from one event to the next made a placeholder (`<n>`
    a number, `<id>` a GUID, `'…'` a quoted value), its spaces collapsed."""

    def placeholder(found: re.Match[str]) -> str:
        value = found.group(0)
        if value[0] in "'\"":
            return "'…'"
        return "<id>" if "-" in value else "<n>"

    return " ".join(_VARIABLE.sub(placeholder, text or "").split())[:300]


class FailureGroup(Model):
    """Failures of one cause: where they are (`source`: the quarantine, or a subscription's
    dead letters, `entity`), the exception type (when the text names one) and the normalised
    message (`cause`), the event type, how many, when first and last seen, the first ones."""

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
    examples: list[str]


class FailureGroups(Model):
    """Every failure group, the largest first; `at_least`: a source was read to its limit
    (counts are at least these); `unanswered`: a source that could not be read."""

    groups: list[FailureGroup]
    at_least: bool
    unanswered: list[Unanswered] = []


class GroupOutcome(Model):
    """A group's retry or discard, previewed (nothing done) or done: how many of its members
    this call handles (`matching`, at most MAX_PER_CALL) and handled (`done`; `failed`, each
    with why), how many are left for the next call, and what subscribers will see, with what
    each subscription of the topic receives as its rules decide (`deliveries`)."""

    group: FailureGroup
    action: Literal["retry", "discard"]
    previewed: bool
    matching: int
    done: int = 0
    failed: list[str] = []
    remaining: int
    subscribers_will_see: str
    deliveries: list[Received] = []


class _Group:
    def __init__(self, group: FailureGroup, members: list[QuarantinedEvent | Described]) -> None:
        self.group, self.members = group, members


def _grouped(
    source: Literal["quarantine", "dead letters"],
    entity: str | None,
    items: Sequence[tuple[str, str | None, str | None, datetime | None, object]],
) -> list[_Group]:
    """Group `items` (text, aggregate type, action, when, member) by cause and event type."""
    found: dict[tuple[str, str | None, str | None], list[tuple[datetime | None, object]]] = {}
    for text, aggregate_type, action, when, member in items:
        found.setdefault((cause_of(text), aggregate_type, action), []).append((when, member))
    groups = []
    for (cause, aggregate_type, action), members in found.items():
        key = json.dumps([source, entity, cause, aggregate_type, action])
        times = [when for when, _ in members if when is not None]
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
            examples=[_name(m) for _, m in members[:EXAMPLES]],
        )
        groups.append(_Group(group, [m for _, m in members]))  # type: ignore[misc]
    return groups


def _name(member: object) -> str:
    if isinstance(member, QuarantinedEvent):
        return member.event_id
    assert isinstance(member, Described)
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
        self._quarantine = quarantine
        self._letters = dead_letters
        self._rules = rules
        self._base = source_base

    async def groups(self) -> FailureGroups:
        """Every failure group (see the module)."""
        found, at_least, missing = await self._read()
        ordered = sorted((g.group for g in found), key=lambda g: (-g.count, g.cause, g.id))
        return FailureGroups(groups=ordered, at_least=at_least, unanswered=missing)

    async def _read(self) -> tuple[list[_Group], bool, list[Unanswered]]:
        records, continuation, at_least = [], None, False
        while True:
            page = await self._quarantine.page(page_size=100, continuation=continuation)
            records += [r for r in page.items if not r.resolved and not r.discarded]
            continuation = page.continuation_token
            if continuation is None or len(records) >= QUARANTINE_LIMIT:
                at_least = continuation is not None
                break
        found = _grouped(
            "quarantine",
            None,
            [(r.reason, r.aggregate_type, r.action, r.quarantined_at, r) for r in records],
        )
        missing: list[Unanswered] = []
        for entity in self._letters.watched:
            try:
                letters, more = await self._letters.scan(entity)
            except Exception as exc:
                missing.append(unanswered(SERVICE_BUS, f"the dead letters at {entity.name}", exc))
                continue
            at_least = at_least or more
            items = [
                (
                    f"{d.letter.reason or ''}: {d.letter.description or ''}".strip(": "),
                    d.aggregate_type,
                    d.action,
                    enqueued(d.letter),
                    d,
                )
                for d in letters
            ]
            found += _grouped("dead letters", entity.name, items)
        return found, at_least, missing

    async def _group(self, group_id: str) -> _Group:
        found, _, _ = await self._read()
        for group in found:
            if group.group.id == group_id:
                return group
        raise NotFoundError("failure group", group_id)

    async def act(
        self,
        group_id: str,
        action: Literal["retry", "discard"],
        *,
        reason: str | None = None,
        preview: bool = False,
    ) -> GroupOutcome:
        """Retry (replay; for dead letters, resubmit) or discard the group's members, at most
        MAX_PER_CALL of them; with `preview`, what that would do, nothing done."""
        found = await self._group(group_id)
        group, members = found.group, found.members[:MAX_PER_CALL]
        remaining = len(found.members) - len(members)
        if group.source == "dead letters":
            outcome = await self._letters_act(group, members, action, reason, preview)
        else:
            outcome = await self._quarantine_act(group, members, action, reason, preview)
        outcome = outcome.model_copy(update={"remaining": outcome.remaining + remaining})
        if not preview:
            audit(
                f"groups.{action}",
                f"failure group {group.id} ({group.source}"
                f"{f' at {group.entity}' if group.entity else ''}: {group.cause}): "
                f"{outcome.done} of {outcome.matching} done, {len(outcome.failed)} failed, "
                f"{outcome.remaining} remaining" + (f"; reason: {reason}" if reason else ""),
                will_see=outcome.subscribers_will_see,
                group=group.id,
                done=outcome.done,
                remaining=outcome.remaining,
            )
        return outcome

    async def _letters_act(
        self,
        group: FailureGroup,
        members: list[QuarantinedEvent | Described],
        action: Literal["retry", "discard"],
        reason: str | None,
        preview: bool,
    ) -> GroupOutcome:
        entity = self._letters.entity(group.entity or "")
        numbers = tuple(m.letter.sequence_number for m in members if isinstance(m, Described))
        selection = Selection(sequence_numbers=numbers)
        verb = "resubmit" if action == "retry" else "discard"
        if preview:
            seen = await self._letters.preview(entity, selection, action=verb)
            return GroupOutcome(
                group=group,
                action=action,
                previewed=True,
                matching=seen.matching,
                remaining=0,
                subscribers_will_see=seen.subscribers_will_see,
                deliveries=seen.deliveries,
            )
        report = (
            await self._letters.resubmit(entity, selection)
            if action == "retry"
            else await self._letters.discard(entity, selection, reason=reason or "")
        )
        return GroupOutcome(
            group=group,
            action=action,
            previewed=False,
            matching=len(numbers),
            done=report.done,
            failed=[
                f"{h.event_id or h.sequence_number}: {h.failure}"
                for h in report.handled
                if h.failure
            ],
            remaining=report.remaining,
            subscribers_will_see=report.subscribers_will_see,
            deliveries=report.deliveries,
        )

    async def _quarantine_act(
        self,
        group: FailureGroup,
        members: list[QuarantinedEvent | Described],
        action: Literal["retry", "discard"],
        reason: str | None,
        preview: bool,
    ) -> GroupOutcome:
        records = [m for m in members if isinstance(m, QuarantinedEvent)]
        by = str(current_actor())
        sent = [
            to_message(r.event) if action == "retry" else notice_of_event(r.event, reason="", by=by)
            for r in records
            if isinstance(r.event, OutboxRecord)
        ]
        facts = [message_facts(m, base=self._base) for m in sent if m is not None]
        deliveries = received(await self._rules(), facts, self._subscriptions())
        done, failed = 0, []
        if not preview:
            for record in records:
                try:
                    if action == "retry":
                        result = await self._quarantine.replay(record.event_id)
                        if not result.resolved:
                            failed.append(f"{record.event_id}: still quarantined: {result.reason}")
                            continue
                    else:
                        await self._quarantine.discard(record.event_id, reason or "")
                    done += 1
                except Exception as exc:
                    failed.append(f"{record.event_id}: {type(exc).__name__}: {exc!s:.200}")
        what = (
            "sent again through the relay, each in its session under its own MessageId: a "
            "subscriber that received its quarantine notice applies it and what it held after it"
            if action == "retry"
            else "given up: a discard notice (OutboxEventDiscarded) each, in its session, to "
            "every subscription: the library's subscriber records an accepted gap and applies "
            "what it held after it"
        )
        will_see = (
            f"{len(records) if preview else done} quarantined event(s) {what}. As each "
            "subscription's rules decide: " + ("; ".join(d.text() for d in deliveries) or "-")
        )
        return GroupOutcome(
            group=group,
            action=action,
            previewed=preview,
            matching=len(records),
            done=done,
            failed=failed,
            remaining=0,
            subscribers_will_see=will_see,
            deliveries=deliveries,
        )

    def _subscriptions(self) -> list[str]:
        return [e.name for e in self._letters.watched if e.kind == "subscription"]
