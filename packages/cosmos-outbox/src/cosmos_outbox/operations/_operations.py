"""The operators' use cases behind one object, `Operations`, split by role as Wolverine splits
its message store: `status` (the relay's backlog, its history, health), `quarantine` (list,
show, replay, discard), `dead_letters`, `journey` (an event's, an aggregate's, its documents),
`subscribers` (their holds and their release), `redrive`, `groups` (failures grouped by cause),
`bulk` (bulk operations: a group's retry or discard, a subscription's dead letters
resubmitted or discarded, a re-drive, worked in batches by whoever runs the relay) and
`failures` (the failure records of either kind, dead letters and the quarantine's, listed and
each retried, archived or unarchived by its id). Replay and
re-drive send through the relay itself (`cosmos_outbox._relay.forwarding`), so an event goes out
exactly as the change-feed trigger sends it."""

from __future__ import annotations

from cosmos_outbox.operations._bulk._operators import BulkOperators
from cosmos_outbox.operations._dead_letters import DeadLetterOperators
from cosmos_outbox.operations._failure_actions import FailureOperators
from cosmos_outbox.operations._groups import GroupOperators
from cosmos_outbox.operations._journey import JourneyOperators
from cosmos_outbox.operations._parts import PagingTokens as PagingTokens
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.operations._quarantined import QuarantineOperators
from cosmos_outbox.operations._redrive import RedriveOperators
from cosmos_outbox.operations._status import StatusOperators
from cosmos_outbox.operations._subscribers import SubscriberOperators
from cosmos_outbox.operations._watch import DeadLetterWatch


class Operations:
    """The operators' one API, by role (see the module): what every way in calls. Built by the
    outbox's wiring on its store, quarantine, relay, backlog estimator, dead-letter queues and
    the subscribers' containers it knows (`Outbox.operations()`); async (the sync API's routes
    run it on their event loop)."""

    def __init__(self, parts: Parts) -> None:
        self.tokens = parts.tokens
        letters = DeadLetterOperators(
            parts.dead_letters,
            parts.watched,
            watch=DeadLetterWatch(parts),
            rules=lambda: self.status.rule_check(),
            failures=parts.failures,
        )
        self.status = StatusOperators(parts, letters)
        self.quarantine = QuarantineOperators(parts)
        self.dead_letters = letters
        self.journey = JourneyOperators(parts, letters, self.status.rule_check)
        self.subscribers = SubscriberOperators(parts, letters)
        self.redrive = RedriveOperators(parts, letters, self.status.rule_check)
        self.groups = GroupOperators(
            self.quarantine,
            letters,
            self.status.rule_check,
            source_base=parts.source_base,
            failures=parts.failures,
        )
        self.bulk = BulkOperators(parts, self.quarantine, letters, self.groups, self.redrive)
        self.failures = FailureOperators(parts.failures, letters, self.quarantine, self.bulk)
