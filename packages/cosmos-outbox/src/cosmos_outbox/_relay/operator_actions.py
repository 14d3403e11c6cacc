"""The operators' use cases: the outbox's status, the quarantine (list, replay, discard) and
re-drive. Replay and re-drive send through the relay itself (`cosmos_outbox._relay.Relay`),
so an event goes out exactly as the change-feed trigger would send it: same MessageId (its id),
same session and version, the same quarantine rules. Aggregate-neutral: a re-drive may be
narrowed to one aggregate type, and to one aggregate of it.

Every action writes one audit log line with its values as fields (`extra`): `outbox.audit`
(`quarantine.replay`, `quarantine.discard`, `redrive`), `outbox.event_id`, `outbox.reason`...,
and who did it (`cosmos_outbox._actor`: "by <name> (id <object id>)" or "by admin key", and
the fields `outbox.actor`, `outbox.actor_kind`, `outbox.actor_name`, `outbox.actor_id`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cosmos_outbox._actor import current_actor
from cosmos_outbox._mapper import EVENT_TYPE, read_feed, selected
from cosmos_outbox._quarantine import Quarantine, QuarantinedEvent
from cosmos_outbox._records import LegacyEvents, NotAnEvent, OutboxRecord, Unreadable
from cosmos_outbox._relay.backlog import age_seconds
from cosmos_outbox._relay.forwarding import Relay
from cosmos_outbox._relay.health import RelayBlocked, RelayHealth
from cosmos_outbox.errors import PublishFailedError, RelayNotReadyError
from cosmos_outbox.ports import AsyncBacklogEstimator, AsyncDocumentStore, LeaseBacklog, Page
from cosmos_outbox.telemetry import error_type

#: The log category operators filter on (kept across module moves).
logger = logging.getLogger("cosmos_outbox.operators")


@dataclass(frozen=True)
class LeaseStatus:
    lease: LeaseBacklog
    oldest_age_seconds: float | None


@dataclass(frozen=True)
class OutboxStatus:
    pending: int
    oldest_age_seconds: float | None
    quarantined: int
    leases: list[LeaseStatus]
    #: the relay cannot get past an event (or cannot start), when it says so
    blocked: RelayBlocked | None = None


@dataclass(frozen=True)
class RedriveReport:
    events: int
    sent: int
    quarantined: int


async def stored_events(
    store: AsyncDocumentStore,
    since: datetime,
    *,
    aggregate_type: str | None = None,
    aggregate_id: str | None = None,
    legacy: LegacyEvents | None = None,
) -> list[OutboxRecord | Unreadable]:
    """Every event document still stored (not expired) created at or after `since` (by its
    creation time, `cosmos_outbox._mapper.document_created_at`: not indexed, filtered
    here; no index is added for an operator's occasional re-drive), of one aggregate type and
    one aggregate (read in its partition) if given."""
    documents = [
        d
        for d in await store.of_type(EVENT_TYPE, partition_key=aggregate_id)
        if selected(d, since, aggregate_type, legacy=legacy)
    ]
    return [
        item for item in read_feed(documents, legacy=legacy) if not isinstance(item, NotAnEvent)
    ]


class OutboxOperators:
    """The operators' use cases over the outbox's container, relay and backlog estimator (the
    async API's; the sync API runs them)."""

    def __init__(
        self,
        *,
        store: AsyncDocumentStore,
        quarantine: Quarantine,
        relay: Callable[[], Relay],
        backlog: Callable[[], AsyncBacklogEstimator],
        event_ttl_seconds: int,
        legacy: LegacyEvents | None = None,
        clock: Callable[[], float] = time.time,
        health: RelayHealth | None = None,
    ) -> None:
        self._health = health
        self._store = store
        self._quarantine = quarantine
        self._legacy = legacy
        self._relay = relay
        self._backlog = backlog
        self._ttl = event_ttl_seconds
        self._clock = clock

    async def status(self) -> OutboxStatus:
        """The change-feed backlog as the estimator sees it, and the unresolved quarantine.
        Without its lease container there is no backlog to read: no leases, and the relay
        blocked before any event, naming it (what the backlog timer records too)."""
        now = self._clock()
        missing: RelayNotReadyError | None = None
        try:
            backlog = await self._backlog().estimate()
        except RelayNotReadyError as exc:
            backlog, missing = [], exc
        leases = [LeaseStatus(b, age_seconds(b, now)) for b in backlog]
        ages = [s.oldest_age_seconds for s in leases if s.oldest_age_seconds is not None]
        blocked = await self._health.current() if self._health is not None else None
        if blocked is None and missing is not None:
            blocked = RelayBlocked(
                event_id=None,
                reason=f"{error_type(missing)}: {missing}",
                since=None,
                last_attempt=None,
                attempts=0,
            )
        return OutboxStatus(
            pending=sum(s.lease.pending for s in leases),
            oldest_age_seconds=max(ages) if ages else None,
            quarantined=await self._quarantine.count(),
            leases=leases,
            blocked=blocked,
        )

    async def quarantine_page(
        self, *, page_size: int, continuation: str | None
    ) -> Page[QuarantinedEvent]:
        return await self._quarantine.list_page(page_size=page_size, continuation=continuation)

    async def replay(self, event_id: str) -> QuarantinedEvent:
        """Send the stored event through the relay again, with its own id. Sent: the record is
        resolved. Set aside again (or the send failed): it stays, with the new reason, and
        replays + 1. A resolved record is not sent again (replaying twice is harmless)."""
        entry = await self._quarantine.get(event_id)
        if entry.resolved:
            _audit("quarantine.replay", entry, "already resolved; nothing sent")
            return entry
        try:
            report = await self._relay().relay([entry.event])
        except Exception as exc:  # the broker failed: recorded, and the record stays
            reason = f"replay failed to send: {error_type(exc)}"
            result = await self._quarantine.replayed(
                entry, resolved=False, reason=reason, ttl_seconds=self._ttl
            )
        else:
            reason = report.reasons.get(entry.event_id, "")
            result = await self._quarantine.replayed(
                entry, resolved=not reason, reason=reason, ttl_seconds=self._ttl
            )
        _audit(
            "quarantine.replay",
            result,
            "resolved" if result.resolved else f"still quarantined: {result.reason}",
        )
        return result

    async def discard(self, event_id: str, reason: str) -> QuarantinedEvent:
        """Delete the record for good; the audit line names the event and the reason."""
        entry = await self._quarantine.get(event_id)
        await self._quarantine.discard(entry)
        _audit("quarantine.discard", entry, reason)
        return entry

    async def redrive(
        self, since: datetime, *, aggregate_type: str | None = None, aggregate_id: str | None = None
    ) -> RedriveReport:
        """Publish again every stored event created at or after `since` (of one aggregate type,
        and one aggregate of it, if given), through the relay: per aggregate in version order,
        MessageId = event id. The topic drops those still in its duplicate-detection window;
        older ones are repeats."""
        events = await stored_events(
            self._store,
            since,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            legacy=self._legacy,
        )
        try:
            report = await self._relay().relay(events)
        except Exception as exc:
            raise PublishFailedError(f"re-drive failed to send: {error_type(exc)}") from exc
        result = RedriveReport(len(events), report.sent, len(report.quarantined))
        scope = " ".join(p for p in (aggregate_type, aggregate_id) if p)
        actor = current_actor()
        logger.warning(
            "outbox audit: redrive since %s%s by %s: %d events, %d sent, %d quarantined",
            since.isoformat(),
            f" of {scope}" if scope else "",
            actor,
            result.events,
            result.sent,
            result.quarantined,
            extra={
                **actor.log_fields(),
                "outbox.audit": "redrive",
                "outbox.since": since.isoformat(),
                "outbox.aggregate_type": aggregate_type,
                "outbox.aggregate_id": aggregate_id,
                "outbox.events": result.events,
                "outbox.sent": result.sent,
                "outbox.quarantined": result.quarantined,
            },
        )
        return result


def _audit(action: str, entry: QuarantinedEvent, reason: str) -> None:
    actor = current_actor()
    fields: dict[str, Any] = {
        **actor.log_fields(),
        "outbox.audit": action,
        "outbox.event_id": entry.event_id,
        "outbox.aggregate_type": entry.aggregate_type,
        "outbox.aggregate_id": entry.aggregate_id,
        "outbox.action": entry.action,
        "outbox.version": entry.version,
        "outbox.reason": reason,
        "outbox.replays": entry.replays,
    }
    logger.warning(
        "outbox audit: %s of event %s (%s %s v%s) by %s: %s",
        action,
        entry.event_id,
        entry.aggregate_type,
        entry.aggregate_id,
        entry.version,
        actor,
        reason,
        extra=fields,
    )
