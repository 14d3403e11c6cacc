"""A subscriber's status, read from its projection container: the versions it holds and why
(each with what releases it), and the gaps operators accepted. The projector's own status
(`Projector.status()`) and the operators' routes of the publishing app (`GET
/outbox/subscribers`, when OUTBOX_SUBSCRIPTIONS names the subscriber's container) read it
alike, so a subscriber never waits without its status saying on what. What it did with one
event (`event_fate`) and where one aggregate stands (`aggregate_versions`) are read here too, for
the publishing app's journey, re-drive and dead letters' watch: the projector's bookkeeping
documents are read where they are written.

Reads: the held events, known gaps and accepted gaps (documents of their `type`, which the
projection container indexes), then the projection of each aggregate that holds events (a
point read each)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from cosmos_outbox._mapper import parse_time
from cosmos_outbox._model import Model
from cosmos_outbox._sync_over_async import as_async
from cosmos_outbox.ports import AsyncDocumentStore, DocumentStore
from cosmos_outbox.subscriber._bookkeeping import (
    ACCEPTED_GAP_TYPE,
    GAP_TYPE,
    HELD_TYPE,
    INBOX_TYPE,
    gap_id,
    hold_reason,
    inbox_id,
    last_version,
)

__all__ = [
    "AcceptedGap",
    "EventFate",
    "HeldAggregate",
    "SubscriberStatus",
    "aggregate_versions",
    "event_fate",
    "subscriber_status",
]


class HeldAggregate(Model):
    """An aggregate whose later versions wait for `missing_version`: why, and what releases
    them."""

    aggregate_type: str | None
    aggregate_id: str
    last_applied: int
    missing_version: int
    held_versions: list[int]
    held_since: datetime | None
    #: why the missing version is not here (quarantined by the outbox, with its reason; or not
    #: received)
    reason: str
    #: what releases the held versions (the operators' commands)
    release: str
    #: the outbox's quarantine notice of the missing version, when it sent one: its event id
    quarantined_event_id: str | None = None


class AcceptedGap(Model):
    """A version an operator gave up, which the subscriber moved past."""

    aggregate_type: str | None
    aggregate_id: str
    version: int
    event_id: str | None
    action: str | None
    reason: str | None
    discarded_by: str | None
    accepted_at: datetime | None
    #: the subscription it was given up at (None: at the outbox, for every subscriber)
    subscription: str | None = None


class SubscriberStatus(Model):
    """What a subscriber holds (`held`: per aggregate, `held_events` in all) and the gaps it
    accepted (until their records expire with the inbox's)."""

    held_events: int = 0
    held: list[HeldAggregate] = []
    accepted_gaps: list[AcceptedGap] = []


async def subscriber_status(
    store: AsyncDocumentStore | DocumentStore, *, aggregate_id: str | None = None
) -> SubscriberStatus:
    """The status of the subscriber whose projection container `store` is (of one aggregate
    when given)."""
    container = as_async(store)
    held_documents = await container.of_type(HELD_TYPE, partition_key=aggregate_id)
    gaps = await container.of_type(GAP_TYPE, partition_key=aggregate_id)
    accepted = await container.of_type(ACCEPTED_GAP_TYPE, partition_key=aggregate_id)
    known = {(str(g.get("partitionKey")), _int(g.get("version"))): g for g in gaps}
    by_aggregate: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for document in held_documents:
        by_aggregate[str(document.get("partitionKey"))].append(document)
    held = []
    for aggregate, documents in sorted(by_aggregate.items()):
        projection = await container.read(aggregate, aggregate)
        last = last_version(projection)
        versions = sorted(_int(d.get("event", {}).get("version")) for d in documents)
        missing = last + 1
        kind = next(
            (d.get("aggregateType") for d in documents if isinstance(d.get("aggregateType"), str)),
            None,
        )
        gap = known.get((aggregate, missing))
        reason, release = hold_reason(kind or "<aggregate type>", aggregate, missing, gap)
        since = [t for d in documents if (t := parse_time(d.get("heldAt"))) is not None]
        held.append(
            HeldAggregate(
                aggregate_type=kind,
                aggregate_id=aggregate,
                last_applied=last,
                missing_version=missing,
                held_versions=versions,
                held_since=min(since) if since else None,
                reason=reason,
                release=release,
                quarantined_event_id=str(gap["eventId"]) if gap and gap.get("eventId") else None,
            )
        )
    return SubscriberStatus(
        held_events=len(held_documents),
        held=held,
        accepted_gaps=sorted(
            (
                AcceptedGap(
                    aggregate_type=_text(d.get("aggregateType")),
                    aggregate_id=str(d.get("partitionKey")),
                    version=_int(d.get("version")),
                    event_id=_text(d.get("eventId")),
                    action=_text(d.get("action")),
                    reason=_text(d.get("reason")),
                    discarded_by=_text(d.get("discardedBy")),
                    accepted_at=parse_time(d.get("acceptedAt")),
                    subscription=_text(d.get("subscription")),
                )
                for d in accepted
            ),
            key=lambda g: (g.aggregate_id, g.version),
        ),
    )


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class EventFate(Model):
    """What a subscriber did with one event: `applied` (its version at or under the
    projection's, or its inbox record says it was processed), `held` (received, over the
    projection's version), `given up` (its version an accepted gap) or `not received`."""

    state: Literal["applied", "held", "given up", "not received"]
    #: the aggregate (the session it came in) and the version the projection is at
    aggregate_id: str | None
    last_applied: int
    #: when it was processed (its inbox record's time); who gave its version up
    processed_at: str | None = None
    given_up_by: str | None = None


async def event_fate(
    store: AsyncDocumentStore,
    event_id: str,
    *,
    aggregate_id: str | None,
    version: int | None,
    last_applied: int | None = None,
) -> EventFate:
    """What the subscriber whose projection container `store` is did with the event (of
    `aggregate_id`, its session id: found by its inbox record when None; a scheduled event's
    `version`, 0, has no place in the order). `last_applied`: the projection's version, when the
    caller read it already."""
    if aggregate_id is None:
        found = await store.query(
            "SELECT * FROM c WHERE c.type = @t AND c.eventId = @id",
            {"@t": INBOX_TYPE, "@id": event_id},
        )
        if not found:
            return EventFate(state="not received", aggregate_id=None, last_applied=0)
        aggregate_id = str(found[0].get("partitionKey"))
        version = found[0].get("version") if version is None else version
    if last_applied is None:
        last_applied = last_version(await store.read(aggregate_id, aggregate_id))
    inbox = await store.read(aggregate_id, inbox_id(event_id))
    seen = {"aggregate_id": aggregate_id, "last_applied": last_applied}
    processed = _text((inbox or {}).get("processedAt"))
    if isinstance(version, int) and version > 0:
        gap = await store.read(aggregate_id, gap_id(version))
        if gap is not None and gap.get("type") == ACCEPTED_GAP_TYPE:
            return EventFate(
                state="given up", given_up_by=str(gap.get("discardedBy") or ""), **seen
            )
        if version <= last_applied:
            return EventFate(state="applied", processed_at=processed, **seen)
        if inbox is not None:
            return EventFate(state="held", processed_at=processed, **seen)
    state = "applied" if inbox is not None else "not received"
    return EventFate(state=state, processed_at=processed, **seen)


async def aggregate_versions(
    store: AsyncDocumentStore, aggregate_id: str
) -> tuple[int, list[int], list[int], list[int]]:
    """Where an aggregate stands at the subscriber: the version its projection is at, and the
    versions it holds, knows quarantined by the outbox, and accepted as gaps (each sorted)."""
    last = last_version(await store.read(aggregate_id, aggregate_id))
    held, known, accepted = [
        await store.of_type(kind, partition_key=aggregate_id)
        for kind in (HELD_TYPE, GAP_TYPE, ACCEPTED_GAP_TYPE)
    ]
    return (
        last,
        sorted(_int(d.get("event", {}).get("version")) for d in held),
        sorted(_int(g.get("version")) for g in known),
        sorted(_int(g.get("version")) for g in accepted),
    )
