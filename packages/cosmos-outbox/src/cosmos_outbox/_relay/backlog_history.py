"""The backlog's last hour, for the operators' console's chart: the backlog timer's readings
(total pending and the oldest pending event's age, once a minute by default), the last 60 of
them, kept in one document of the outbox's container (`outboxBacklogHistory`, in a partition of
its own) so that every instance reads the same hour -- in Azure the timer runs on one instance
and the console is served by any.

Cost: one point read and one upsert of a document of about 6 KB per tick (about 1 + 10 RU a
minute: under 16,000 RU a day, 0.2 RU/s on average). Metrics would need a query API the app
does not have (Azure Monitor), so the console keeps its own. Timer ticks do not overlap (Azure
runs a timer function on one instance at a time); if two ever did, the last write wins and a
reading is lost, which a chart survives. Recording never fails the tick: its failure is logged.
The document expires two hours after the last reading, when the timer stops."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cosmos_outbox._mapper import parse_time
from cosmos_outbox._model import Model
from cosmos_outbox.ports import AsyncDocumentStore

logger = logging.getLogger("cosmos_outbox.relay.backlog")

HISTORY_ID = "outbox-backlog-history"
HISTORY_TYPE = "outboxBacklogHistory"
#: Readings kept (an hour at the default schedule of one a minute).
KEPT_READINGS = 60
HISTORY_TTL_SECONDS = 7200


class Reading(Model):
    """One reading of the backlog timer: when, how many events were pending, and the oldest
    pending one's age."""

    at: datetime
    pending: int
    #: None when nothing was pending
    oldest_pending_age_seconds: float | None


class BacklogHistory:
    """The kept readings (see the module), over the outbox's container."""

    def __init__(self, store: AsyncDocumentStore, *, clock: Callable[[], float] = time.time):
        self._store = store
        self._clock = clock

    async def record(self, pending: int, oldest_pending_age_seconds: float | None) -> None:
        """Add a reading (now), keeping the last KEPT_READINGS; failures logged, never raised."""
        try:
            now = datetime.fromtimestamp(self._clock(), UTC)
            kept = await self._stored()
            age = oldest_pending_age_seconds if pending else None
            entry = {
                "at": now.isoformat(),
                "pending": pending,
                "oldestPendingAgeSeconds": None if age is None else round(age, 3),
            }
            await self._store.upsert(
                {
                    "id": HISTORY_ID,
                    "partitionKey": HISTORY_ID,
                    "type": HISTORY_TYPE,
                    "readings": [*kept, entry][-KEPT_READINGS:],
                    "ttl": HISTORY_TTL_SECONDS,
                }
            )
        except Exception:
            logger.warning("the backlog reading could not be kept for the console", exc_info=True)

    async def readings(self, *, within_seconds: float = 3600.0) -> list[Reading]:
        """The kept readings of the last `within_seconds`, oldest first."""
        since = self._clock() - within_seconds
        found = []
        for entry in await self._stored():
            at = parse_time(entry.get("at"))
            pending = entry.get("pending")
            age = entry.get("oldestPendingAgeSeconds")
            if at is None or type(pending) is not int or at.timestamp() < since:
                continue
            found.append(
                Reading(
                    at=at,
                    pending=pending,
                    oldest_pending_age_seconds=float(age) if isinstance(age, int | float) else None,
                )
            )
        return sorted(found, key=lambda r: r.at)

    async def _stored(self) -> list[dict[str, Any]]:
        document = await self._store.read(HISTORY_ID, HISTORY_ID)
        readings = document.get("readings") if document else None
        return [r for r in readings if isinstance(r, dict)] if isinstance(readings, list) else []
