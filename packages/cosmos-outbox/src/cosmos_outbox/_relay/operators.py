"""The operators' use cases: the outbox's status, the quarantine (list, replay, discard) and
re-drive. Replay and re-drive send through the relay itself (`cosmos_outbox._relay.Relay`),
so an event goes out exactly as the change-feed trigger would send it: same MessageId (its id),
same session and version, the same quarantine rules. Aggregate-neutral: a re-drive may be
narrowed to one aggregate type, and to one aggregate of it.

Every action writes one audit log line with its values as fields (`extra`): `outbox.audit`
(`quarantine.replay`, `quarantine.discard`, `redrive`), `outbox.event_id`, `outbox.reason`...
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cosmos_outbox._relay import Relay
from cosmos_outbox._relay.backlog import age_seconds
from cosmos_outbox._relay.telemetry import error_type
from cosmos_outbox.errors import PublishFailedError
from cosmos_outbox.ports import (
    BacklogEstimator,
    EventStore,
    LeaseBacklog,
    Page,
    Quarantine,
    QuarantinedEvent,
)

#: The log category operators filter on (kept across module moves).
logger = logging.getLogger("application.admin")


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


@dataclass(frozen=True)
class RedriveReport:
    events: int
    sent: int
    quarantined: int


class OutboxOperators:
    def __init__(
        self,
        *,
        quarantine: Quarantine,
        events: EventStore,
        relay: Callable[[], Relay],
        backlog: Callable[[], BacklogEstimator],
        event_ttl_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._quarantine = quarantine
        self._events = events
        self._relay = relay
        self._backlog = backlog
        self._ttl = event_ttl_seconds
        self._clock = clock

    def status(self) -> OutboxStatus:
        """The change-feed backlog as the estimator sees it, and the unresolved quarantine."""
        now = self._clock()
        leases = [LeaseStatus(b, age_seconds(b, now)) for b in self._backlog().estimate()]
        ages = [s.oldest_age_seconds for s in leases if s.oldest_age_seconds is not None]
        return OutboxStatus(
            pending=sum(s.lease.pending for s in leases),
            oldest_age_seconds=max(ages) if ages else None,
            quarantined=self._quarantine.count(),
            leases=leases,
        )

    def quarantine_page(self, *, page_size: int,
                        continuation: str | None) -> Page[QuarantinedEvent]:
        return self._quarantine.list_page(page_size=page_size, continuation=continuation)

    def replay(self, event_id: str) -> QuarantinedEvent:
        """Send the stored event through the relay again, with its own id. Sent: the record is
        resolved. Set aside again (or the send failed): it stays, with the new reason, and
        replays + 1. A resolved record is not sent again (replaying twice is harmless)."""
        entry = self._quarantine.get(event_id)
        if entry.resolved:
            _audit("quarantine.replay", entry, "already resolved; nothing sent")
            return entry
        try:
            report = self._relay().relay([entry.event])
        except Exception as exc:  # the broker failed: recorded, and the record stays
            reason = f"replay failed to send: {error_type(exc)}"
            result = self._quarantine.replayed(entry, resolved=False, reason=reason,
                                               ttl_seconds=self._ttl)
        else:
            reason = report.reasons.get(entry.event_id, "")
            result = self._quarantine.replayed(entry, resolved=not reason, reason=reason,
                                               ttl_seconds=self._ttl)
        _audit("quarantine.replay", result,
               "resolved" if result.resolved else f"still quarantined: {result.reason}")
        return result

    def discard(self, event_id: str, reason: str) -> QuarantinedEvent:
        """Delete the record for good; the audit line names the event and the reason."""
        entry = self._quarantine.get(event_id)
        self._quarantine.discard(entry)
        _audit("quarantine.discard", entry, reason)
        return entry

    def redrive(self, since: datetime, *, aggregate_type: str | None = None,
                aggregate_id: str | None = None) -> RedriveReport:
        """Publish again every stored event created at or after `since` (of one aggregate type,
        and one aggregate of it, if given), through the relay: per aggregate in version order,
        MessageId = event id. The topic drops those still in its duplicate-detection window;
        older ones are repeats."""
        events = self._events.events_since(since, aggregate_type=aggregate_type,
                                           aggregate_id=aggregate_id)
        try:
            report = self._relay().relay(events)
        except Exception as exc:
            raise PublishFailedError(f"re-drive failed to send: {error_type(exc)}") from exc
        result = RedriveReport(len(events), report.sent, len(report.quarantined))
        scope = " ".join(p for p in (aggregate_type, aggregate_id) if p)
        logger.warning(
            "outbox audit: redrive since %s%s: %d events, %d sent, %d quarantined",
            since.isoformat(), f" of {scope}" if scope else "", result.events,
            result.sent, result.quarantined,
            extra={"outbox.audit": "redrive", "outbox.since": since.isoformat(),
                   "outbox.aggregate_type": aggregate_type,
                   "outbox.aggregate_id": aggregate_id, "outbox.events": result.events,
                   "outbox.sent": result.sent, "outbox.quarantined": result.quarantined})
        return result


def _audit(action: str, entry: QuarantinedEvent, reason: str) -> None:
    fields: dict[str, Any] = {
        "outbox.audit": action, "outbox.event_id": entry.event_id,
        "outbox.aggregate_type": entry.aggregate_type,
        "outbox.aggregate_id": entry.aggregate_id, "outbox.action": entry.action,
        "outbox.version": entry.version, "outbox.reason": reason,
        "outbox.replays": entry.replays,
    }
    logger.warning("outbox audit: %s of event %s (%s %s v%s): %s", action, entry.event_id,
                   entry.aggregate_type, entry.aggregate_id, entry.version, reason,
                   extra=fields)
