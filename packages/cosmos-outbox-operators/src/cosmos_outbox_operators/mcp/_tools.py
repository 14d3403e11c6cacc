"""The MCP server's tools, declared once (`TOOLS`): each a name, what it does (the description an
agent reads), its arguments (a request model: the input schema, and its checks), what it answers
(a model: the output schema), the `Operations` call it makes, whether it acts (the operator role:
a read needs none beyond the door) and, for an action that gives a failure group up or sends it
again, the preview whose token it needs; an action on one failure by its record's id (either
kind: `retry_failure`, `archive_failure` with its reason, `unarchive_failure`) needs none, as
the routes' `failures/{failureId}/...` need none. The server, the operators' README's table and
its test read this table; a new tool (archive, unarchive, a failure's history) is one entry.
Nothing here imports the MCP SDK."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.http import Model, RequestModel, next_token
from cosmos_outbox.operations import (
    DeadLetterCounts,
    DeadLetterMessage,
    EventJourney,
    FailureActed,
    FailureGroups,
    FailureSummary,
    GroupOutcome,
    Operation,
    OperationList,
    Operations,
    OutboxStatus,
    Unarchived,
)
from cosmos_outbox_operators._preview import PREVIEW_TOKEN_PATTERN, group_preview_token
from cosmos_outbox_operators._routes.groups import GroupAction, group_decision
from cosmos_outbox_operators._routes.models import QuarantinedEventView
from cosmos_outbox_operators._types import PARAMETERS, OperatorReason
from cosmos_outbox_operators.mcp._adopted import QuarantineAdopted, adopt_quarantine

__all__ = ["TOOLS", "Tool", "tool_named"]


def _named(parameter: str) -> Any:
    """A string argument's checks: the routes' of their path parameter `parameter`."""
    declared = PARAMETERS[parameter]
    return Field(
        pattern=declared.pattern, max_length=declared.max_length, description=declared.what
    )


GroupId = Annotated[str, _named("groupId")]
OperationId = Annotated[str, _named("operationId")]
EventId = Annotated[str, _named("eventId")]
Entity = Annotated[str, _named("entity")]
FailureId = Annotated[str, _named("failureId")]


class NoArguments(RequestModel):
    """No arguments."""


class GroupDecision(GroupAction):
    """A failure group's retry or discard: the group, the action, why (a discard needs it), and a
    retry's canary."""

    group_id: GroupId


class ConfirmedGroupDecision(GroupDecision):
    """A failure group's retry or discard, with the token its preview answered."""

    preview_token: Annotated[
        str,
        Field(
            pattern=PREVIEW_TOKEN_PATTERN,
            description="previewToken from preview_group with these same arguments",
        ),
    ]


class GroupPreview(GroupOutcome):
    """A group's retry or discard previewed, and the token that confirms it (`act_on_group`)."""

    preview_token: str


class GroupNamed(RequestModel):
    """One failure group."""

    group_id: GroupId


class OperationNamed(RequestModel):
    """One bulk operation."""

    operation_id: OperationId


class EventNamed(RequestModel):
    """One event."""

    event_id: EventId


class FailureNamed(RequestModel):
    """One failed message kept as data (its id: a dead letter's `failure.id`, an event
    journey's `failures`)."""

    failure_id: FailureId


class FailureArchived(FailureNamed):
    """One failed message kept as data, given up, and why (required: the audit line, its
    record's history, the discard notice)."""

    reason: OperatorReason


class FailuresWanted(RequestModel):
    """Which failed messages kept as data: of a kind, in a state, of a group (each left out:
    any), and where the last page stopped."""

    kind: Literal["deadLetter", "quarantine"] | None = Field(
        None, description="deadLetter (drained from a dead-letter queue) or quarantine"
    )
    status: Literal["open", "resolved", "archived"] | None = Field(
        None, description="open, resolved (retried and accepted) or archived (given up)"
    )
    group: GroupId | None = None
    page_size: Annotated[int, Field(ge=1, le=100, description="failures per page")] = 100
    continuation_token: str | None = Field(
        None, max_length=8192, description="continuationToken of the page before, unchanged"
    )


class FailureList(Model):
    """A page of failed messages of either kind, and the token of the next page (null: the
    last)."""

    items: list[FailureSummary]
    continuation_token: str | None = None


class DeadLetterNamed(RequestModel):
    """One dead letter: where it is and its sequence number."""

    entity: Entity
    sequence_number: Annotated[int, Field(ge=0, le=2**63 - 1)]


Call = Callable[[Operations, Any], Coroutine[Any, Any, BaseModel]]


@dataclass(frozen=True)
class Tool:
    """One tool (see the module): `acts` needs the operator role; `preview` names the tool whose
    token (its answer's `previewToken`) it needs, given these arguments without the token."""

    name: str
    description: str
    arguments: type[RequestModel]
    answer: type[Model]
    call: Call
    acts: bool = False
    preview: str | None = None

    @property
    def destructive(self) -> bool:
        """Whether it gives failures up or sends them again (confirmed by a preview's token)."""
        return self.preview is not None


async def _preview_group(ops: Operations, a: GroupDecision) -> GroupPreview:
    outcome = await ops.groups.preview(a.group_id, a.action, reason=a.reason)
    token = group_preview_token(group_decision(a.group_id, a), outcome)
    return GroupPreview.model_validate({**dict(outcome), "preview_token": token})


async def _act_on_group(ops: Operations, a: ConfirmedGroupDecision) -> Operation:
    return await ops.bulk.start_group(
        a.group_id,
        a.action,
        reason=a.reason,
        canary=a.canary,
        canary_wait_seconds=a.canary_wait_seconds,
    )


async def _peek_dead_letter(ops: Operations, a: DeadLetterNamed) -> DeadLetterMessage:
    letters = ops.dead_letters
    return await letters.peek(letters.entity(a.entity), a.sequence_number)


async def _list_failures(ops: Operations, a: FailuresWanted) -> FailureList:
    """A page of `list_failures`, its token sealed as the route's (`GET failures`)."""
    tokens = ops.tokens.failures
    try:
        cursor = tokens.decode(a.continuation_token) if a.continuation_token else None
    except InvalidContinuationError as refused:  # answered 400, as the route answers it
        raise ValueError(f"continuationToken: {refused}") from None
    page = await ops.failures.page(
        kind=a.kind,
        state=a.status,
        group=a.group,
        page_size=a.page_size,
        continuation=cursor.store_token if cursor is not None else None,
    )
    token = next_token(page.continuation_token, cursor, tokens)
    return FailureList(items=page.items, continuation_token=token)


async def _show_quarantined(ops: Operations, a: EventNamed) -> QuarantinedEventView:
    return QuarantinedEventView.of_entry(await ops.quarantine.get(a.event_id))


TOOLS: tuple[Tool, ...] = (
    Tool(
        "outbox_status",
        "The relay's state (healthy, stalled and on what, not ready), its backlog per lease, the "
        "quarantined events, the scheduled events waiting, and the dead letters that left their "
        "queue without being applied.",
        NoArguments,
        OutboxStatus,
        lambda ops, a: ops.status.now(),
    ),
    Tool(
        "list_groups",
        "The failures (quarantined events and dead letters) grouped by cause, subscription and "
        "event type, each with its id, count, first and last seen and example events, the "
        "largest first.",
        NoArguments,
        FailureGroups,
        lambda ops, a: ops.groups.groups(),
    ),
    Tool(
        "preview_group",
        "What a failure group's retry or discard would do, nothing done: how many events, what "
        "subscribers will see, what each subscription receives. Answers previewToken, which "
        "act_on_group needs with the same arguments.",
        GroupDecision,
        GroupPreview,
        _preview_group,
    ),
    Tool(
        "act_on_group",
        "Retry (a retry sends `canary` events first, default 5, and the rest only once those are "
        "not seen failing again) or discard (with a reason) a failure group, as a bulk operation "
        "worked by the relay's hosts; answers the operation (show_operation follows it). Needs "
        "preview_group's previewToken for these same arguments.",
        ConfirmedGroupDecision,
        Operation,
        _act_on_group,
        acts=True,
        preview="preview_group",
    ),
    Tool(
        "unarchive_group",
        "Bring a failure group's archived records (a discard archives them, when failed "
        "messages are kept as data) back among the open ones, their retention removed, at most "
        "100 a call: `remaining` says how many are left (call again).",
        GroupNamed,
        Unarchived,
        lambda ops, a: ops.groups.unarchive(a.group_id),
        acts=True,
    ),
    Tool(
        "list_operations",
        "The bulk operations with their progress, the newest first: every one not finished, "
        "and the last finished ones.",
        NoArguments,
        OperationList,
        lambda ops, a: ops.bulk.list(),
    ),
    Tool(
        "show_operation",
        "One bulk operation: its state (created, canary, running, paused, done, cancelled), its "
        "items done, failed and skipped, what it says (the canary's verdict, why it paused).",
        OperationNamed,
        Operation,
        lambda ops, a: ops.bulk.get(a.operation_id),
    ),
    Tool(
        "continue_operation",
        "Continue a bulk operation paused after its canary: its other items are acted on as "
        "though the canary had succeeded.",
        OperationNamed,
        Operation,
        lambda ops, a: ops.bulk.resume(a.operation_id),
        acts=True,
    ),
    Tool(
        "cancel_operation",
        "Stop a bulk operation: no batch is begun after this (one in flight is finished); what "
        "it did stays done.",
        OperationNamed,
        Operation,
        lambda ops, a: ops.bulk.cancel(a.operation_id),
        acts=True,
    ),
    Tool(
        "count_dead_letters",
        "How many dead letters each watched subscription (and queue) holds.",
        NoArguments,
        DeadLetterCounts,
        lambda ops, a: ops.dead_letters.counts(),
    ),
    Tool(
        "peek_dead_letter",
        "One dead letter, whole: body, properties, dead-letter reason and description, delivery "
        "count, enqueued time, how often it was resubmitted (and, failures kept as data, its "
        "attempts and history: `failure`).",
        DeadLetterNamed,
        DeadLetterMessage,
        _peek_dead_letter,
    ),
    Tool(
        "show_failure",
        "One failed message kept as data (OUTBOX_FAILURE_INGEST), open, archived or resolved: "
        "the message whole, and its history (`failure`): each attempt that failed (when, the "
        "dead letter's sequence number, the reason) and what was done to it (retried, "
        "archived, unarchived: when, by whom, in which operation, why).",
        FailureNamed,
        DeadLetterMessage,
        lambda ops, a: ops.dead_letters.failure(a.failure_id),
    ),
    Tool(
        "list_failures",
        "The failed messages kept as data (OUTBOX_FAILURE_INGEST) of either kind, dead letters "
        "and quarantined events, a page at a time (continuationToken: the next): each one's id, "
        "kind, group, state, event, reason and attempts; of a kind, in a state (open, resolved, "
        "archived), of a group, if given.",
        FailuresWanted,
        FailureList,
        _list_failures,
    ),
    Tool(
        "retry_failure",
        "Send one failed message again by its id: a dead letter resubmitted to its subscription "
        "only, a quarantined event replayed through the relay; its record resolved once sent. "
        "Refused (409) for a dead letter not open, a discarded event, or one an open bulk "
        "operation acts on.",
        FailureNamed,
        FailureActed,
        lambda ops, a: ops.failures.retry(a.failure_id),
        acts=True,
    ),
    Tool(
        "archive_failure",
        "Give one failed message up by its id, with a reason (required, audited): its discard "
        "notice sent (a dead letter's to its subscription, a quarantined event's to every one), "
        "its record archived with who and why.",
        FailureArchived,
        FailureActed,
        lambda ops, a: ops.failures.archive(a.failure_id, a.reason),
        acts=True,
    ),
    Tool(
        "unarchive_failure",
        "Bring one archived dead letter's record back among the open ones by its id (a "
        "quarantined event's is refused: its version was given up).",
        FailureNamed,
        FailureActed,
        lambda ops, a: ops.failures.unarchive(a.failure_id),
        acts=True,
    ),
    Tool(
        "show_quarantined",
        "One quarantined event: why, when, how often it was replayed, its status, its body and "
        "trace id.",
        EventNamed,
        QuarantinedEventView,
        _show_quarantined,
    ),
    Tool(
        "adopt_quarantine",
        "Keep each unresolved quarantined event set aside before failed messages were kept as "
        "data (OUTBOX_FAILURE_INGEST) as a failure record, and bring each one whose replay or "
        "discard stopped between its two writes to its record's state, so that list_groups "
        "counts the quarantine exactly again: how many were read, kept new, healed, settled. "
        "Adopting again keeps nothing twice.",
        NoArguments,
        QuarantineAdopted,
        adopt_quarantine,
        acts=True,
    ),
    Tool(
        "event_journey",
        "Where an event went: stored (or expired), relayed, quarantined or discarded, "
        "dead-lettered where, applied, held or given up by each subscriber the app knows, and "
        "its failure records with their attempts and history (`failures`).",
        EventNamed,
        EventJourney,
        lambda ops, a: ops.journey.of_event(a.event_id),
    ),
)


def tool_named(name: str) -> Tool | None:
    """The tool of that name (None: there is none)."""
    return next((t for t in TOOLS if t.name == name), None)
