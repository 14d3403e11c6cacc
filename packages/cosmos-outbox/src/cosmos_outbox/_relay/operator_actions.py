"""The operators' use cases: the outbox's status, the quarantine (list, replay, discard),
re-drive, and the recovery beyond them (`cosmos_outbox._recovery`: dead letters, the journey of
an event, the subscribers' holds and their release). Replay and re-drive send through the relay
itself (`cosmos_outbox._relay.forwarding.Relay`), so an event goes out exactly as the change-feed
trigger would send it: same session and version, the same quarantine rules (a replay with its
own MessageId, the event id; a re-drive with MessageIds of its own:
`cosmos_outbox._recovery.redrive`). Aggregate-neutral: a re-drive may be narrowed to one
aggregate type, and to one aggregate of it.

**Discarding a quarantined event gives its version up**: its discard notice
(`OutboxEventDiscarded`, with the version, action, reason and who discarded it) is sent in its
session, where the event would have been, to every subscription, and only then the record is
marked discarded (kept, with who and why, until it expires): the library's subscriber records an
accepted gap and applies the versions it held after it. A discarded event is not replayed.

Every action writes one audit log line (`cosmos_outbox._recovery.audit`) with what subscribers
will see, its values as fields (`extra`): `outbox.audit` (`quarantine.replay`,
`quarantine.discard`, `redrive`, `deadletters.resubmit`, ...), `outbox.subscribers_will_see`,
`outbox.event_id`, `outbox.reason`..., and who did it (`cosmos_outbox._actor`: "by <name> (id
<object id>)" or "by admin key", and the fields `outbox.actor`, `outbox.actor_kind`,
`outbox.actor_name`, `outbox.actor_id`); the discard notice names the same actor
(`discardedBy`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cosmos_outbox._actor import current_actor
from cosmos_outbox._domain import DomainError
from cosmos_outbox._quarantine import Quarantine, QuarantinedEvent
from cosmos_outbox._records import LegacyEvents, OutboxMessage
from cosmos_outbox._recovery.dead_letters import DeadLetterOperators
from cosmos_outbox._recovery.giving_up import notice_of_event, will_see_notice
from cosmos_outbox._recovery.journey import JourneyOperators
from cosmos_outbox._recovery.redrive import RedriveOperators, RedrivePage
from cosmos_outbox._recovery.stored import stored_events as stored_events
from cosmos_outbox._recovery.subscribers import SubscriberOperators
from cosmos_outbox._relay.backlog import age_seconds
from cosmos_outbox._relay.forwarding import Relay
from cosmos_outbox._relay.health import RelayBlocked, RelayHealth
from cosmos_outbox._relay.releases import Waiting, waiting
from cosmos_outbox.errors import PublishFailedError, RelayNotReadyError
from cosmos_outbox.http._paging import TokenCodec
from cosmos_outbox.ports import (
    AsyncBacklogEstimator,
    AsyncDeadLetterQueues,
    AsyncDocumentStore,
    DeadLetterEntity,
    LeaseBacklog,
    Page,
)
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
    #: the scheduled events waiting for their due time or their release (how many overdue)
    scheduled: Waiting | None = None


@dataclass(frozen=True)
class Discarded:
    """A quarantined event given up: its record (discarded), the notice sent (None when its
    aggregate or version could not be read), and what subscribers will see."""

    entry: QuarantinedEvent
    notice: OutboxMessage | None
    subscribers_will_see: str
    #: it was discarded before: nothing was done again
    already: bool = False


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
        dead_letters: Callable[[], AsyncDeadLetterQueues | None] = lambda: None,
        watched: tuple[DeadLetterEntity, ...] = (),
        subscribers: Callable[[], Mapping[str, AsyncDocumentStore]] = dict,
        redrive_tokens: TokenCodec,
    ) -> None:
        self._health = health
        self.dead_letters = DeadLetterOperators(dead_letters, watched)
        self.journey = JourneyOperators(
            store=store,
            quarantine=quarantine,
            backlog=backlog,
            dead_letters=self.dead_letters,
            subscribers=subscribers,
            event_ttl_seconds=event_ttl_seconds,
            legacy=legacy,
        )
        self.subscribers = SubscriberOperators(
            store=store,
            relay=relay,
            dead_letters=self.dead_letters,
            subscribers=subscribers,
            legacy=legacy,
        )
        self._redrive = RedriveOperators(
            store=store,
            relay=relay,
            tokens=redrive_tokens,
            subscribers=subscribers,
            legacy=legacy,
        )
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
            scheduled=await waiting(self._store),
        )

    async def quarantine_page(
        self, *, page_size: int, continuation: str | None
    ) -> Page[QuarantinedEvent]:
        return await self._quarantine.list_page(page_size=page_size, continuation=continuation)

    async def replay(self, event_id: str) -> QuarantinedEvent:
        """Send the stored event through the relay again, with its own id. Sent: the record is
        resolved. Set aside again (or the send failed): it stays, with the new reason, and
        replays + 1. A resolved record is not sent again (replaying twice is harmless); a
        discarded one is refused (its version was given up: subscribers moved past it)."""
        entry = await self._quarantine.get(event_id)
        if entry.discarded:
            raise DomainError(
                f"event {event_id} was discarded by {entry.discarded_by} "
                f"({entry.discard_reason}): its version was given up and subscribers moved "
                "past it; it is not sent again"
            )
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
            will_see=(
                f"event {result.event_id} (version {result.version}) in its session, under its "
                "own MessageId: a subscriber that received its quarantine notice applies it "
                "and the versions it held after it"
                if result.resolved
                else "nothing new"
            ),
        )
        return result

    async def discard(self, event_id: str, reason: str) -> Discarded:
        """Give the event up: its discard notice sent in its session (every subscription),
        then the record marked discarded (kept until it expires). Discarding it again answers
        what the first discard did, sending nothing. Who discarded it (the notice's
        `discardedBy`, the record's) is the current actor."""
        entry = await self._quarantine.get(event_id)
        if entry.discarded:
            return Discarded(
                entry,
                None,
                f"nothing new: it was discarded at {entry.discarded_at} by "
                f"{entry.discarded_by}, and its notice sent then",
                already=True,
            )
        by = str(current_actor())
        notice = notice_of_event(entry.event, reason=reason, by=by)
        if notice is not None:
            try:
                await self._relay().send([notice])
            except Exception as exc:  # nothing changed: the record stays quarantined
                raise PublishFailedError(
                    f"the discard notice failed to send: {error_type(exc)}"
                ) from exc
        why = "the event's aggregate or version cannot be read from its document"
        will_see = will_see_notice(notice, why_none=why)
        discarded = await self._quarantine.discard(
            entry, by=by, reason=reason, ttl_seconds=self._ttl
        )
        _audit("quarantine.discard", discarded, reason, will_see=will_see)
        return Discarded(discarded, notice, will_see)

    async def redrive(
        self,
        since: datetime,
        *,
        aggregate_type: str | None = None,
        aggregate_id: str | None = None,
        subscription: str | None = None,
        page_size: int = 100,
        continuation: str | None = None,
    ) -> RedrivePage:
        """One page of a re-drive of the stored events created at or after `since` (of one
        aggregate type, and one aggregate of it, if given; to one watched subscription if
        given): see `cosmos_outbox._recovery.redrive`."""
        if subscription is not None:
            subscription = self.dead_letters.entity(subscription).name
        return await self._redrive.redrive(
            since,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            subscription=subscription,
            page_size=page_size,
            continuation=continuation,
        )


def _audit(
    action: str, entry: QuarantinedEvent, reason: str, *, will_see: str = "nothing new"
) -> None:
    actor = current_actor()
    fields: dict[str, Any] = {
        **actor.log_fields(),
        "outbox.audit": action,
        "outbox.subscribers_will_see": will_see,
        "outbox.event_id": entry.event_id,
        "outbox.aggregate_type": entry.aggregate_type,
        "outbox.aggregate_id": entry.aggregate_id,
        "outbox.action": entry.action,
        "outbox.version": entry.version,
        "outbox.reason": reason,
        "outbox.replays": entry.replays,
    }
    logger.warning(
        "outbox audit: %s of event %s (%s %s v%s) by %s: %s; subscribers will see: %s",
        action,
        entry.event_id,
        entry.aggregate_type,
        entry.aggregate_id,
        entry.version,
        actor,
        reason,
        will_see,
        extra=fields,
    )
