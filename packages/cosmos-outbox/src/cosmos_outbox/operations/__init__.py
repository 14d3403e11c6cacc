"""The operators' one API: what every way in (the operators' routes and console, in
cosmos-outbox-operators; the command line, through the routes; an app's own tool) calls to see
and recover the outbox. An outbox gives it: `outbox.operations()` -> `Operations`, by role
(Wolverine's habit): `status`, `quarantine`, `dead_letters`, `journey`, `subscribers`,
`redrive` (each a protocol here: `StatusOperations`, ...), and `tokens` (the paged answers'
sealed continuation tokens). Async: a sync caller runs it on an event loop (`asyncio.run`).

- status: the backlog per lease, what blocks the relay, the scheduled events waiting, the
  backlog's last hour, health;
- quarantine: the events the relay set aside: listed, shown, replayed, discarded (a discard
  gives the version up: `OutboxEventDiscarded` in its session, what subscribers will see);
- dead letters: the dead-letter queues of the watched subscriptions (and queues): counted,
  listed with a filter, peeked, resubmitted through duplicate detection, discarded;
- journey: where one event (or an aggregate's events) went, and an aggregate's documents;
- subscribers: what the library's subscribers hold and why, and releasing it;
- re-drive: stored events sent again under MessageIds of their own, a page at a time, with what
  subscribers will apply.

Every action writes one audit line (`cosmos_outbox.operators`, `outbox audit: ...`) naming who
did it (`current_actor()`: the `Actor` a way in admitted and runs the action `acting_as`) and
what subscribers will see. Where an aggregate's documents live is asked of one function,
`partitions_of` (the aggregate id is the session id its messages carry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmos_outbox._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers read; at run time: `_EXPORTS`
    from cosmos_outbox._quarantine import QuarantinedEvent as QuarantinedEvent
    from cosmos_outbox._records import trace_id as trace_id
    from cosmos_outbox._relay.backlog_history import Reading as Reading
    from cosmos_outbox._relay.health import RelayBlocked as RelayBlocked
    from cosmos_outbox._relay.releases import Waiting as Waiting
    from cosmos_outbox.operations._actor import ADMIN_KEY as ADMIN_KEY
    from cosmos_outbox.operations._actor import NO_KEY as NO_KEY
    from cosmos_outbox.operations._actor import UNKNOWN as UNKNOWN
    from cosmos_outbox.operations._actor import Actor as Actor
    from cosmos_outbox.operations._actor import acting_as as acting_as
    from cosmos_outbox.operations._actor import current_actor as current_actor
    from cosmos_outbox.operations._dead_letters import MAX_PER_CALL as MAX_PER_CALL
    from cosmos_outbox.operations._dead_letters import ActionReport as ActionReport
    from cosmos_outbox.operations._dead_letters import Described as Described
    from cosmos_outbox.operations._dead_letters import EntityCount as EntityCount
    from cosmos_outbox.operations._dead_letters import Handled as Handled
    from cosmos_outbox.operations._dead_letters import LetterFilter as LetterFilter
    from cosmos_outbox.operations._dead_letters import LetterPreview as LetterPreview
    from cosmos_outbox.operations._dead_letters import LetterSummary as LetterSummary
    from cosmos_outbox.operations._dead_letters import Selection as Selection
    from cosmos_outbox.operations._dead_letters import describe as describe
    from cosmos_outbox.operations._dead_letters import resubmission as resubmission
    from cosmos_outbox.operations._dead_letters import resubmission_id as resubmission_id
    from cosmos_outbox.operations._dependencies import Unanswered as Unanswered
    from cosmos_outbox.operations._giving_up import Notice as Notice
    from cosmos_outbox.operations._journey import AggregateJourney as AggregateJourney
    from cosmos_outbox.operations._journey import DeadLetterSight as DeadLetterSight
    from cosmos_outbox.operations._journey import EventJourney as EventJourney
    from cosmos_outbox.operations._journey import QuarantineSight as QuarantineSight
    from cosmos_outbox.operations._journey import Step as Step
    from cosmos_outbox.operations._journey import SubscriberAggregate as SubscriberAggregate
    from cosmos_outbox.operations._journey import SubscriberSight as SubscriberSight
    from cosmos_outbox.operations._operations import Operations as Operations
    from cosmos_outbox.operations._parts import PagingTokens as PagingTokens
    from cosmos_outbox.operations._quarantined import Discarded as Discarded
    from cosmos_outbox.operations._redrive import EventSummary as EventSummary
    from cosmos_outbox.operations._redrive import RedrivePage as RedrivePage
    from cosmos_outbox.operations._redrive import RedrivePreview as RedrivePreview
    from cosmos_outbox.operations._redrive import SubscriberCounts as SubscriberCounts
    from cosmos_outbox.operations._roles import DeadLetterOperations as DeadLetterOperations
    from cosmos_outbox.operations._roles import JourneyOperations as JourneyOperations
    from cosmos_outbox.operations._roles import QuarantineOperations as QuarantineOperations
    from cosmos_outbox.operations._roles import RedriveOperations as RedriveOperations
    from cosmos_outbox.operations._roles import StatusOperations as StatusOperations
    from cosmos_outbox.operations._roles import SubscriberOperations as SubscriberOperations
    from cosmos_outbox.operations._status import DependencyState as DependencyState
    from cosmos_outbox.operations._status import LeaseStatus as LeaseStatus
    from cosmos_outbox.operations._status import OutboxStatus as OutboxStatus
    from cosmos_outbox.operations._status import RelayState as RelayState
    from cosmos_outbox.operations._status import TargetRulesState as TargetRulesState
    from cosmos_outbox.operations._stored import partitions_of as partitions_of
    from cosmos_outbox.operations._stored import stored_events as stored_events
    from cosmos_outbox.operations._subscribers import Released as Released
    from cosmos_outbox.operations._subscribers import SubscriberView as SubscriberView
    from cosmos_outbox.operations._watch import VanishedLetter as VanishedLetter
    from cosmos_outbox.operations._watch import WatchRecord as WatchRecord

#: Each public name and the module that defines it.
_EXPORTS = {
    # the one API, by role
    "Operations": "cosmos_outbox.operations._operations",
    "PagingTokens": "cosmos_outbox.operations._parts",
    "StatusOperations": "cosmos_outbox.operations._roles",
    "QuarantineOperations": "cosmos_outbox.operations._roles",
    "DeadLetterOperations": "cosmos_outbox.operations._roles",
    "JourneyOperations": "cosmos_outbox.operations._roles",
    "SubscriberOperations": "cosmos_outbox.operations._roles",
    "RedriveOperations": "cosmos_outbox.operations._roles",
    # who acts
    "Actor": "cosmos_outbox.operations._actor",
    "ADMIN_KEY": "cosmos_outbox.operations._actor",
    "UNKNOWN": "cosmos_outbox.operations._actor",
    "NO_KEY": "cosmos_outbox.operations._actor",
    "acting_as": "cosmos_outbox.operations._actor",
    "current_actor": "cosmos_outbox.operations._actor",
    # what they answer
    "OutboxStatus": "cosmos_outbox.operations._status",
    "RelayState": "cosmos_outbox.operations._status",
    "TargetRulesState": "cosmos_outbox.operations._status",
    "DependencyState": "cosmos_outbox.operations._status",
    "Unanswered": "cosmos_outbox.operations._dependencies",
    "VanishedLetter": "cosmos_outbox.operations._watch",
    "WatchRecord": "cosmos_outbox.operations._watch",
    "LetterPreview": "cosmos_outbox.operations._dead_letters",
    "LetterSummary": "cosmos_outbox.operations._dead_letters",
    "Notice": "cosmos_outbox.operations._giving_up",
    "QuarantineSight": "cosmos_outbox.operations._journey",
    "DeadLetterSight": "cosmos_outbox.operations._journey",
    "Step": "cosmos_outbox.operations._journey",
    "RedrivePreview": "cosmos_outbox.operations._redrive",
    "EventSummary": "cosmos_outbox.operations._redrive",
    "LeaseStatus": "cosmos_outbox.operations._status",
    "RelayBlocked": "cosmos_outbox._relay.health",
    "Waiting": "cosmos_outbox._relay.releases",
    "Reading": "cosmos_outbox._relay.backlog_history",
    "QuarantinedEvent": "cosmos_outbox._quarantine",
    "Discarded": "cosmos_outbox.operations._quarantined",
    "ActionReport": "cosmos_outbox.operations._dead_letters",
    "Described": "cosmos_outbox.operations._dead_letters",
    "EntityCount": "cosmos_outbox.operations._dead_letters",
    "Handled": "cosmos_outbox.operations._dead_letters",
    "LetterFilter": "cosmos_outbox.operations._dead_letters",
    "Selection": "cosmos_outbox.operations._dead_letters",
    "MAX_PER_CALL": "cosmos_outbox.operations._dead_letters",
    "describe": "cosmos_outbox.operations._dead_letters",
    "resubmission": "cosmos_outbox.operations._dead_letters",
    "resubmission_id": "cosmos_outbox.operations._dead_letters",
    "EventJourney": "cosmos_outbox.operations._journey",
    "AggregateJourney": "cosmos_outbox.operations._journey",
    "SubscriberSight": "cosmos_outbox.operations._journey",
    "SubscriberAggregate": "cosmos_outbox.operations._journey",
    "SubscriberView": "cosmos_outbox.operations._subscribers",
    "Released": "cosmos_outbox.operations._subscribers",
    "RedrivePage": "cosmos_outbox.operations._redrive",
    "SubscriberCounts": "cosmos_outbox.operations._redrive",
    # an event's trace id (its traceparent's: Application Insights' operation id)
    "trace_id": "cosmos_outbox._records",
    # where an aggregate's documents live; the stored events a re-drive reads
    "partitions_of": "cosmos_outbox.operations._stored",
    "stored_events": "cosmos_outbox.operations._stored",
}

__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
