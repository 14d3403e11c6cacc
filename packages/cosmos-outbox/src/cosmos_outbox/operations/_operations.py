"""The operators' use cases behind one object, `Operations`, split by role as Wolverine splits
its message store (`IDeadLetters`, `IScheduledMessages`, ...): `status` (the relay's backlog,
its history, health), `quarantine` (list, show, replay, discard), `dead_letters`, `journey`
(an event's, an aggregate's, its documents), `subscribers` (their holds and their release) and
`redrive`. Every way in (the operators' routes, their console, the command line through the
routes) calls these and nothing else. Replay and re-drive send through the relay itself
(`cosmos_outbox._relay.forwarding.Relay`), so an event goes out exactly as the change-feed
trigger would send it: same session and version, the same quarantine rules (a replay with its
own MessageId, the event id; a re-drive with MessageIds of its own: `_redrive`).
Aggregate-neutral: a re-drive may be narrowed to one aggregate type, and to one aggregate of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._records import LegacyEvents
from cosmos_outbox._relay.backlog_history import BacklogHistory
from cosmos_outbox._relay.forwarding import Relay
from cosmos_outbox._relay.health import RelayHealth
from cosmos_outbox.http._paging import TokenCodec
from cosmos_outbox.operations._dead_letters import DeadLetterOperators
from cosmos_outbox.operations._journey import JourneyOperators
from cosmos_outbox.operations._quarantined import QuarantineOperators
from cosmos_outbox.operations._redrive import RedriveOperators
from cosmos_outbox.operations._roles import (
    DeadLetterOperations,
    JourneyOperations,
    QuarantineOperations,
    RedriveOperations,
    StatusOperations,
    SubscriberOperations,
)
from cosmos_outbox.operations._status import StatusOperators
from cosmos_outbox.operations._subscribers import SubscriberOperators
from cosmos_outbox.ports import (
    AsyncBacklogEstimator,
    AsyncDeadLetterQueues,
    AsyncDocumentStore,
    DeadLetterEntity,
)


@dataclass(frozen=True)
class PagingTokens:
    """The sealed continuation tokens of the operators' paged answers (a token of one kind is
    refused by another: each has its own key)."""

    quarantine: TokenCodec
    dead_letters: TokenCodec
    documents: TokenCodec
    redrive: TokenCodec


class Operations:
    """The operators' one API, by role (see the module): what every way in calls. Built by the
    outbox's wiring on its store, quarantine, relay, backlog estimator, dead-letter queues and
    the subscribers' containers it knows (`Outbox.operations()`); async (the sync API's routes
    run it on their event loop)."""

    def __init__(
        self,
        *,
        store: AsyncDocumentStore,
        quarantine: Quarantine,
        relay: Callable[[], Relay],
        backlog: Callable[[], AsyncBacklogEstimator],
        history: BacklogHistory,
        event_ttl_seconds: int,
        tokens: PagingTokens,
        legacy: LegacyEvents | None = None,
        clock: Callable[[], float] = time.time,
        health: RelayHealth | None = None,
        dead_letters: Callable[[], AsyncDeadLetterQueues | None] = lambda: None,
        watched: tuple[DeadLetterEntity, ...] = (),
        subscribers: Callable[[], Mapping[str, AsyncDocumentStore]] = dict,
    ) -> None:
        self.tokens = tokens
        self.status: StatusOperations = StatusOperators(
            store=store,
            quarantine=quarantine,
            backlog=backlog,
            history=history,
            health=health,
            clock=clock,
        )
        self.quarantine: QuarantineOperations = QuarantineOperators(
            quarantine=quarantine, relay=relay, event_ttl_seconds=event_ttl_seconds
        )
        letters = DeadLetterOperators(dead_letters, watched)
        self.dead_letters: DeadLetterOperations = letters
        self.journey: JourneyOperations = JourneyOperators(
            store=store,
            quarantine=quarantine,
            backlog=backlog,
            dead_letters=letters,
            subscribers=subscribers,
            event_ttl_seconds=event_ttl_seconds,
            legacy=legacy,
        )
        self.subscribers: SubscriberOperations = SubscriberOperators(
            store=store,
            relay=relay,
            dead_letters=letters,
            subscribers=subscribers,
            legacy=legacy,
        )
        self.redrive: RedriveOperations = RedriveOperators(
            store=store,
            relay=relay,
            tokens=tokens.redrive,
            subscribers=subscribers,
            dead_letters=letters,
            legacy=legacy,
        )
