"""The dead letters' routes: the dead-letter queues of the watched subscriptions and queues,
counted, listed with a filter, peeked, resubmitted and discarded (and both actions previewed).
Their answers are the core's (`cosmos_outbox.operations`); what a request names is parsed here
(`DeadLetterSelection`, `DeadLetterDiscard`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import ConfigDict, Field, TypeAdapter, model_validator

from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.http import (
    HttpCall,
    Identifier,
    PageView,
    QueryParameter,
    Reply,
    RequestModel,
    next_token,
    omit_null_defaults,
)
from cosmos_outbox.operations import (
    MAX_PER_CALL,
    ActionReport,
    DeadLetterCounts,
    DeadLetterMessage,
    LetterFilter,
    LetterPreview,
    LetterSummary,
    Operation,
    Selection,
)
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._routes.operations import CanaryOptions
from cosmos_outbox_operators._types import (
    START_ERRORS,
    WHOLE,
    AggregateType,
    FilterText,
    Instant,
    OperatorReason,
)

#: A filter's fields, in the query of a list and in the body of an action (camelCase).
FILTER_FIELDS = ("aggregateType", "aggregateId", "action", "deadLetterReason", "since", "until")
_NO_FILTER: dict[str, Any] = dict.fromkeys(FILTER_FIELDS, False)
#: The three ways to name dead letters, as JSON Schema: a field that must be left out is `false`.
_ONE_WAY: list[dict[str, Any]] = [
    {
        "required": ["sequenceNumbers"],
        "properties": {"sequenceNumbers": {"minItems": 1}, "all": {"const": False}, **_NO_FILTER},
    },
    {
        "anyOf": [{"required": [name]} for name in FILTER_FIELDS],
        "properties": {"sequenceNumbers": {"maxItems": 0}, "all": {"const": False}},
    },
    {
        "required": ["all"],
        "properties": {"all": {"const": True}, "sequenceNumbers": {"maxItems": 0}, **_NO_FILTER},
    },
]


def letter_filter(named: Mapping[str, Any]) -> LetterFilter:
    """The filter `named` gives by its fields' names (a list's query, an action's body)."""
    return LetterFilter(*(named.get(name) for name in FILTER_FIELDS))


class DeadLetterSelection(RequestModel):
    """Which dead letters: `sequenceNumbers` (at most 100), or those matching a filter (an
    aggregate type and id, an action, text in the dead-letter reason or description, enqueued
    since / until), or `all: true`; exactly one of the three (the schema says so too)."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults({"oneOf": _ONE_WAY}))

    sequence_numbers: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=100)] = []
    aggregate_type: AggregateType | None = Field(None, description="of this aggregate type")
    aggregate_id: Identifier | None = Field(None, description="of this aggregate")
    action: Identifier | None = Field(None, description="of this action")
    dead_letter_reason: FilterText | None = Field(
        None, description="whose reason or description has this"
    )
    since: Instant | None = Field(None, description="enqueued at or after this time (RFC 3339)")
    until: Instant | None = Field(None, description="enqueued before this time (RFC 3339)")
    all: bool = False

    @model_validator(mode="after")
    def _one_way(self) -> Self:
        ways = [bool(self.sequence_numbers), not self.filter.empty, self.all]
        if sum(ways) != 1:
            raise ValueError(
                "name the dead letters one way: sequenceNumbers, or a filter (aggregateType, "
                "aggregateId, action, deadLetterReason, since, until), or all: true"
            )
        return self

    @property
    def filter(self) -> LetterFilter:
        return letter_filter(self.model_dump(by_alias=True))

    @property
    def selection(self) -> Selection:
        return Selection(tuple(self.sequence_numbers), self.filter, self.all)


class DeadLetterDiscard(DeadLetterSelection):
    """A selection of dead letters to give up, and why (the audit line, the notices)."""

    reason: OperatorReason


#: The dead letters one request acts on: named by their sequence numbers (a filter, or all of
#: them, is a bulk operation: `deadletters/{entity}/resubmit/operation`, `.../discard/...`).
_NUMBERS_ONLY: dict[str, Any] = {
    "required": ["sequenceNumbers"],
    "properties": {"sequenceNumbers": {"minItems": 1}, "all": {"const": False}, **_NO_FILTER},
}
BULK = (
    "a filter, or all: true, names a bulk operation: POST deadletters/{entity}/resubmit/"
    "operation or .../discard/operation (answered at once, worked in batches)"
)


class DeadLetterNumbers(DeadLetterSelection):
    """Dead letters named by their `sequenceNumbers` (at most 100), acted on by this request."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults(_NUMBERS_ONLY))

    @model_validator(mode="after")
    def _numbers(self) -> Self:
        if not self.sequence_numbers:
            raise ValueError(f"name the dead letters by their sequenceNumbers; {BULK}")
        return self


class DeadLetterNumbersDiscard(DeadLetterNumbers):
    """Dead letters named by their sequence numbers to give up, and why."""

    reason: OperatorReason


class DeadLetterBulk(DeadLetterSelection, CanaryOptions):
    """The dead letters of one watched subscription (or queue) a bulk resubmit acts on: those
    matching a filter (an aggregate type and id, an action, text in the dead-letter reason or
    description, enqueued since / until), or `all: true` of them; `canary` of them first."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults({"oneOf": _ONE_WAY[1:]}))

    @model_validator(mode="after")
    def _not_numbers(self) -> Self:
        if self.sequence_numbers:
            raise ValueError(
                "sequenceNumbers name dead letters one request acts on (resubmit, discard); "
                "a bulk operation takes a filter, or all: true"
            )
        return self


class DeadLetterResubmitPreview(DeadLetterSelection, CanaryOptions):
    """A selection whose resubmit is previewed: as the resubmit (or its bulk operation, with
    its canary, which the preview does not change) names it."""

    # the selection's one way, which CanaryOptions' config would otherwise replace
    model_config = ConfigDict(json_schema_extra=omit_null_defaults({"oneOf": _ONE_WAY}))


class DeadLetterBulkDiscard(DeadLetterBulk):
    """The dead letters a bulk discard gives up (a filter, or all), and why."""

    reason: OperatorReason


class DeadLetterPage(PageView):
    items: list[LetterSummary]


#: The list's filter, as query parameters: the selection's filter fields, their types and words.
FILTER_QUERY = tuple(
    QueryParameter(
        field.alias or name,
        TypeAdapter(next(a for a in get_args(field.annotation) if a is not type(None))),
        f"only dead letters {field.description}",
    )
    for name, field in DeadLetterSelection.model_fields.items()
    if (field.alias or name) in FILTER_FIELDS
)


def declare(routes: Routes) -> None:
    operations = routes.operations
    counted = {"MAX_PER_CALL": MAX_PER_CALL}

    def at(call: HttpCall[Any]) -> tuple[Any, Any]:
        """The dead letters' use cases, and the watched entity the path names (404: not one)."""
        letters = operations().dead_letters
        return letters, letters.entity(call.path["entity"])

    @routes.get("deadletters", DeadLetterCounts, errors=(400, 429, 500, 503))
    async def count_dead_letters(call: HttpCall[None]) -> Reply:
        """Operators: how many dead letters each watched subscription (and queue) holds"""
        return Reply(await operations().dead_letters.counts())

    @routes.get("deadletters/{entity}", DeadLetterPage, paged=True, query=FILTER_QUERY)
    async def list_dead_letters(call: HttpCall[None]) -> Reply:
        """Operators: the dead letters of one watched subscription (or queue), a page at a time,
        those matching the filter given"""
        ops = operations()
        letters = ops.dead_letters
        cursor = call.cursor(ops.tokens.dead_letters)
        if cursor is not None and not cursor.store_token.isdigit():
            raise InvalidContinuationError("not a dead letters' token")
        found, next_after = await letters.page(
            letters.entity(call.path["entity"]),
            letter_filter(call.query),
            page_size=call.page_size,
            after=int(cursor.store_token) if cursor is not None else 0,
        )
        after = str(next_after) if next_after is not None else None
        token = next_token(after, cursor, ops.tokens.dead_letters)
        body = DeadLetterPage.of_items(found, token)
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @routes.get("deadletters/{entity}/messages/{sequenceNumber}", DeadLetterMessage, query=(WHOLE,))
    async def peek_dead_letter(call: HttpCall[None]) -> Reply:
        """Operators: one dead letter, whole (body, properties, reason, description, delivery
        count, enqueued time)"""
        letters, entity = at(call)
        return Reply(await letters.peek(entity, int(call.path["sequenceNumber"])))

    @routes.post(
        "deadletters/{entity}/resubmit",
        ActionReport,
        request=DeadLetterNumbers,
        summary_values=counted,
    )
    async def resubmit_dead_letters(call: HttpCall[Any]) -> Reply:
        """Operators: send dead letters named by their sequence numbers (at most {MAX_PER_CALL})
        again, each with a MessageId of its own that the topic's duplicate detection cannot
        drop, to that subscription only; a dead letter leaves its queue only once its
        resubmission was accepted (a filter, or all of them: a bulk operation)"""
        letters, entity = at(call)
        return Reply(await letters.resubmit(entity, call.body.selection))

    @routes.post(
        "deadletters/{entity}/discard",
        ActionReport,
        request=DeadLetterNumbersDiscard,
        summary_values=counted,
    )
    async def discard_dead_letters(call: HttpCall[Any]) -> Reply:
        """Operators: give dead letters named by their sequence numbers (at most {MAX_PER_CALL})
        up at that subscription: each one's version given up there by a discard notice in its
        session, then the dead letter removed"""
        letters, entity = at(call)
        return Reply(await letters.discard(entity, call.body.selection, reason=call.body.reason))

    _bulk_operations(routes)
    _previews(routes, at)


def _bulk_operations(routes: Routes) -> None:
    operations = routes.operations

    async def start(call: HttpCall[Any], action: Literal["resubmit", "discard"]) -> Reply:
        body = call.body
        operation = await operations().bulk.start_letters(
            call.path["entity"],
            action,
            body.filter,
            every=body.all,
            reason=getattr(body, "reason", None),
            canary=body.canary,
            canary_wait_seconds=body.canary_wait_seconds,
        )
        return Reply(operation)

    @routes.post(
        "deadletters/{entity}/resubmit/operation",
        Operation,
        status=202,
        request=DeadLetterBulk,
        errors=START_ERRORS,
    )
    async def resubmit_dead_letters_operation(call: HttpCall[Any]) -> Reply:
        """Operators: resubmit the dead letters of a watched subscription (or queue) matching a
        filter, or all of them, as a bulk operation (answered at once; whoever runs the relay
        works it in batches: GET operations/{operationId}); `canary` of them first (default
        5), the rest only once those are not seen failing again; 409 naming the open operation
        that acts on its dead letters (or on a failure group's there) already"""
        return await start(call, "resubmit")

    @routes.post(
        "deadletters/{entity}/discard/operation",
        Operation,
        status=202,
        request=DeadLetterBulkDiscard,
        errors=START_ERRORS,
    )
    async def discard_dead_letters_operation(call: HttpCall[Any]) -> Reply:
        """Operators: give up the dead letters of a watched subscription (or queue) matching a
        filter, or all of them, as a bulk operation (answered at once, worked in batches); 409
        naming the open operation that acts on its dead letters (or on a failure group's there)
        already"""
        return await start(call, "discard")


def _previews(routes: Routes, at: Any) -> None:
    async def preview(call: HttpCall[Any], action: str) -> Reply:
        letters, entity = at(call)
        return Reply(await letters.preview(entity, call.body.selection, action=action))

    @routes.post(
        "deadletters/{entity}/resubmit/preview", LetterPreview, request=DeadLetterResubmitPreview
    )
    async def preview_resubmit_dead_letters(call: HttpCall[Any]) -> Reply:
        """Operators: what a resubmit of this selection would touch, before it is confirmed: how
        many dead letters match, of how many aggregates, the first of them, and what subscribers
        will see; nothing is sent or removed"""
        return await preview(call, "resubmit")

    @routes.post("deadletters/{entity}/discard/preview", LetterPreview, request=DeadLetterDiscard)
    async def preview_discard_dead_letters(call: HttpCall[Any]) -> Reply:
        """Operators: what a discard of this selection would touch, before it is confirmed (the
        reason is checked as the discard checks it); nothing is sent or removed"""
        return await preview(call, "discard")
