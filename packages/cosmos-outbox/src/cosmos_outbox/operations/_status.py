"""The relay as operators see it: its backlog per lease, what blocks it, the unresolved
quarantine, the scheduled events waiting (`StatusOperators.now`), the backlog timer's last hour,
and health."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cosmos_outbox._relay.backlog import age_seconds
from cosmos_outbox._relay.backlog_history import Reading
from cosmos_outbox._relay.health import RelayBlocked
from cosmos_outbox._relay.releases import Waiting, waiting
from cosmos_outbox.errors import RelayNotReadyError
from cosmos_outbox.operations._health import health_answer
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.ports import (
    LeaseBacklog,
)
from cosmos_outbox.telemetry import error_type


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
    #: the scheduled events waiting for their due time or their release (how many overdue)
    scheduled: Waiting | None = None


class StatusOperators:
    """The relay as operators see it: its backlog per lease and the unresolved quarantine
    (`now`), the backlog timer's last hour (`backlog`), and health (`health`)."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts

    async def now(self) -> OutboxStatus:
        """The change-feed backlog as the estimator sees it, and the unresolved quarantine.
        Without its lease container there is no backlog to read: no leases, and the relay
        blocked before any event, naming it (what the backlog timer records too)."""
        now = self._parts.clock()
        missing: RelayNotReadyError | None = None
        try:
            backlog = await self._parts.backlog().estimate()
        except RelayNotReadyError as exc:
            backlog, missing = [], exc
        leases = [LeaseStatus(b, age_seconds(b, now)) for b in backlog]
        ages = [s.oldest_age_seconds for s in leases if s.oldest_age_seconds is not None]
        blocked = await self._parts.health.current() if self._parts.health is not None else None
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
            quarantined=await self._parts.quarantine.count(),
            leases=leases,
            blocked=blocked,
            scheduled=await waiting(self._parts.store),
        )

    async def backlog(self) -> list[Reading]:
        """The backlog timer's readings of the last hour, oldest first (the console's chart)."""
        return await self._parts.history.readings()

    async def health(self) -> dict[str, Any]:
        """/health's answer: the store answers (else it raises), and "degraded", with what
        the relay is stuck on, when the relay says so."""
        return await health_answer(
            self._parts.store.ping,
            self._parts.health.current if self._parts.health is not None else None,
        )
