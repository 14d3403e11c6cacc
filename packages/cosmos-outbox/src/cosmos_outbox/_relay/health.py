"""Whether the relay is blocked, kept where every instance can read it: in Azure the relay, the
operators' routes and `/health` may run on different instances (Flex Consumption scales
function groups apart), so a relay that cannot send says so in one document of the outbox's
container (`outboxRelayStatus`, in a partition of its own), which the status and the health
read. It names the event it is stuck on, why, since when and how many attempts; it expires an
hour after the last failed attempt (a relay retries within a minute), and the relay deletes it
once it sends that event. Written only when something fails: a relay that works reads it once
per process, to clear what another instance left."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from cosmos_outbox._mapper import parse_time
from cosmos_outbox._model import Model
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.ports import AsyncDocumentStore

logger = logging.getLogger("cosmos_outbox.relay")

STATUS_ID = "outbox-relay-status"
STATUS_TYPE = "outboxRelayStatus"
#: Seconds the record outlives the last failed attempt.
STATUS_TTL_SECONDS = 3600


class RelayBlocked(Model):
    """The relay cannot get past `event_id` (None: before any event, e.g. its topic or payload
    container missing) because of `reason`, since `since`, after `attempts` attempts."""

    event_id: str | None
    reason: str
    since: datetime | None
    last_attempt: datetime | None
    attempts: int


class RelayHealth:
    """The relay's blocked record in the outbox's container (see the module)."""

    def __init__(self, store: AsyncDocumentStore) -> None:
        self._store = store
        #: whether a record may exist (unknown at start: another instance may have left one)
        self._maybe_recorded = True

    async def current(self) -> RelayBlocked | None:
        document = await self._store.read(STATUS_ID, STATUS_ID)
        return None if document is None else _blocked(document)

    async def blocked(self, event_id: str | None, reason: str) -> None:
        """Record a failed attempt (its own failures logged, never raised: the relay's error is
        the one that matters)."""
        try:
            now = datetime.now(UTC)
            known = await self.current()
            same = known is not None and known.event_id == event_id
            since = known.since if same and known is not None else None
            await self._store.upsert(
                {
                    "id": STATUS_ID,
                    "partitionKey": STATUS_ID,
                    "type": STATUS_TYPE,
                    "eventId": event_id,
                    "reason": reason[:2000],
                    "since": (since or now).isoformat(),
                    "lastAttempt": now.isoformat(),
                    "attempts": (known.attempts if same and known is not None else 0) + 1,
                    "ttl": STATUS_TTL_SECONDS,
                }
            )
            self._maybe_recorded = True
        except Exception:
            logger.warning("the relay's status could not be recorded", exc_info=True)

    async def sent(self, event_ids: set[str]) -> None:
        """An invocation sent `event_ids`: a record of being blocked on one of them (or on no
        event) is deleted."""
        if not self._maybe_recorded:
            return
        try:
            known = await self.current()
            if known is None:
                self._maybe_recorded = False
            elif known.event_id is None or known.event_id in event_ids:
                await self._store.delete(STATUS_ID, STATUS_ID)
                self._maybe_recorded = False
                logger.info(
                    "relay unblocked: sent event %s after %d failed attempt(s)",
                    known.event_id,
                    known.attempts,
                    extra={"outbox.event_id": known.event_id},
                )
        except NotFoundError:
            self._maybe_recorded = False
        except Exception:
            logger.warning("the relay's status could not be cleared", exc_info=True)


def _blocked(document: dict[str, Any]) -> RelayBlocked:
    event_id, attempts = document.get("eventId"), document.get("attempts")
    return RelayBlocked(
        event_id=event_id if isinstance(event_id, str) else None,
        reason=str(document.get("reason", "")),
        since=parse_time(document.get("since")),
        last_attempt=parse_time(document.get("lastAttempt")),
        attempts=attempts if type(attempts) is int else 0,
    )
