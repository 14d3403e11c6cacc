"""The operators' role interfaces (Wolverine's habit: `IDeadLetters`, `IScheduledMessages`, an
admin service "meant for" its console): one protocol per role, each the API a way in calls for
that role; `Operations` gives one of each. An app or a test may stand in for one role alone."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cosmos_outbox._quarantine import QuarantinedEvent
    from cosmos_outbox._relay.backlog_history import Reading
    from cosmos_outbox.operations._journey import AggregateJourney, EventJourney
    from cosmos_outbox.operations._letters import (
        ActionReport,
        DeadLetterCounts,
        DeadLetterMessage,
        LetterFilter,
        LetterPreview,
        LetterSummary,
        Selection,
    )
    from cosmos_outbox.operations._quarantined import Discarded
    from cosmos_outbox.operations._redrive import RedrivePage, RedrivePreview
    from cosmos_outbox.operations._status import OutboxStatus, RelayState, TargetRulesState
    from cosmos_outbox.operations._subscribers import Released, Subscribers
    from cosmos_outbox.operations._watch import VanishedLetter
    from cosmos_outbox.ports import DeadLetterEntity, LeaseBacklog, Page

__all__ = [
    "DeadLetterOperations",
    "JourneyOperations",
    "QuarantineOperations",
    "RedriveOperations",
    "StatusOperations",
    "SubscriberOperations",
]


class StatusOperations(Protocol):
    """The relay as operators see it."""

    async def now(self) -> OutboxStatus:
        """The backlog per lease, the unresolved quarantine, what blocks the relay, the
        scheduled events waiting."""
        ...

    async def backlog(self) -> list[Reading]:
        """The backlog timer's readings of the last hour, oldest first."""
        ...

    async def relay(
        self, leases: list[LeaseBacklog], *, not_ready: str | None = None
    ) -> RelayState:
        """The relay's state (healthy, stalled, not ready) from leases the caller read."""
        ...

    async def health(self) -> dict[str, Any]:
        """/health's answer (the store answers, else it raises; degraded when the relay is
        stuck)."""
        ...

    async def target_rules(self) -> TargetRulesState:
        """Which subscriptions of the topic lack the targeted-delivery rule, or not checked and
        why (the management API read at most every few minutes)."""
        ...


class QuarantineOperations(Protocol):
    """The events the relay set aside."""

    async def page(self, *, page_size: int, continuation: str | None) -> Page[QuarantinedEvent]:
        """One page of the quarantine's records (resolved ones too, until they expire)."""
        ...

    async def get(self, event_id: str) -> QuarantinedEvent:
        """One record (NotFoundError: none)."""
        ...

    async def replay(self, event_id: str) -> QuarantinedEvent:
        """Send it through the relay again; the record, resolved or still quarantined."""
        ...

    async def discard(self, event_id: str, reason: str) -> Discarded:
        """Give its version up: its discard notice sent, then the record kept as discarded."""
        ...


class DeadLetterOperations(Protocol):
    """The dead-letter queues of the watched subscriptions (and queues)."""

    watched: tuple[DeadLetterEntity, ...]

    def entity(self, name: str) -> DeadLetterEntity:
        """The watched entity of that name (NotFoundError: not watched)."""
        ...

    async def counts(self) -> DeadLetterCounts:
        """How many dead letters each watched entity holds."""
        ...

    async def page(
        self, entity: DeadLetterEntity, selected: LetterFilter, *, page_size: int, after: int
    ) -> tuple[list[LetterSummary], int | None]:
        """Up to `page_size` matching dead letters after sequence number `after`, and where
        to go on (None: no more)."""
        ...

    async def peek(self, entity: DeadLetterEntity, sequence_number: int) -> DeadLetterMessage:
        """One dead letter, whole."""
        ...

    async def preview(
        self, entity: DeadLetterEntity, selection: Selection, *, action: str
    ) -> LetterPreview:
        """What a resubmit or a discard of the selection would touch; nothing sent."""
        ...

    async def watch(self) -> list[VanishedLetter]:
        """One look for dead letters that left without being applied; the vanished ones."""
        ...

    async def vanished(self) -> list[VanishedLetter]:
        """The vanished dead letters known, unresolved."""
        ...

    async def resubmit(self, entity: DeadLetterEntity, selection: Selection) -> ActionReport:
        """Send the selected ones again through duplicate detection, to that entity only."""
        ...

    async def discard(
        self, entity: DeadLetterEntity, selection: Selection, *, reason: str
    ) -> ActionReport:
        """Give the selected ones up at that entity (their discard notices), then remove them."""
        ...


class JourneyOperations(Protocol):
    """Where events went."""

    async def of_event(self, event_id: str) -> EventJourney:
        """One event: stored, relayed, quarantined, dead-lettered, applied (NotFoundError:
        nothing knows it)."""
        ...

    async def of_aggregate(self, aggregate_type: str, aggregate_id: str) -> AggregateJourney:
        """Each of an aggregate's events, and each subscriber's view of it."""
        ...

    async def documents(
        self, aggregate_id: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        """The documents where the aggregate's live, as stored, a page at a time."""
        ...


class SubscriberOperations(Protocol):
    """What the library's subscribers hold, and releasing it."""

    async def status(self) -> Subscribers:
        """Per watched subscription: its dead letters, what it holds and why."""
        ...

    async def release(
        self,
        subscription: str,
        *,
        aggregate_type: str,
        aggregate_id: str,
        version: int,
        reason: str,
    ) -> Released:
        """Give one version up at one subscription (its discard notice, there only)."""
        ...


class RedriveOperations(Protocol):
    """Stored events sent again, under MessageIds of their own."""

    async def page(
        self,
        since: datetime,
        *,
        aggregate_type: str | None = None,
        aggregate_id: str | None = None,
        subscription: str | None = None,
        page_size: int = 100,
        continuation: str | None = None,
    ) -> RedrivePage:
        """One page of a re-drive, and what subscribers will apply."""
        ...

    async def preview(
        self,
        since: datetime,
        *,
        aggregate_type: str | None = None,
        aggregate_id: str | None = None,
        subscription: str | None = None,
        page_size: int = 100,
    ) -> RedrivePreview:
        """What a re-drive of this scope would send, and what subscribers would do; nothing
        sent."""
        ...
