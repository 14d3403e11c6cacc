"""An honest re-drive: stored events sent again, and a report of what reached the topic and what
subscribers will apply, never a bare "sent". Each event goes out under a MessageId of its own,
`uuid5("<event id>#<re-drive id>")` (the re-drive id drawn once, carried page to page by the
continuation token): docs/operating-the-outbox.md says why and what each subscription receives.
A discarded event is not re-driven; a scheduled one keeps its due time. A page at a time, per
aggregate in version order, through the relay (`cosmos_outbox._relay.forwarding.Relay`), so
events are sent as the change-feed trigger sends them."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from cosmos_outbox._mapper import REDRIVE_PROPERTY, TARGET_PROPERTY, message_facts, to_message
from cosmos_outbox._model import Model, of_attributes
from cosmos_outbox._quarantine import QUARANTINE_TYPE, discarded_event_ids
from cosmos_outbox._records import OutboxMessage, OutboxRecord, Unreadable
from cosmos_outbox.errors import (
    DependencyUnavailableError,
    InvalidContinuationError,
    PublishFailedError,
)
from cosmos_outbox.http._paging import Cursor
from cosmos_outbox.operations._audit import audit
from cosmos_outbox.operations._dead_letters import DeadLetterOperators
from cosmos_outbox.operations._deliveries import verdicts
from cosmos_outbox.operations._dependencies import COSMOS_DB, SERVICE_BUS, answered
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.operations._stored import of_aggregate, stored_events
from cosmos_outbox.ports import AsyncDocumentStore, TargetRuleCheck
from cosmos_outbox.subscriber._bookkeeping import inbox_id, last_version
from cosmos_outbox.telemetry import error_type

if TYPE_CHECKING:
    from cosmos_outbox._relay.forwarding import RelayReport

__all__ = [
    "EventSummary",
    "RedriveOperators",
    "RedrivePage",
    "RedrivePreview",
    "RedriveScope",
    "SubscriberCounts",
    "redrive_message_id",
    "scope_of",
]

#: Namespace of the re-driven messages' MessageIds.
REDRIVE_NAMESPACE = uuid.UUID("5e8a1c3f-2d7b-5a96-b4e0-7c1f9a2d6b38")
DEFAULT_PAGE_SIZE = 100


def redrive_message_id(event_id: str, redrive_id: str) -> str:
    """The MessageId of `event_id` in re-drive `redrive_id`."""
    return str(uuid.uuid5(REDRIVE_NAMESPACE, f"{event_id}#{redrive_id}"))


def rewrite(redrive_id: str, target: str | None) -> Callable[[OutboxMessage], OutboxMessage]:
    """How the re-drive changes each event's message (see the module)."""

    def rewritten(message: OutboxMessage) -> OutboxMessage:
        properties = dict(message.application_properties)
        properties[REDRIVE_PROPERTY] = redrive_id
        if target is not None:
            properties[TARGET_PROPERTY] = target
        return dataclasses.replace(
            message,
            message_id=redrive_message_id(message.message_id, redrive_id),
            event_id=message.event_id or message.message_id,
            application_properties=properties,
        )

    return rewritten


class SubscriberCounts(Model):
    """What one subscription of the topic receives of a re-drive, as its rules decide
    (`_deliveries`), and, when the app knows its subscriber's projection container, what that
    subscriber does with what it receives: applied already (dropped), held already (dropped:
    applied when its gap closes), to apply. `known` False: a subscription whose subscriber the
    app does not know (what it does with the messages is its own)."""

    subscription: str
    already_applied: int = 0
    held: int = 0
    to_apply: int = 0
    known: bool = True
    #: messages it receives (so far, or in all for a preview)
    receives: int = 0
    #: messages whose fate its rules do not settle (never counted as received), and why
    unknown: int = 0
    why_unknown: str | None = None


class EventSummary(Model):
    """A stored event in a re-drive's preview."""

    event_id: str
    aggregate_type: str | None
    aggregate_id: str | None
    version: int | None
    action: str | None
    created_at: datetime | None


#: Events a preview shows one by one, and counts the subscribers' outcomes over at most.
PREVIEW_ITEMS = 10
PREVIEW_COUNTED = 1000


class RedrivePreview(Model):
    """What a re-drive would send, before it is confirmed: the stored events in its scope (how
    many, of how many aggregates, the first of them), those it leaves out (discarded ones;
    cancelled scheduled events), how many pages, and per subscription what it receives and what
    its subscriber would do (over the first PREVIEW_COUNTED events). Nothing is sent."""

    since: datetime
    aggregate_type: str | None
    aggregate_id: str | None
    subscription: str | None
    events: int
    aggregates: int
    pages: int
    page_size: int
    discarded: int
    scheduled: int
    cancelled: int
    first: list[EventSummary]
    subscriptions: list[SubscriberCounts]
    counted_over: int
    subscribers_will_see: str


@dataclass
class RedriveState:
    """What the continuation token carries from page to page."""

    redrive_id: str
    scope: list[str | None]
    after: list[Any] | None = None
    done: int = 0
    accepted: int = 0
    quarantined: int = 0
    subscribers: dict[str, list[int]] = field(default_factory=dict)
    scheduled: int = 0
    cancelled: int = 0
    #: per subscription, why some of its messages' fate is unknown
    unknown_why: dict[str, str] = field(default_factory=dict)


class RedrivePage(Model):
    """A page of a re-drive: never a bare "sent". `accepted`: messages the topic accepted as
    new messages (MessageIds of their own: none can be dropped as a duplicate), so far;
    `quarantined`: events set aside again; what subscribers will apply, per subscriber the app
    knows, and what subscribers will see."""

    redrive_id: str
    #: stored events in the re-drive's scope (every page)
    events: int
    #: handled so far (this page included)
    done: int
    #: this page: events handled, messages the topic accepted, events quarantined
    page_events: int
    page_accepted: int
    page_quarantined: int
    #: so far: messages the topic accepted (new MessageIds: none dropped as a duplicate)
    accepted: int
    quarantined: int
    subscription: str | None
    subscribers: list[SubscriberCounts]
    subscribers_will_see: str
    continuation_token: str | None
    has_more: bool = False
    #: so far: scheduled events not released yet (their release scheduled again for their due
    #: time), and cancelled ones (not re-driven: never sent)
    scheduled: int = 0
    cancelled: int = 0


def redrive_key(event: OutboxRecord | Unreadable) -> tuple[str, int, str]:
    """A re-drive's order: per aggregate, in version order."""
    return (event.aggregate_id or "", event.version or 0, event.event_id)


class RedriveScope(TypedDict, total=False):
    """Which stored events a re-drive sends, besides those created at or after its `since`: of
    one aggregate type (and one aggregate of it), to one watched subscription (else to the
    topic). What the re-drive's preview, its pages and its bulk operation take."""

    aggregate_type: str | None
    aggregate_id: str | None
    subscription: str | None


def scope_of(
    aggregate_type: str | None = None,
    aggregate_id: str | None = None,
    subscription: str | None = None,
) -> tuple[str | None, str | None, str | None]:
    """A `RedriveScope`'s values, what it leaves out None: `scope_of(**scope)`."""
    return aggregate_type, aggregate_id, subscription


class RedriveOperators:
    """Re-drive over the outbox's store and relay (`relay()`: its `relay(items, rewrite=...)`),
    its paging tokens (`tokens`), and the projection containers of the subscribers the app
    knows (`subscribers()`, by subscription)."""

    def __init__(
        self,
        parts: Parts,
        dead_letters: DeadLetterOperators,
        rules: Callable[[], Awaitable[TargetRuleCheck]],
    ) -> None:
        self._parts = parts
        self._letters = dead_letters
        self._tokens = parts.tokens.redrive
        #: the topic's subscriptions and their rules as last read (the status keeps them)
        self._rules = rules

    def _open(self, token: str, scope: list[str | None]) -> RedriveState:
        cursor = self._tokens.decode(token)
        try:
            state = RedriveState(**json.loads(cursor.store_token))
        except (TypeError, ValueError):
            raise InvalidContinuationError("the re-drive token is damaged") from None
        if state.scope != scope:
            raise InvalidContinuationError(
                "the continuation token is of another re-drive (since, aggregate or "
                "subscription differ)"
            )
        return state

    def target(self, subscription: str | None) -> str | None:
        """The watched subscription named (NotFoundError: not watched), None: the topic."""
        return None if subscription is None else self._letters.entity(subscription).name

    async def scope(
        self,
        since: datetime,
        aggregate_type: str | None,
        aggregate_id: str | None,
        *,
        until: datetime | None = None,
    ) -> tuple[list[OutboxRecord | Unreadable], int]:
        """The stored events a re-drive of this scope sends (created by `until`, if given), in
        its order (`redrive_key`), and how many discarded ones it leaves out."""
        discarded = discarded_event_ids(
            await answered(
                COSMOS_DB, of_aggregate(self._parts.store, QUARANTINE_TYPE, aggregate_id)
            )
        )
        found = await answered(
            COSMOS_DB,
            stored_events(
                self._parts.store,
                since,
                aggregate_type=aggregate_type,
                aggregate_id=aggregate_id,
                legacy=self._parts.legacy,
                until=until,
            ),
        )
        kept = sorted((e for e in found if e.event_id not in discarded), key=redrive_key)
        return kept, len(found) - len(kept)

    async def preview(
        self,
        since: datetime,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        **scope: Unpack[RedriveScope],
    ) -> RedrivePreview:
        """What a re-drive of this scope would send (see RedrivePreview); nothing is sent.
        Refused as the re-drive would be (NotFoundError: a subscription not watched)."""
        aggregate_type, aggregate_id, subscription = scope_of(**scope)
        subscription = self.target(subscription)
        events, discarded = await self.scope(since, aggregate_type, aggregate_id)
        records = [e for e in events if isinstance(e, OutboxRecord)]
        cancelled = sum(e.cancelled_at is not None for e in records)
        scheduled = sum(
            e.deliver_at is not None and e.cancelled_at is None and e.released_at is None
            for e in records
        )
        sent = len(events) - cancelled
        state = RedriveState(redrive_id="preview", scope=[])
        counted = events[:PREVIEW_COUNTED]
        counts = await self._count_subscribers(events, subscription, state, read=PREVIEW_COUNTED)
        return RedrivePreview(
            since=since,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            subscription=subscription,
            events=len(events),
            aggregates=len({(e.aggregate_type, e.aggregate_id) for e in events}),
            pages=-(-len(events) // page_size),
            page_size=page_size,
            discarded=discarded,
            scheduled=scheduled,
            cancelled=cancelled,
            first=[
                of_attributes(EventSummary, e, created_at=getattr(e, "created_at", None))
                for e in events[:PREVIEW_ITEMS]
            ],
            subscriptions=counts,
            counted_over=len(counted),
            subscribers_will_see=_sent_as(
                f"{sent} message(s) {_where(subscription)}", counts, len(counted)
            ),
        )

    async def page(
        self,
        since: datetime,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        continuation: str | None = None,
        **scope: Unpack[RedriveScope],
    ) -> RedrivePage:
        """One page of a re-drive of the stored events created at or after `since` (of one
        aggregate type, and one aggregate of it, if given; to one watched subscription if
        given: NotFoundError for another), the first or the one `continuation` names."""
        from cosmos_outbox.http import bounded

        aggregate_type, aggregate_id, subscription = scope_of(**scope)
        subscription = self.target(subscription)
        named = [since.isoformat(), aggregate_type, aggregate_id, subscription]
        state = (
            self._open(continuation, named)
            if continuation
            else RedriveState(redrive_id=str(uuid.uuid4()), scope=named)
        )
        events, _ = await self.scope(since, aggregate_type, aggregate_id)
        after = tuple(state.after) if state.after is not None else None
        pending = [e for e in events if after is None or redrive_key(e) > after]
        page = pending[:page_size]
        try:
            report = await answered(
                SERVICE_BUS,
                self._parts.relay().relay(page, rewrite=rewrite(state.redrive_id, subscription)),
                seconds=max(1.0, bounded.bound_in_force() * 0.9),
            )
        except DependencyUnavailableError:
            raise  # its own wait, naming Service Bus: a 503 that says so, not a failed send
        except Exception as exc:
            raise PublishFailedError(f"re-drive failed to send: {error_type(exc)}") from exc
        counts = await self._count_subscribers(page, subscription, state)
        state.done += len(page)
        state.accepted += report.sent
        state.quarantined += len(report.quarantined)
        state.scheduled += report.scheduled
        state.cancelled += report.cancelled
        if page:
            state.after = list(redrive_key(page[-1]))
        more = len(pending) > len(page)
        token = (
            self._tokens.encode(
                Cursor(
                    store_token=json.dumps(dataclasses.asdict(state), separators=(",", ":")),
                    page=max(1, state.done),
                )
            )
            if more
            else None
        )
        result = of_attributes(  # the totals so far are the state's
            RedrivePage,
            state,
            events=state.done + len(pending) - len(page),
            page_events=len(page),
            page_accepted=report.sent,
            page_quarantined=len(report.quarantined),
            subscription=subscription,
            subscribers=counts,
            subscribers_will_see=_will_see(state, subscription, counts),
            continuation_token=token,
            has_more=token is not None,
        )
        _audit_page(
            state, since, (aggregate_type, aggregate_id, subscription), page, report, result
        )
        return result

    async def _count_subscribers(
        self,
        page: list[OutboxRecord | Unreadable],
        subscription: str | None,
        state: RedriveState,
        *,
        read: int | None = None,
    ) -> list[SubscriberCounts]:
        """Per subscription of the topic (and every watched one, every subscriber's the app
        knows): what it receives of the page's messages as its rules decide (`_deliveries`:
        unknown where they do not settle it), and, for a subscriber whose container the app
        knows, which of those it applied already, holds, or will apply (over the first `read`
        events); added to the totals."""
        stores = self._parts.subscribers()
        sendable = [e for e in page if isinstance(e, OutboxRecord) and e.cancelled_at is None]
        message = rewrite(state.redrive_id, subscription)
        facts = [
            message_facts(message(to_message(e)), base=self._parts.source_base) for e in sendable
        ]
        names = {e.name for e in self._letters.watched if e.kind == "subscription"} | set(stores)
        for name, fates in verdicts(await self._rules(), facts, sorted(names)).items():
            totals = state.subscribers.setdefault(name, [0] * 5)
            totals.extend([0] * (5 - len(totals)))
            taken = [e for e, f in zip(sendable, fates, strict=True) if f.verdict == "receives"]
            unsure = [f.why for f in fates if f.verdict == "unknown"]
            totals[3], totals[4] = totals[3] + len(taken), totals[4] + len(unsure)
            if unsure:
                state.unknown_why.setdefault(name, unsure[0])
            if (store := stores.get(name)) is not None:
                await _count_applied(store, taken[:read] if read else taken, totals)
        return [
            SubscriberCounts(
                subscription=name,
                already_applied=totals[0],
                held=totals[1],
                to_apply=totals[2],
                known=name in stores,
                receives=totals[3],
                unknown=totals[4],
                why_unknown=state.unknown_why.get(name),
            )
            for name, totals in sorted(state.subscribers.items())
        ]


async def _count_applied(
    store: AsyncDocumentStore, events: list[OutboxRecord], totals: list[int]
) -> None:
    """Of `events` (those a subscriber receives), add to `totals` how many it applied already
    (0), holds (1) and will apply (2), as its projection container says."""
    versions: dict[str, int] = {}
    for event in events:
        aggregate = event.aggregate_id
        if event.deliver_at is not None:  # no version: its inbox record says
            seen = await store.read(aggregate, inbox_id(event.event_id)) is not None
            totals[0 if seen else 2] += 1
            continue
        if aggregate not in versions:
            versions[aggregate] = last_version(await store.read(aggregate, aggregate))
        if event.version <= versions[aggregate]:
            totals[0] += 1
        elif await store.read(aggregate, inbox_id(event.event_id)) is not None:
            totals[1] += 1
        else:
            totals[2] += 1


def _per_subscription(counts: list[SubscriberCounts], counted: int | None = None) -> str:
    """Each subscription: what its rules give it, and what its subscriber does with that."""
    parts = []
    for c in counts:
        text = f"{c.subscription} receives {c.receives}"
        if c.unknown:
            # the same words as every other answer's (`Received.text`): "unknown", and why
            text += f" and {c.unknown} unknown ({c.why_unknown})"
        if not c.known:
            text += ", its subscriber unknown to this app"
        elif c.receives:
            over = f" of the first {counted}" if counted is not None else ""
            text += (
                f"{over}: {c.to_apply} to apply, {c.already_applied} applied already (dropped), "
                f"{c.held} held already (applied when its gap closes)"
            )
        parts.append(text)
    return "; ".join(parts)


def _where(subscription: str | None) -> str:
    return (
        f"targeted at subscription {subscription} (outboxTarget)"
        if subscription
        else "to the topic"
    )


def _will_see(state: RedriveState, subscription: str | None, counts: list[SubscriberCounts]) -> str:
    text = _sent_as(f"{state.accepted} new message(s) so far {_where(subscription)}", counts)
    if state.quarantined:
        text += (
            f"; {state.quarantined} event(s) quarantined again, each with its "
            "OutboxEventQuarantined notice"
        )
    if state.scheduled:
        text += (
            f"; {state.scheduled} scheduled event(s) not due yet: their release scheduled again "
            "for their due time, sent then, once"
        )
    if state.cancelled:
        text += f"; {state.cancelled} cancelled scheduled event(s) not re-driven: never sent"
    return text


def operation_will_see(subscription: str | None, *, sent: int, failed: int) -> str:
    """What subscribers will see of a re-drive operation, as its counts say (the preview says
    it per subscription)."""
    text = _sent_as(f"{sent} new message(s) so far {_where(subscription)}", None)
    if failed:
        text += f"; {failed} event(s) not sent (quarantined again, or failed: see the failures)"
    return text


def _sent_as(what: str, counts: list[SubscriberCounts] | None, counted: int | None = None) -> str:
    """What subscribers will see of `what` a re-drive sends, as each subscription's rules
    decide (`counts` None: not counted here, its preview says)."""
    return (
        f"{what}, in each aggregate's session in version order, each with a MessageId of its "
        "own (outboxRedrive) and the event id unchanged (cloudEvents_id): a subscriber that "
        "deduplicates on the event id applies only what it has not applied yet; one that "
        "deduplicates on MessageId takes each for a new message. "
        + (
            f"As each subscription's rules decide: "
            f"{_per_subscription(counts, counted) or 'no subscription known'}"
            if counts is not None
            else "What each subscription receives of it: the re-drive's preview"
        )
    )


def _audit_page(
    state: RedriveState,
    since: datetime,
    scope: tuple[str | None, str | None, str | None],
    page: Sequence[object],
    report: RelayReport,
    result: RedrivePage,
) -> None:
    """The audit line of one page of a re-drive (what was sent, what subscribers will see)."""
    aggregate_type, aggregate_id, subscription = scope
    scope_text = " ".join(p for p in (aggregate_type, aggregate_id) if p)
    audit(
        "redrive",
        f"re-drive {state.redrive_id} since {since.isoformat()}"
        f"{f' of {scope_text}' if scope_text else ''}"
        f"{f' to subscription {subscription}' if subscription else ''}: page of "
        f"{len(page)} event(s), {report.sent} accepted by the topic as new messages, "
        f"{len(report.quarantined)} quarantined; {state.done} of {result.events} done",
        will_see=result.subscribers_will_see,
        redrive_id=state.redrive_id,
        since=since.isoformat(),
        aggregate_type=aggregate_type,
        aggregate_id=aggregate_id,
        subscription=subscription,
        events=len(page),
        accepted=report.sent,
        quarantined=len(report.quarantined),
        done=state.done,
        total=result.events,
    )
