"""The backlog: how far the relay is behind, estimated per change-feed lease, so that a relay
that is not running at all (disabled, failing at start, no identity on Service Bus) still shows
a growing backlog. A timer-triggered function runs `report_backlog`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from cosmos_outbox.ports import AsyncBacklogEstimator, LeaseBacklog
from cosmos_outbox.telemetry import RelayTelemetry

#: The log category operators filter on (kept across module moves).
logger = logging.getLogger("cosmos_outbox.relay.backlog")


@dataclass(frozen=True)
class Backlog:
    leases: list[LeaseBacklog]
    pending: int
    oldest_age_seconds: float


async def report_backlog(
    estimator: AsyncBacklogEstimator,
    telemetry: RelayTelemetry,
    *,
    event_ttl_seconds: int,
    clock: Callable[[], float] = time.time,
) -> Backlog:
    """Estimate, record the gauges, and log. The TTL guard: when the oldest pending change is
    older than half the event TTL, log an error every time (events expire unrelayed at TTL)."""
    return record_backlog(
        await estimator.estimate(), telemetry, event_ttl_seconds=event_ttl_seconds, clock=clock
    )


def record_backlog(
    leases: list[LeaseBacklog],
    telemetry: RelayTelemetry,
    *,
    event_ttl_seconds: int,
    clock: Callable[[], float] = time.time,
) -> Backlog:
    """`report_backlog` for an estimate made already (a relay process reads the leases once for
    its gauges and its facts)."""
    now = clock()
    ages = [(b.lease, b.pending, age_seconds(b, now)) for b in leases]
    telemetry.backlog(ages)
    backlog = Backlog(
        leases, sum(b.pending for b in leases), max((age or 0.0 for _, _, age in ages), default=0.0)
    )
    fields = {
        "outbox.pending": backlog.pending,
        "outbox.oldest_pending_age_s": round(backlog.oldest_age_seconds, 3),
        "outbox.leases": len(leases),
    }
    logger.info(
        "outbox backlog: pending=%d oldest_pending_age_s=%.1f leases=%d",
        backlog.pending,
        backlog.oldest_age_seconds,
        len(leases),
        extra=fields,
    )
    if backlog.oldest_age_seconds > event_ttl_seconds / 2:
        logger.error(
            "outbox backlog: the oldest pending event is %.0f s old, more than half of "
            "EVENT_TTL_SECONDS=%d; events not relayed within the TTL are deleted unrelayed. "
            "Check that relay_events runs and can send to Service Bus.",
            backlog.oldest_age_seconds,
            event_ttl_seconds,
            extra={**fields, "outbox.ttl_guard": True},
        )
    return backlog


def age_seconds(backlog: LeaseBacklog, now: float) -> float | None:
    """How old the first pending change of a lease is at `now` (None when nothing is pending)."""
    if backlog.oldest_created_at is None or backlog.pending == 0:
        return None
    return max(0.0, now - backlog.oldest_created_at)
