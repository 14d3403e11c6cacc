"""A subscriber's status, read from its projection container: the versions it holds and why
(each with what releases it), and the gaps operators accepted. The projector's own status
(`Projector.status()`) and the operators' routes of the publishing app (`GET
/outbox/subscribers`, when OUTBOX_SUBSCRIPTIONS names the subscriber's container) read it
alike, so a subscriber never waits without its status saying on what.

Reads: the held events, known gaps and accepted gaps (documents of their `type`, which the
projection container indexes), then the projection of each aggregate that holds events (a
point read each)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cosmos_outbox._mapper import parse_time
from cosmos_outbox._model import Model
from cosmos_outbox._sync_bridge import as_async
from cosmos_outbox.ports import AsyncDocumentStore, DocumentStore
from cosmos_outbox.subscriber._bookkeeping import (
    ACCEPTED_GAP_TYPE,
    GAP_TYPE,
    HELD_TYPE,
    hold_reason,
    last_version,
)

__all__ = ["AcceptedGap", "HeldAggregate", "SubscriberStatus", "subscriber_status"]


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
