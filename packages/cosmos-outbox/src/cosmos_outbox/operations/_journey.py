"""The journey of one event (or of one aggregate's events): the first question on call.

For an event: its document (or that it is not stored: TTL removed it after EVENT_TTL_SECONDS,
or it never was), relayed or not (the backlog estimator's read of the relay's leases: an event
among the changes after a lease's continuation is not relayed yet; when every lease's changes
were read to the end and it is not among them, every continuation is past it), its quarantine
record (quarantined, resolved or discarded: by whom and why), the watched subscriptions where it
is dead-lettered (and why), and, for each subscriber whose projection container the app knows
(OUTBOX_SUBSCRIPTIONS `name=container`), whether it applied it (its inbox record, or a
projection version at or past the event's), holds it (and which version it waits for), gave it
up (an accepted gap), or has not received it. For an aggregate: the same for each of its
events (stored, quarantined or dead-lettered), and each subscriber's projection version, held
versions and gaps. A summary line says it in words, with the command that acts on it.

A scheduled event's journey says its due time and where it is (`schedule`): waiting (for its due
time, or overdue: its release has not come), released (then relayed as any event) or cancelled
(never sent); a subscriber applied it when its inbox record says so (it has no version).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cosmos_outbox._mapper import EVENT_TYPE, read_feed
from cosmos_outbox._quarantine import QUARANTINE_TYPE, QuarantinedEvent
from cosmos_outbox._records import (
    NotAnEvent,
    OutboxRecord,
    Unreadable,
    trace_id,
)
from cosmos_outbox._relay.releases import ScheduleState, schedule_state
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.operations._dead_letters import DeadLetterOperators, Described
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.operations._stored import partition_documents, partition_of
from cosmos_outbox.ports import AsyncDocumentStore, LeaseBacklog, Page
from cosmos_outbox.subscriber._bookkeeping import (
    ACCEPTED_GAP_TYPE,
    GAP_TYPE,
    HELD_TYPE,
    INBOX_TYPE,
    gap_id,
    held_id,
    inbox_id,
    last_version,
)
from cosmos_outbox.telemetry import error_type

__all__ = ["AggregateJourney", "EventJourney", "JourneyOperators", "SubscriberSight"]

EVENT = "event"


@dataclass(frozen=True)
class SubscriberSight:
    """What one subscriber did with the event: `applied`, `held` (waiting for
    `waiting_for`), `given up` (an accepted gap), or `not received`."""

    subscription: str
    state: str
    projection_version: int
    applied_at: str | None = None
    waiting_for: int | None = None
    given_up_by: str | None = None


@dataclass(frozen=True)
class EventJourney:
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
    quarantine: QuarantinedEvent | None
    dead_letters: list[tuple[str, Described]]
    subscribers: list[SubscriberSight]
    summary: str
    #: the W3C trace the event was committed in (Application Insights' operation id): its stored
    #: document's, its quarantined copy's, or its dead letter's `traceparent`
    trace_id: str | None = None
    #: a scheduled event's due time and where it is (None: not a scheduled event)
    schedule: ScheduleState | None = None


@dataclass(frozen=True)
class SubscriberAggregate:
    """One subscriber's view of the aggregate: the last version it applied, what it holds and
    waits for, and the gaps it knows (quarantined) or accepted (given up)."""

    subscription: str
    projection_version: int
    held_versions: list[int] = field(default_factory=list)
    waiting_for: int | None = None
    quarantined_gaps: list[int] = field(default_factory=list)
    accepted_gaps: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class AggregateJourney:
    aggregate_type: str
    aggregate_id: str
    events: list[EventJourney]
    subscribers: list[SubscriberAggregate]
    summary: str


@dataclass
class _Context:
    """What the journey read once, shared by the events it describes."""

    leases: list[LeaseBacklog] | None
    leases_error: str | None
    letters: dict[str, list[Described]]


class JourneyOperators:
    def __init__(self, parts: Parts, dead_letters: DeadLetterOperators) -> None:
        self._parts = parts
        self._letters = dead_letters

    async def _context(self) -> _Context:
        leases: list[LeaseBacklog] | None
        try:
            leases, why = await self._parts.backlog().estimate(), None
        except Exception as exc:  # no estimator, no lease container: said, not raised
            leases, why = None, f"{error_type(exc)}: {str(exc)[:200]}"
        letters: dict[str, list[Described]] = {}
        if self._letters.watched:
            for entity in self._letters.watched:
                try:
                    letters[entity.name], _ = await self._letters.scan(entity)
                except NotFoundError:
                    letters[entity.name] = []
        return _Context(leases, why, letters)

    def _parse(self, document: Mapping[str, Any]) -> OutboxRecord | Unreadable | None:
        [item] = read_feed([document], legacy=self._parts.legacy)
        return None if isinstance(item, NotAnEvent) else item

    async def documents(
        self, aggregate_id: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        """One page of the documents where the aggregate's live (its state, its events not yet
        expired, its quarantine and idempotency records...), as stored, system properties
        included; read only (the console's link from an event to its aggregate's documents)."""
        return await partition_documents(
            self._parts.store,
            partition_of(aggregate_id),
            page_size=page_size,
            continuation=continuation,
        )

    async def of_event(self, event_id: str) -> EventJourney:
        """Where one event went. NotFoundError when nothing anywhere knows it."""
        context = await self._context()
        document = await self._parts.store.find(EVENT_TYPE, event_id)
        event = self._parse(document) if document is not None else None
        try:
            quarantined: QuarantinedEvent | None = await self._parts.quarantine.get(event_id)
        except NotFoundError:
            quarantined = None
        found = await self._journey(
            event_id,
            event,
            quarantined,
            context,
            schedule_state(document) if document is not None else None,
        )
        known = event is not None or quarantined is not None or found.dead_letters
        if not known and all(s.state == "not received" for s in found.subscribers):
            raise NotFoundError(EVENT, event_id)
        return found

    async def of_aggregate(self, aggregate_type: str, aggregate_id: str) -> AggregateJourney:
        """Where each of an aggregate's events went, and each subscriber's view of it."""
        context = await self._context()
        stored: dict[str, OutboxRecord | Unreadable] = {}
        schedules: dict[str, ScheduleState | None] = {}
        for document in await self._parts.store.of_type(
            EVENT_TYPE, partition_key=partition_of(aggregate_id)
        ):
            event = self._parse(document)
            if event is not None and event.aggregate_type in (aggregate_type, None):
                stored[event.event_id] = event
                schedules[event.event_id] = schedule_state(document)
        quarantined = {
            q.event_id: q
            for q in [
                await self._parts.quarantine.get(
                    str(d.get("eventId") or d["id"]).removeprefix("quarantine-")
                )
                for d in await self._parts.store.of_type(
                    QUARANTINE_TYPE, partition_key=partition_of(aggregate_id)
                )
            ]
            if q.aggregate_type in (aggregate_type, None)
        }
        lettered = {
            d.event_id
            for letters in context.letters.values()
            for d in letters
            if d.aggregate_type == aggregate_type and d.aggregate_id == aggregate_id
        }
        ids = set(stored) | set(quarantined) | {i for i in lettered if i}
        journeys = [
            await self._journey(i, stored.get(i), quarantined.get(i), context, schedules.get(i))
            for i in ids
        ]
        journeys.sort(key=lambda j: (j.schedule is not None, j.version or 0, _due(j), j.event_id))
        subscribers = [
            await _subscriber_aggregate(name, store, aggregate_id)
            for name, store in sorted(self._parts.subscribers().items())
        ]
        return AggregateJourney(
            aggregate_type,
            aggregate_id,
            journeys,
            subscribers,
            _aggregate_summary(aggregate_type, aggregate_id, journeys, subscribers),
        )

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
        source: Any = event or (quarantined.event if quarantined else None)
        aggregate_type = getattr(source, "aggregate_type", None)
        aggregate_id = getattr(source, "aggregate_id", None)
        action = getattr(source, "action", None)
        version = getattr(source, "version", None)
        if letters and aggregate_id is None:
            first = letters[0][1]
            aggregate_type, aggregate_id = first.aggregate_type, first.aggregate_id
            action, version = first.action, first.version
        relay, note = self._relayed(event_id, event, quarantined, context)
        if schedule is not None and (relay != "quarantined" or schedule.state == "cancelled"):
            relay, note = _scheduled_relay(schedule, relay, note)
        sights = [
            await _sight(name, store, event_id, aggregate_id, version)
            for name, store in sorted(self._parts.subscribers().items())
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
            quarantine=quarantined,
            dead_letters=letters,
            subscribers=sights,
            summary="",
            trace_id=_trace_of(source, letters),
            schedule=schedule,
        )
        return _with_summary(journey, self._parts.event_ttl_seconds)

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


def _trace_of(source: object, letters: Sequence[tuple[str, Described]]) -> str | None:
    """The event's trace id: from its stored (or quarantined) copy, else from a dead letter's
    `traceparent` property (the relay sets it on every message)."""
    found = trace_id(getattr(source, "traceparent", None))
    for _, letter in letters:
        found = found or trace_id(letter.letter.application_properties.get("traceparent"))
    return found


async def _sight(
    name: str,
    store: AsyncDocumentStore,
    event_id: str,
    aggregate_id: str | None,
    version: int | None,
) -> SubscriberSight:
    if aggregate_id is None:
        found = await store.query(
            "SELECT * FROM c WHERE c.type = @t AND c.eventId = @id",
            {"@t": INBOX_TYPE, "@id": event_id},
        )
        if not found:
            return SubscriberSight(name, "not received", 0)
        aggregate_id = str(found[0].get("partitionKey"))
        version = found[0].get("version") if version is None else version
    projection = await store.read(partition_of(aggregate_id), aggregate_id)
    last = last_version(projection)
    inbox = await store.read(aggregate_id, inbox_id(event_id))
    if isinstance(version, int) and version > 0:  # a scheduled event (0) has no place
        gap = await store.read(aggregate_id, gap_id(version))
        if gap is not None and gap.get("type") == ACCEPTED_GAP_TYPE:
            return SubscriberSight(
                name, "given up", last, given_up_by=str(gap.get("discardedBy") or "")
            )
        if await store.read(aggregate_id, held_id(version)) is not None:
            return SubscriberSight(name, "held", last, waiting_for=last + 1)
        if version <= last:
            return SubscriberSight(
                name, "applied", last, applied_at=(inbox or {}).get("processedAt")
            )
    if inbox is not None:
        return SubscriberSight(name, "applied", last, applied_at=inbox.get("processedAt"))
    return SubscriberSight(name, "not received", last)


async def _subscriber_aggregate(
    name: str, store: AsyncDocumentStore, aggregate_id: str
) -> SubscriberAggregate:
    last = last_version(await store.read(partition_of(aggregate_id), aggregate_id))
    held = sorted(
        int(d.get("event", {}).get("version", 0))
        for d in await store.of_type(HELD_TYPE, partition_key=partition_of(aggregate_id))
    )
    gaps = await store.of_type(GAP_TYPE, partition_key=partition_of(aggregate_id))
    accepted = await store.of_type(ACCEPTED_GAP_TYPE, partition_key=partition_of(aggregate_id))
    return SubscriberAggregate(
        subscription=name,
        projection_version=last,
        held_versions=held,
        waiting_for=last + 1 if held else None,
        quarantined_gaps=sorted(int(g.get("version", 0)) for g in gaps),
        accepted_gaps=sorted(int(g.get("version", 0)) for g in accepted),
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


def _with_summary(journey: EventJourney, ttl: int) -> EventJourney:
    parts: list[str] = []
    what = (
        f"{journey.aggregate_type} {journey.aggregate_id} v{journey.version} {journey.action}"
        if journey.aggregate_id
        else "aggregate unknown"
    )
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
    q = journey.quarantine
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
    for name, letter in journey.dead_letters:
        parts.append(
            f"dead-lettered at {name} (#{letter.letter.sequence_number}, "
            f"{letter.letter.reason}): cosmos-outbox deadletters resubmit {name} "
            f"{letter.letter.sequence_number}"
        )
    for sight in journey.subscribers:
        extra = f", waiting for version {sight.waiting_for}" if sight.waiting_for else ""
        parts.append(f"{sight.subscription}: {sight.state}{extra}")
    return dataclasses.replace(journey, summary="; ".join(parts))


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
        text = f"{s.subscription} at version {s.projection_version}"
        if s.held_versions:
            text += f", holding {s.held_versions} waiting for version {s.waiting_for}"
        if s.accepted_gaps:
            text += f", gave up {s.accepted_gaps}"
        parts.append(text)
    return "; ".join(parts)
