"""The journey of one event (or of one aggregate's events): the first question on call
(docs/operating.md, "The first question: where did event X go?"; what it reads:
docs/operating-the-outbox.md). Each part is read on its own, bounded (`_dependencies.answered`):
one that does not answer is listed in `unanswered` and the rest is shown."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from typing import Any, TypeVar

from cosmos_outbox._mapper import (
    EVENT_TYPE,
    TRACEPARENT_PROPERTY,
    message_facts,
    read_feed,
    to_message,
)
from cosmos_outbox._model import Model, of_attributes
from cosmos_outbox._quarantine import QUARANTINE_TYPE, QuarantinedEvent, quarantined_event
from cosmos_outbox._records import NotAnEvent, OutboxRecord, Unreadable, trace_id
from cosmos_outbox._relay.scheduled import ScheduleState, schedule_state
from cosmos_outbox._subscription_rules import Delivery
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.operations._audit import what_event
from cosmos_outbox.operations._dead_letters import DeadLetterOperators
from cosmos_outbox.operations._deliveries import verdicts
from cosmos_outbox.operations._dependencies import (
    COSMOS_DB,
    SERVICE_BUS,
    Unanswered,
    answered,
    unanswered,
)
from cosmos_outbox.operations._failure_items import QUARANTINE_ENTITY
from cosmos_outbox.operations._failure_view import FailureView
from cosmos_outbox.operations._history import Step, SubscriberSight, history
from cosmos_outbox.operations._letters import Described, LetterSummary
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.operations._stored import aggregate_documents, of_aggregate
from cosmos_outbox.operations._watch import WatchRecord
from cosmos_outbox.ports import AsyncDocumentStore, LeaseBacklog, Page, TargetRuleCheck
from cosmos_outbox.subscriber._status import aggregate_versions, event_fate

__all__ = [
    "AggregateJourney",
    "DeadLetterSight",
    "EventJourney",
    "JourneyOperators",
    "QuarantineSight",
    "Step",
    "SubscriberAggregate",
    "SubscriberSight",
]

EVENT = "event"
S = TypeVar("S")
#: Per subscription, what its rules do with one event's message.
_Fates = dict[str, Delivery]


class QuarantineSight(Model):
    status: str
    reason: str
    quarantined_at: datetime | None
    replays: int
    discarded_at: datetime | None
    discarded_by: str | None
    discard_reason: str | None


class DeadLetterSight(LetterSummary):
    """One of the event's dead letters, and the subscription (or queue) that holds it."""

    entity: str


class EventJourney(Model):
    event_id: str
    aggregate_type: str | None
    aggregate_id: str | None
    action: str | None
    version: int | None
    created_at: datetime | None
    stored: bool
    #: `relayed`, `not relayed yet`, `quarantined` or `unknown`, and why
    relay: str
    relay_note: str
    quarantine: QuarantineSight | None
    dead_letters: list[DeadLetterSight]
    subscribers: list[SubscriberSight]
    summary: str
    #: the W3C trace the event was committed in (Application Insights' operation id): its stored
    #: document's, its quarantined copy's, or its dead letter's `traceparent`
    trace_id: str | None = None
    #: a scheduled event's due time and where it is (None: not a scheduled event)
    schedule: ScheduleState | None = None
    #: what happened to it, oldest first
    history: list[Step] = []
    #: the parts that could not be read (the rest is shown)
    unanswered: list[Unanswered] = []
    #: its failure records (OUTBOX_FAILURE_INGEST), in any state, each with its attempts and
    #: what was done to it (an event's journey; not an aggregate's); its quarantine's record
    #: (`entityKind` quarantine) only when its quarantine record is gone (`quarantine` says it)
    failures: list[FailureView] = []


class SubscriberAggregate(Model):
    """One subscriber's view of the aggregate: the last version it applied, what it holds and
    waits for, and the gaps it knows (quarantined) or accepted (given up); `known` False when
    the app does not know its container (or it did not answer)."""

    subscription: str
    projection_version: int | None
    held_versions: list[int] = []
    waiting_for: int | None = None
    quarantined_gaps: list[int] = []
    accepted_gaps: list[int] = []
    known: bool = True


class AggregateJourney(Model):
    aggregate_type: str
    aggregate_id: str
    events: list[EventJourney]
    subscribers: list[SubscriberAggregate]
    summary: str
    unanswered: list[Unanswered] = []


@dataclass
class _Context:
    """What the journey read once, shared by the events it describes."""

    leases: list[LeaseBacklog] | None
    leases_error: str | None
    letters: dict[str, list[Described]]
    watch: list[WatchRecord]
    unanswered: list[Unanswered]
    #: the topic's subscriptions and their rules as last read
    rules: TargetRuleCheck | None = None


class JourneyOperators:
    def __init__(
        self,
        parts: Parts,
        dead_letters: DeadLetterOperators,
        rules: Callable[[], Awaitable[TargetRuleCheck]] | None = None,
    ) -> None:
        self._parts = parts
        self._letters = dead_letters
        self._rules = rules

    async def _context(
        self, *, event_id: str | None = None, aggregate_id: str | None = None
    ) -> _Context:
        """What every journey of the call reads once: the leases, the dead letters that tell
        of the event (or the aggregate's: kept as data, read by its id; else the queues'
        first COUNT_LIMIT each), the watch and the subscriptions' rules."""
        missing: list[Unanswered] = []
        leases: list[LeaseBacklog] | None
        try:
            leases, why = await answered(COSMOS_DB, self._parts.backlog().estimate()), None
        except Exception as exc:  # no estimator, no lease container: said, not raised
            gap = unanswered(COSMOS_DB, "the relay's leases", exc)
            leases, why = None, gap.error
            if not isinstance(exc, NotImplementedError):
                missing.append(gap)
        letters: dict[str, list[Described]] = {}
        try:
            told = await self._letters.open_records_told(
                event_id=event_id, aggregate_id=aggregate_id
            )
        except Exception as exc:
            told = {}
            missing.append(unanswered(COSMOS_DB, "the failure records", exc))
        for entity in self._letters.watched if told is None else ():
            try:
                letters[entity.name], _ = await self._letters.scan(entity)
            except NotFoundError:
                letters[entity.name] = []
            except Exception as exc:
                missing.append(unanswered(SERVICE_BUS, f"the dead letters at {entity.name}", exc))
        letters.update(told or {})
        try:
            watch = await self._letters.watched_records()
        except Exception as exc:
            watch = []
            missing.append(unanswered(COSMOS_DB, "the dead letters' watch", exc))
        check = await self._rules() if self._rules is not None else None
        return _Context(leases, why, letters, watch, missing, check)

    def _fates(self, event: OutboxRecord | Unreadable | None, context: _Context) -> _Fates:
        """What each subscription's rules do with the event's message (none: not stored)."""
        if not isinstance(event, OutboxRecord) or context.rules is None:
            return {}
        facts = message_facts(to_message(event), base=self._parts.source_base)
        found = verdicts(context.rules, [facts], self._subscriptions())
        return {name: fates[0] for name, fates in found.items()}

    def _parse(self, document: Mapping[str, Any]) -> OutboxRecord | Unreadable | None:
        [item] = read_feed([document], legacy=self._parts.legacy)
        return None if isinstance(item, NotAnEvent) else item

    async def documents(
        self, aggregate_id: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        """One page of the documents where the aggregate's live (its state, its events not yet
        expired, its quarantine and idempotency records...; a transaction's partition for an
        aggregate named by its session id), as stored, system properties included; read only
        (the console's link from an event to its aggregate's documents)."""
        return await answered(
            COSMOS_DB,
            aggregate_documents(
                self._parts.store, aggregate_id, page_size=page_size, continuation=continuation
            ),
        )

    async def of_event(self, event_id: str) -> EventJourney:
        """Where one event went. NotFoundError when nothing anywhere knows it."""
        context = await self._context(event_id=event_id)
        document: dict[str, Any] | None = None
        quarantined: QuarantinedEvent | None = None
        try:
            document = await answered(COSMOS_DB, self._parts.store.find(EVENT_TYPE, event_id))
            try:
                quarantined = await answered(COSMOS_DB, self._parts.quarantine.get(event_id))
            except NotFoundError:
                quarantined = None
        except Exception as exc:
            if not context.letters and not context.watch:
                raise
            context.unanswered.append(unanswered(COSMOS_DB, "the event's document", exc))
        event = self._parse(document) if document is not None else None
        found = await self._journey(
            event_id,
            event,
            quarantined,
            context,
            schedule_state(document) if document is not None else None,
        )
        unread: Exception | None = None
        try:
            failures = await self._letters.failures_of_event(event_id)
        except Exception as exc:
            failures, unread = [], exc
            found.unanswered.append(unanswered(COSMOS_DB, "the event's failure records", exc))
        if quarantined is not None:  # said once: its quarantine (its record is the same one)
            failures = [f for f in failures if f.entity_kind != QUARANTINE_ENTITY]
        if failures:
            found = found.model_copy(update={"failures": failures})
        known = (
            bool(failures)
            or event is not None
            or quarantined is not None
            or bool(found.dead_letters)
            or any(r.event_id == event_id for r in context.watch)
        )
        if not known and all(s.state in ("not received", "unknown") for s in found.subscribers):
            if unread is not None:  # its failure records may know it: not a 404, the 503 said
                raise unread
            raise NotFoundError(EVENT, event_id)
        return found

    async def of_aggregate(self, aggregate_type: str, aggregate_id: str) -> AggregateJourney:
        """Where each of an aggregate's events went (the aggregate named by its session id),
        and each subscriber's view of it."""
        context = await self._context(aggregate_id=aggregate_id)
        stored: dict[str, OutboxRecord | Unreadable] = {}
        schedules: dict[str, ScheduleState | None] = {}
        quarantined: dict[str, QuarantinedEvent] = {}
        try:
            for document in await answered(
                COSMOS_DB, of_aggregate(self._parts.store, EVENT_TYPE, aggregate_id)
            ):
                event = self._parse(document)
                if event is not None and event.aggregate_type in (aggregate_type, None):
                    stored[event.event_id] = event
                    schedules[event.event_id] = schedule_state(document)
            for document in await answered(
                COSMOS_DB, of_aggregate(self._parts.store, QUARANTINE_TYPE, aggregate_id)
            ):
                entry = quarantined_event(document, legacy=self._parts.legacy)
                if entry.aggregate_type in (aggregate_type, None) and entry.aggregate_id in (
                    aggregate_id,
                    entry.partition_key,
                ):
                    quarantined[entry.event_id] = entry
        except Exception as exc:
            if not context.letters:
                raise
            context.unanswered.append(unanswered(COSMOS_DB, "the aggregate's documents", exc))
        told: list[Described | WatchRecord] = [*chain(*context.letters.values()), *context.watch]
        ids = set(stored) | set(quarantined)
        ids |= {
            t.event_id
            for t in told
            if t.event_id and (t.aggregate_type, t.aggregate_id) == (aggregate_type, aggregate_id)
        }
        journeys = [
            await self._journey(i, stored.get(i), quarantined.get(i), context, schedules.get(i))
            for i in ids
        ]
        journeys.sort(key=lambda j: (j.schedule is not None, j.version or 0, _due(j), j.event_id))
        subscribers = await self._each_subscriber(
            context,
            lambda name, store: _subscriber_aggregate(name, store, aggregate_id),
            lambda name: SubscriberAggregate(
                subscription=name, projection_version=None, known=False
            ),
        )
        return AggregateJourney(
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            events=journeys,
            subscribers=subscribers,
            summary=_aggregate_summary(aggregate_type, aggregate_id, journeys, subscribers),
            unanswered=context.unanswered,
        )

    def _subscriptions(self) -> list[str]:
        """Every watched subscription and every subscriber's the app knows, by name."""
        names = {e.name for e in self._letters.watched if e.kind == "subscription"}
        return sorted(names | set(self._parts.subscribers()))

    async def _journey(
        self,
        event_id: str,
        event: OutboxRecord | Unreadable | None,
        quarantined: QuarantinedEvent | None,
        context: _Context,
        schedule: ScheduleState | None = None,
    ) -> EventJourney:
        letters = [
            (name, d)
            for name, found in context.letters.items()
            for d in found
            if d.event_id == event_id
        ]
        watch = [r for r in context.watch if r.event_id == event_id]
        source: Any = event or (quarantined.event if quarantined else None)
        # what it is: its stored (or quarantined) copy's word, else its dead letter's, its watch's
        told = [source, *(d for _, d in letters[:1]), *watch[:1]]
        named = next((t for t in told if getattr(t, "aggregate_id", None) is not None), told[-1])
        aggregate_type, aggregate_id, action, version = (
            getattr(named, field, None)
            for field in ("aggregate_type", "aggregate_id", "action", "version")
        )
        relay, note = self._relayed(event_id, event, quarantined, context)
        if schedule is not None and (relay != "quarantined" or schedule.state == "cancelled"):
            relay, note = _scheduled_relay(schedule, relay, note)
        fates = self._fates(event, context)
        sights = [
            _ruled(sight, fates.get(sight.subscription))
            for sight in await self._sights(event_id, aggregate_id, version, watch, context)
        ]
        journey = EventJourney(
            event_id=event_id,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            action=action,
            version=version,
            created_at=getattr(event, "created_at", None),
            stored=event is not None,
            relay=relay,
            relay_note=note,
            quarantine=None if quarantined is None else of_attributes(QuarantineSight, quarantined),
            dead_letters=[
                of_attributes(DeadLetterSight, LetterSummary.of(d), entity=name)
                for name, d in letters
            ],
            subscribers=sights,
            summary="",
            trace_id=_trace_of(source, letters),
            schedule=schedule,
            history=history(event, quarantined, letters, watch, sights),
            unanswered=list(context.unanswered),
        )
        return journey.model_copy(
            update={
                "summary": _summary(journey, quarantined, letters, self._parts.event_ttl_seconds)
            }
        )

    async def _each_subscriber(
        self,
        context: _Context,
        read: Callable[[str, AsyncDocumentStore], Coroutine[Any, Any, S]],
        unknown: Callable[[str], S],
    ) -> list[S]:
        """`read` of each subscription's subscriber (`_subscriptions`) in its container;
        `unknown` where the app does not know it, or its container did not answer (said in
        `context.unanswered`)."""
        stores = self._parts.subscribers()
        found = []
        for name in self._subscriptions():
            store = stores.get(name)
            try:
                found.append(
                    unknown(name) if store is None else await answered(COSMOS_DB, read(name, store))
                )
            except Exception as exc:
                context.unanswered.append(
                    unanswered(COSMOS_DB, f"subscriber {name}'s container", exc)
                )
                found.append(unknown(name))
        return found

    async def _sights(
        self,
        event_id: str,
        aggregate_id: str | None,
        version: int | None,
        watch: list[WatchRecord],
        context: _Context,
    ) -> list[SubscriberSight]:
        """What each watched subscription's subscriber did with the event (unknown where the
        app does not know its container, or it did not answer); `vanished` where a dead letter
        of it left its queue without being applied."""
        sights = await self._each_subscriber(
            context,
            lambda name, store: _sight(name, store, event_id, aggregate_id, version),
            lambda name: SubscriberSight(
                subscription=name, state="unknown", projection_version=None
            ),
        )
        gone = {r.subscription for r in watch if r.fate == "vanished"}
        return [
            sight.model_copy(
                update={
                    "state": "vanished",
                    "recover": "its dead letter left the queue without being applied: "
                    "re-drive its aggregate to this subscription (the status's vanished "
                    "dead letters say how), or release the version",
                }
            )
            if sight.subscription in gone and sight.state in ("not received", "held")
            else sight
            for sight in sights
        ]

    def _relayed(
        self,
        event_id: str,
        event: OutboxRecord | Unreadable | None,
        quarantined: QuarantinedEvent | None,
        context: _Context,
    ) -> tuple[str, str]:
        if quarantined is not None and quarantined.status != "resolved":
            return "quarantined", f"the relay set it aside: {quarantined.reason}"
        if event is None:
            return "unknown", "its document is not stored, so its lease cannot be read for it"
        if context.leases is None:
            return "unknown", f"the relay's leases could not be read ({context.leases_error})"
        for lease in context.leases:
            if event_id in lease.pending_ids:
                return (
                    "not relayed yet",
                    f"lease {lease.lease} has it among the {lease.pending} change(s) after its "
                    "continuation",
                )
        if context.leases and all(lease.pending_ids_complete for lease in context.leases):
            return "relayed", "every lease's continuation is past it"
        return (
            "unknown",
            "the backlog estimator did not read every lease's changes to the end (a long "
            "backlog, or no leases yet)",
        )


def _ruled(sight: SubscriberSight, fate: Delivery | None) -> SubscriberSight:
    """`sight` with what the subscription's rules do with the event's message."""
    if fate is None:
        return sight
    update = {"rules": f"unknown: {fate.why}" if fate.verdict == "unknown" else fate.verdict}
    if fate.verdict == "drops" and sight.state in ("not received", "unknown"):
        update["state"] = "not for it"
    return sight.model_copy(update=update)


def _trace_of(source: object, letters: Sequence[tuple[str, Described]]) -> str | None:
    """The event's trace id: from its stored (or quarantined) copy, else from a dead letter's
    `traceparent` property (the relay sets it on every message)."""
    found = trace_id(getattr(source, "traceparent", None))
    for _, letter in letters:
        found = found or trace_id(letter.letter.application_properties.get(TRACEPARENT_PROPERTY))
    return found


async def _sight(
    name: str,
    store: AsyncDocumentStore,
    event_id: str,
    aggregate_id: str | None,
    version: int | None,
) -> SubscriberSight:
    """What subscriber `name` (its projection container `store`) did with the event."""
    fate = await event_fate(store, event_id, aggregate_id=aggregate_id, version=version)
    return SubscriberSight(
        subscription=name,
        state=fate.state,
        projection_version=fate.last_applied,
        applied_at=fate.processed_at if fate.state == "applied" else None,
        waiting_for=fate.last_applied + 1 if fate.state == "held" else None,
        given_up_by=fate.given_up_by,
    )


async def _subscriber_aggregate(
    name: str, store: AsyncDocumentStore, aggregate_id: str
) -> SubscriberAggregate:
    """Subscriber `name`'s view of the aggregate (its container is partitioned by the session
    id: the aggregate id it sees)."""
    last, held, quarantined, accepted = await aggregate_versions(store, aggregate_id)
    return SubscriberAggregate(
        subscription=name,
        projection_version=last,
        held_versions=held,
        waiting_for=last + 1 if held else None,
        quarantined_gaps=quarantined,
        accepted_gaps=accepted,
    )


def _due(journey: EventJourney) -> float:
    return journey.schedule.due_at.timestamp() if journey.schedule is not None else 0.0


def _scheduled_relay(schedule: ScheduleState, relay: str, note: str) -> tuple[str, str]:
    """What the relay did with a scheduled event (`relay`, `note`: what its leases say)."""
    due = schedule.due_at.isoformat()
    if schedule.state == "cancelled":
        return "cancelled", f"cancelled at {schedule.cancelled_at}, before its release: never sent"
    if schedule.state == "released":
        return relay, f"released at {schedule.released_at} (due {due}); {note}"
    if schedule.overdue:
        return (
            "overdue",
            f"due {due} and not released: its release has not come (the relay's "
            "release_due_events not running, or its release dead-lettered at the schedule "
            "queue: resubmit it, or re-drive the event)",
        )
    if relay == "relayed":
        return "scheduled", f"due {due}: the relay scheduled its release; sent then"
    return "scheduled", f"due {due}; {note}"


def _summary(
    journey: EventJourney,
    q: QuarantinedEvent | None,
    letters: Sequence[tuple[str, Described]],
    ttl: int,
) -> str:
    parts: list[str] = []
    what = what_event(journey.aggregate_type, journey.aggregate_id, journey.version, journey.action)
    parts.append(f"event {journey.event_id} ({what})")
    if journey.schedule is not None:
        parts.append(f"scheduled for {journey.schedule.due_at.isoformat()}")
    parts.append(
        "stored"
        if journey.stored
        else f"not stored (removed by its TTL, {ttl} s after it was written, or never written)"
    )
    parts.append(
        journey.relay if journey.schedule is None else f"{journey.relay} ({journey.relay_note})"
    )
    if q is not None:
        if q.discarded:
            parts.append(f"discarded by {q.discarded_by}: {q.discard_reason}")
        elif q.resolved:
            parts.append("replayed from the quarantine")
        else:
            parts.append(
                f"in the quarantine ({q.reason}): cosmos-outbox quarantine replay "
                f"{q.event_id}, or discard it"
            )
    for name, letter in letters:
        parts.append(
            f"dead-lettered at {name} (#{letter.letter.sequence_number}, "
            f"{letter.letter.reason}): cosmos-outbox deadletters resubmit {name} "
            f"{letter.letter.sequence_number}"
        )
    for sight in journey.subscribers:
        extra = f", waiting for version {sight.waiting_for}" if sight.waiting_for else ""
        if sight.state == "vanished" and sight.recover:
            extra += f" ({sight.recover})"
        parts.append(f"{sight.subscription}: {sight.state}{extra}")
    for gap in journey.unanswered:
        parts.append(f"{gap.part} not read ({gap.dependency} did not answer)")
    return "; ".join(parts)


def _aggregate_summary(
    aggregate_type: str,
    aggregate_id: str,
    journeys: Sequence[EventJourney],
    subscribers: Sequence[SubscriberAggregate],
) -> str:
    parts = [f"{aggregate_type} {aggregate_id}: {len(journeys)} event(s) known"]
    quarantined = [j.version for j in journeys if j.relay == "quarantined"]
    if quarantined:
        parts.append(f"quarantined: versions {quarantined}")
    lettered = sorted({j.version or 0 for j in journeys if j.dead_letters})
    if lettered:
        parts.append(f"dead-lettered: versions {lettered}")
    for s in subscribers:
        if not s.known:
            parts.append(f"{s.subscription}: its subscriber unknown to this app")
            continue
        text = f"{s.subscription} at version {s.projection_version}"
        if s.held_versions:
            text += f", holding {s.held_versions} waiting for version {s.waiting_for}"
        if s.accepted_gaps:
            text += f", gave up {s.accepted_gaps}"
        parts.append(text)
    return "; ".join(parts)
