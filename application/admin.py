"""The operators' use cases: the outbox's status, the quarantine (list, replay, discard) and
re-drive. Replay and re-drive send through the relay itself (`application.relay.Relay`), so an
event goes out exactly as the change-feed trigger would send it: same MessageId (its id), same
session and version, the same quarantine rules.

Every action writes one audit log line with its values as fields (`extra`): `outbox.audit`
(`quarantine.replay`, `quarantine.discard`, `redrive`), `outbox.event_id`, `outbox.reason`...
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema

from application.backlog import BacklogEstimator, LeaseBacklog
from application.commands import Model, RequestModel, _omit_null_defaults
from application.errors import ApplicationError
from application.ports import EventStore, Quarantine, QuarantinedEvent, QuarantinePage
from application.relay import Relay
from application.telemetry import error_type
from domain.values import OperatorReason

logger = logging.getLogger(__name__)

#: An event or contact id in a route or body (also the OpenAPI pattern).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class PublishFailedError(ApplicationError):
    """The broker did not take the messages (503); nothing is lost, the action may be
    repeated (the topic drops what it already has, by MessageId)."""


# ---- models of the admin API ------------------------------------------------------------

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})")


def parse_instant(value: object) -> datetime:
    """An RFC 3339 date-time with its offset (no other form: no bare dates, no epoch numbers),
    as an aware UTC datetime; times beyond the calendar's range clamp to its ends."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError("must be an RFC 3339 date-time with an offset, "
                         "e.g. 2026-11-22T08:00:00Z")
    m = _RFC3339.fullmatch(value)
    assert m is not None
    fraction = (m.group(7) or ".0")[1:7].ljust(6, "0")
    text = (f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}"
            f".{fraction}{'+00:00' if m.group(8) in 'Zz' else m.group(8)}")
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("is not a valid date-time") from None
    try:
        return at.astimezone(UTC)
    except OverflowError:
        return (datetime.min if at.year == 1 else datetime.max).replace(tzinfo=UTC)


Instant = Annotated[datetime, BeforeValidator(parse_instant),
                    WithJsonSchema({"type": "string", "format": "date-time"})]
EventId = Annotated[str, Field(pattern=ID_PATTERN, max_length=128)]


class RedriveRequest(RequestModel):
    """Body of POST /outbox/redrive: `since` (RFC 3339 with offset), optional `contactId`."""

    model_config = ConfigDict(json_schema_extra=_omit_null_defaults({}))

    since: Instant
    contact_id: EventId | None = None


class RedriveView(Model):
    events: int
    sent: int
    quarantined: int


class LeaseStatusView(Model):
    lease: str
    pending: int
    oldest_pending_age_seconds: float | None
    owner: str | None
    checkpoint_at: str | None


class OutboxStatusView(Model):
    pending: int
    oldest_pending_age_seconds: float | None
    quarantined: int
    leases: list[LeaseStatusView]


class QuarantineItem(Model):
    event_id: str
    contact_id: str
    aggregate_type: str | None
    action: str | None
    version: int | None
    reason: str
    quarantined_at: datetime | None
    replays: int
    status: str = Field(json_schema_extra={"enum": ["quarantined", "resolved"]})
    resolved_at: datetime | None

    @classmethod
    def of(cls, entry: QuarantinedEvent) -> QuarantineItem:
        return cls(
            event_id=entry.event_id, contact_id=entry.aggregate_id,
            aggregate_type=entry.aggregate_type, action=entry.action, version=entry.version,
            reason=entry.reason, quarantined_at=entry.quarantined_at, replays=entry.replays,
            status="resolved" if entry.resolved else "quarantined",
            resolved_at=entry.resolved_at)


class QuarantineListPage(Model):
    items: list[QuarantineItem]
    continuation_token: str | None
    has_more: bool

    @classmethod
    def of(cls, page: QuarantinePage) -> QuarantineListPage:
        return cls(items=[QuarantineItem.of(e) for e in page.items],
                   continuation_token=page.continuation_token,
                   has_more=page.continuation_token is not None)


# ---- use cases --------------------------------------------------------------------------

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

    def view(self) -> OutboxStatusView:
        return OutboxStatusView(
            pending=self.pending,
            oldest_pending_age_seconds=_round(self.oldest_age_seconds),
            quarantined=self.quarantined,
            leases=[LeaseStatusView(
                lease=s.lease.lease, pending=s.lease.pending,
                oldest_pending_age_seconds=_round(s.oldest_age_seconds), owner=s.lease.owner,
                checkpoint_at=s.lease.checkpoint_at) for s in self.leases])


@dataclass(frozen=True)
class RedriveReport:
    events: int
    sent: int
    quarantined: int


class OutboxAdmin:
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
        leases = [LeaseStatus(b, _age(b, now)) for b in self._backlog().estimate()]
        ages = [s.oldest_age_seconds for s in leases if s.oldest_age_seconds is not None]
        return OutboxStatus(
            pending=sum(s.lease.pending for s in leases),
            oldest_age_seconds=max(ages) if ages else None,
            quarantined=self._quarantine.count(),
            leases=leases,
        )

    def quarantine_page(self, *, page_size: int, continuation: str | None) -> QuarantinePage:
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

    def discard(self, event_id: str, reason: OperatorReason) -> QuarantinedEvent:
        """Delete the record for good; the audit line names the event and the reason."""
        entry = self._quarantine.get(event_id)
        self._quarantine.discard(entry)
        _audit("quarantine.discard", entry, reason)
        return entry

    def redrive(self, since: datetime, *, aggregate_id: str | None = None) -> RedriveReport:
        """Publish again every stored event created at or after `since` (of one aggregate if
        given), through the relay: per aggregate in version order, MessageId = event id. The
        topic drops those still in its duplicate-detection window; older ones are repeats."""
        events = self._events.events_since(since, aggregate_id=aggregate_id)
        try:
            report = self._relay().relay(events)
        except Exception as exc:
            raise PublishFailedError(f"re-drive failed to send: {error_type(exc)}") from exc
        result = RedriveReport(len(events), report.sent, len(report.quarantined))
        logger.warning(
            "outbox audit: redrive since %s%s: %d events, %d sent, %d quarantined",
            since.isoformat(), f" of {aggregate_id}" if aggregate_id else "", result.events,
            result.sent, result.quarantined,
            extra={"outbox.audit": "redrive", "outbox.since": since.isoformat(),
                   "outbox.aggregate_id": aggregate_id, "outbox.events": result.events,
                   "outbox.sent": result.sent, "outbox.quarantined": result.quarantined})
        return result


def _audit(action: str, entry: QuarantinedEvent, reason: str) -> None:
    fields: dict[str, Any] = {
        "outbox.audit": action, "outbox.event_id": entry.event_id,
        "outbox.aggregate_id": entry.aggregate_id, "outbox.action": entry.action,
        "outbox.version": entry.version, "outbox.reason": reason,
        "outbox.replays": entry.replays,
    }
    logger.warning("outbox audit: %s of event %s (%s v%s): %s", action, entry.event_id,
                   entry.aggregate_id, entry.version, reason, extra=fields)


def _age(backlog: LeaseBacklog, now: float) -> float | None:
    if backlog.oldest_created_at is None or backlog.pending == 0:
        return None
    return max(0.0, now - backlog.oldest_created_at)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
