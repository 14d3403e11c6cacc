"""The operators' one API: what every way in (cosmos-outbox-operators' routes, console and
command line; an app's own tool) calls to see and recover the outbox. An outbox gives it,
`outbox.operations()` -> `Operations`, by role (`_operations` names them); each answers models a
way in renders as they are. Async: a sync caller runs it on an event loop. Every action writes
one audit line naming who did it (`Actor`, run `acting_as`) and what subscribers will see
(docs/operating-the-outbox.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmos_outbox._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers read; at run time: `_EXPORTS`
    from cosmos_outbox._quarantine import QuarantinedEvent as QuarantinedEvent
    from cosmos_outbox._records import trace_id as trace_id
    from cosmos_outbox._relay.backlog_history import Reading as Reading
    from cosmos_outbox.operations._actor import ADMIN_KEY as ADMIN_KEY
    from cosmos_outbox.operations._actor import NO_KEY as NO_KEY
    from cosmos_outbox.operations._actor import Actor as Actor
    from cosmos_outbox.operations._actor import acting_as as acting_as
    from cosmos_outbox.operations._bulk._kinds import BULK_KINDS as BULK_KINDS
    from cosmos_outbox.operations._bulk._operation import Operation as Operation
    from cosmos_outbox.operations._bulk._operation import OperationList as OperationList
    from cosmos_outbox.operations._dead_letters import MAX_PER_CALL as MAX_PER_CALL
    from cosmos_outbox.operations._failure_actions import FailureActed as FailureActed
    from cosmos_outbox.operations._failure_actions import FailureSummary as FailureSummary
    from cosmos_outbox.operations._groups import FailureGroups as FailureGroups
    from cosmos_outbox.operations._groups import GroupOutcome as GroupOutcome
    from cosmos_outbox.operations._groups import Unarchived as Unarchived
    from cosmos_outbox.operations._journey import AggregateJourney as AggregateJourney
    from cosmos_outbox.operations._journey import EventJourney as EventJourney
    from cosmos_outbox.operations._letters import ActionReport as ActionReport
    from cosmos_outbox.operations._letters import DeadLetterCounts as DeadLetterCounts
    from cosmos_outbox.operations._letters import DeadLetterMessage as DeadLetterMessage
    from cosmos_outbox.operations._letters import LetterFilter as LetterFilter
    from cosmos_outbox.operations._letters import LetterPreview as LetterPreview
    from cosmos_outbox.operations._letters import LetterSummary as LetterSummary
    from cosmos_outbox.operations._letters import Selection as Selection
    from cosmos_outbox.operations._operations import Operations as Operations
    from cosmos_outbox.operations._quarantined import Discarded as Discarded
    from cosmos_outbox.operations._redrive import RedrivePage as RedrivePage
    from cosmos_outbox.operations._redrive import RedrivePreview as RedrivePreview
    from cosmos_outbox.operations._status import OutboxStatus as OutboxStatus
    from cosmos_outbox.operations._stored import stored_events as stored_events
    from cosmos_outbox.operations._subscribers import Released as Released
    from cosmos_outbox.operations._subscribers import Subscribers as Subscribers

#: Each public name and the module that defines it: what a way in or an app uses (the
#: public-API test lists them); the results' parts are reached as their fields' types.
_EXPORTS = {
    # the one API
    "Operations": "cosmos_outbox.operations._operations",
    # who acts (the doors of a way in)
    "Actor": "cosmos_outbox.operations._actor",
    "ADMIN_KEY": "cosmos_outbox.operations._actor",
    "NO_KEY": "cosmos_outbox.operations._actor",
    "acting_as": "cosmos_outbox.operations._actor",
    # what they answer (a way in renders these)
    "OutboxStatus": "cosmos_outbox.operations._status",
    "Reading": "cosmos_outbox._relay.backlog_history",
    "QuarantinedEvent": "cosmos_outbox._quarantine",
    "Discarded": "cosmos_outbox.operations._quarantined",
    "DeadLetterCounts": "cosmos_outbox.operations._letters",
    "LetterSummary": "cosmos_outbox.operations._letters",
    "DeadLetterMessage": "cosmos_outbox.operations._letters",
    "ActionReport": "cosmos_outbox.operations._letters",
    "LetterPreview": "cosmos_outbox.operations._letters",
    "EventJourney": "cosmos_outbox.operations._journey",
    "AggregateJourney": "cosmos_outbox.operations._journey",
    "Subscribers": "cosmos_outbox.operations._subscribers",
    "Released": "cosmos_outbox.operations._subscribers",
    "RedrivePage": "cosmos_outbox.operations._redrive",
    "RedrivePreview": "cosmos_outbox.operations._redrive",
    "FailureGroups": "cosmos_outbox.operations._groups",
    "GroupOutcome": "cosmos_outbox.operations._groups",
    "Unarchived": "cosmos_outbox.operations._groups",
    "FailureSummary": "cosmos_outbox.operations._failure_actions",
    "FailureActed": "cosmos_outbox.operations._failure_actions",
    "Operation": "cosmos_outbox.operations._bulk._operation",
    "OperationList": "cosmos_outbox.operations._bulk._operation",
    # the kinds of bulk operation, each said once (what a way in shows or asks of each)
    "BULK_KINDS": "cosmos_outbox.operations._bulk._kinds",
    # what a way in asks (which dead letters; how many one call handles)
    "LetterFilter": "cosmos_outbox.operations._letters",
    "Selection": "cosmos_outbox.operations._letters",
    "MAX_PER_CALL": "cosmos_outbox.operations._dead_letters",
    # an event's trace id (its traceparent's: Application Insights' operation id)
    "trace_id": "cosmos_outbox._records",
    # the stored events a re-drive reads (the test kit's worlds read them too)
    "stored_events": "cosmos_outbox.operations._stored",
}

__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
