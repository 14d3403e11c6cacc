"""The operators' recovery routes, on the operators' blueprint (`operator_routes`): the outbox's
health for an app of its own (`outbox/health`, anonymous), the dead letters of the watched
subscriptions and queues (count, list, peek, resubmit, discard), the journey of an event or an
aggregate, and the subscribers (what they hold and why; releasing it). Their use cases are
`cosmos_outbox.operations`'s, run by the operators' (`OutboxOperators`); the command line
(`cosmos-outbox`) and the console call these routes, and nothing else.

Each route but `outbox/health` is declared with the operators' `operation` (both doors: the
admin key's and the signed-in operator's, `cosmos_outbox_operators._console.doors`); who acts is the
operator the door admitted (`cosmos_outbox.operations.current_actor()`, read by the use cases).
Every action's answer says what subscribers will see (`subscribersWillSee`), as its audit line
does. `outbox/health` is anonymous, declared with `anonymous` (neither door).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.http import (
    HttpCall,
    Identifier,
    QueryParameter,
    Reply,
    next_token,
)
from cosmos_outbox.operations import (
    MAX_PER_CALL,
    AggregateJourney,
    EventJourney,
    LetterFilter,
    LetterPreview,
    Released,
)
from cosmos_outbox_operators._types import (
    WHOLE,
    AggregateType,
    Instant,
)

if TYPE_CHECKING:
    from cosmos_outbox.operations import (
        Operations,
    )
from cosmos_outbox_operators._recovery_views import (
    _ERRORS,
    DeadLetterActionView,
    DeadLetterCountsView,
    DeadLetterDiscard,
    DeadLetterItem,
    DeadLetterPage,
    DeadLetterSelection,
    DeadLetterView,
    DocumentPage,
    EntityCountView,
    FilterText,
    ReleaseRequest,
    SubscriberStatusView,
    SubscribersView,
)


def _query(name: str, adapter: TypeAdapter[Any], description: str) -> QueryParameter:
    return QueryParameter(name, adapter, description)


def recovery_routes(
    operation: Callable[..., Callable[[Any], Any]],
    operations: Callable[[], Operations],
    *,
    prefix: str,
    anonymous: Callable[..., Callable[[Any], Any]],
) -> None:
    """Declare the recovery routes under `prefix`: with `operation` (the operators' doors,
    bounded), and the anonymous `outbox/health` with `anonymous`."""
    identifier = TypeAdapter(Identifier)
    instant = TypeAdapter(Instant)
    text = TypeAdapter(FilterText)
    kind = TypeAdapter(AggregateType)

    @anonymous(
        route=f"{prefix}/health",
        method="GET",
        status=200,
        summary="The outbox's health for any app (anonymous): the store answers; degraded, with "
        "what the relay is stuck on, when the relay says it is blocked",
        response_schema={"type": "object"},
        errors=(400, 500, 503),
    )
    async def outbox_health(call: HttpCall[None]) -> Reply:
        return Reply(await operations().status.health())

    @operation(
        route=f"{prefix}/deadletters",
        method="GET",
        status=200,
        summary="Operators: how many dead letters each watched subscription (and queue) holds",
        response=DeadLetterCountsView,
        errors=(400, 429, 500, 503),
    )
    async def count_dead_letters(call: HttpCall[None]) -> Reply:
        counts = await operations().dead_letters.counts()
        return Reply(
            DeadLetterCountsView(
                entities=[
                    EntityCountView(
                        name=c.entity.name,
                        kind=c.entity.kind,
                        dead_letters=c.count,
                        at_least=c.at_least,
                        error=c.error,
                    )
                    for c in counts
                ]
            )
        )

    @operation(
        route=f"{prefix}/deadletters/{{entity}}",
        method="GET",
        status=200,
        paged=True,
        summary="Operators: the dead letters of one watched subscription (or queue), a page at "
        "a time, those matching the filter given",
        response=DeadLetterPage,
        query=(
            _query("aggregateType", kind, "only dead letters of this aggregate type"),
            _query("aggregateId", identifier, "only those of this aggregate"),
            _query("action", identifier, "only those of this action"),
            _query("deadLetterReason", text, "only those whose reason or description has this"),
            _query("since", instant, "only those enqueued at or after this time"),
            _query("until", instant, "only those enqueued before this time"),
        ),
        errors=_ERRORS,
    )
    async def list_dead_letters(call: HttpCall[None]) -> Reply:
        ops = operations()
        letters = ops.dead_letters
        entity = letters.entity(call.path["entity"])
        cursor = call.cursor(ops.tokens.dead_letters)
        after = (
            int(cursor.store_token) if cursor is not None and cursor.store_token.isdigit() else 0
        )
        if cursor is not None and not cursor.store_token.isdigit():
            raise InvalidContinuationError("not a dead letters' token")
        q = call.query
        found, next_after = await letters.page(
            entity,
            LetterFilter(
                aggregate_type=q.get("aggregateType"),
                aggregate_id=q.get("aggregateId"),
                action=q.get("action"),
                reason=q.get("deadLetterReason"),
                since=q.get("since"),
                until=q.get("until"),
            ),
            page_size=call.page_size,
            after=after,
        )
        token = next_token(
            str(next_after) if next_after is not None else None, cursor, ops.tokens.dead_letters
        )
        body = DeadLetterPage.of_items([DeadLetterItem.of(d) for d in found], token)
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @operation(
        route=f"{prefix}/deadletters/{{entity}}/messages/{{sequenceNumber}}",
        method="GET",
        status=200,
        summary="Operators: one dead letter, whole (body, properties, reason, description, "
        "delivery count, enqueued time)",
        query=(WHOLE,),
        response=DeadLetterView,
        errors=_ERRORS,
    )
    async def peek_dead_letter(call: HttpCall[None]) -> Reply:
        letters = operations().dead_letters
        entity = letters.entity(call.path["entity"])
        described = await letters.peek(entity, int(call.path["sequenceNumber"]))
        return Reply(DeadLetterView.whole(described))

    @operation(
        route=f"{prefix}/deadletters/{{entity}}/resubmit",
        method="POST",
        status=200,
        summary="Operators: send dead letters again, each with a MessageId of its own that the "
        f"topic's duplicate detection cannot drop, to that subscription only (at most "
        f"{MAX_PER_CALL} a call: `remaining` says how many more match); a dead letter leaves "
        "its queue only once its resubmission was accepted",
        request=DeadLetterSelection,
        response=DeadLetterActionView,
        errors=(400, 404, 413, 415, 429, 500, 503),
    )
    async def resubmit_dead_letters(call: HttpCall[Any]) -> Reply:
        letters = operations().dead_letters
        entity = letters.entity(call.path["entity"])
        report = await letters.resubmit(entity, call.body.selection)
        return Reply(DeadLetterActionView.of(report))

    @operation(
        route=f"{prefix}/deadletters/{{entity}}/discard",
        method="POST",
        status=200,
        summary="Operators: give dead letters up at that subscription: each one's version "
        "given up there by a discard notice in its session, then the dead letter removed (at "
        f"most {MAX_PER_CALL} a call)",
        request=DeadLetterDiscard,
        response=DeadLetterActionView,
        errors=(400, 404, 413, 415, 429, 500, 503),
    )
    async def discard_dead_letters(call: HttpCall[Any]) -> Reply:
        letters = operations().dead_letters
        entity = letters.entity(call.path["entity"])
        report = await letters.discard(entity, call.body.selection, reason=call.body.reason)
        return Reply(DeadLetterActionView.of(report))

    async def _letters_preview(call: HttpCall[Any], action: str) -> Reply:
        letters = operations().dead_letters
        entity = letters.entity(call.path["entity"])
        return Reply(await letters.preview(entity, call.body.selection, action=action))

    @operation(
        route=f"{prefix}/deadletters/{{entity}}/resubmit/preview",
        method="POST",
        status=200,
        summary="Operators: what a resubmit of this selection would touch, before it is "
        "confirmed: how many dead letters match, of how many aggregates, the first of them, and "
        "what subscribers will see; nothing is sent or removed",
        request=DeadLetterSelection,
        response=LetterPreview,
        errors=(400, 404, 413, 415, 429, 500, 503),
    )
    async def preview_resubmit_dead_letters(call: HttpCall[Any]) -> Reply:
        return await _letters_preview(call, "resubmit")

    @operation(
        route=f"{prefix}/deadletters/{{entity}}/discard/preview",
        method="POST",
        status=200,
        summary="Operators: what a discard of this selection would touch, before it is "
        "confirmed (the reason is checked as the discard checks it); nothing is sent or removed",
        request=DeadLetterDiscard,
        response=LetterPreview,
        errors=(400, 404, 413, 415, 429, 500, 503),
    )
    async def preview_discard_dead_letters(call: HttpCall[Any]) -> Reply:
        return await _letters_preview(call, "discard")

    @operation(
        route=f"{prefix}/journey/events/{{eventId}}",
        method="GET",
        status=200,
        summary="Operators: where an event went: stored (or removed by its TTL), relayed, "
        "quarantined or discarded, dead-lettered where, applied, held or given up by the "
        "subscribers the app knows",
        response=EventJourney,
        errors=_ERRORS,
    )
    async def event_journey(call: HttpCall[None]) -> Reply:
        journey = operations().journey
        return Reply(await journey.of_event(call.path["eventId"]))

    @operation(
        route=f"{prefix}/journey/aggregates/{{aggregateType}}/{{aggregateId}}",
        method="GET",
        status=200,
        summary="Operators: where each of an aggregate's events went, and each subscriber's "
        "view of it (its version, what it holds, its gaps)",
        response=AggregateJourney,
        errors=_ERRORS,
    )
    async def aggregate_journey(call: HttpCall[None]) -> Reply:
        journey = operations().journey
        found = await journey.of_aggregate(call.path["aggregateType"], call.path["aggregateId"])
        return Reply(found)

    @operation(
        route=f"{prefix}/documents/{{aggregateId}}",
        method="GET",
        status=200,
        paged=True,
        summary="Operators: the documents in an aggregate's partition of the outbox's container "
        "(its state, its events not yet expired, its quarantine records, ...), as stored, a page "
        "at a time; read only",
        response=DocumentPage,
        errors=_ERRORS,
    )
    async def aggregate_documents(call: HttpCall[None]) -> Reply:
        ops = operations()
        cursor = call.cursor(ops.tokens.documents)
        page = await ops.journey.documents(
            call.path["aggregateId"],
            page_size=call.page_size,
            continuation=cursor.store_token if cursor is not None else None,
        )
        token = next_token(page.continuation_token, cursor, ops.tokens.documents)
        body = DocumentPage.of_items(page.items, token)
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @operation(
        route=f"{prefix}/subscribers",
        method="GET",
        status=200,
        summary="Operators: per watched subscription, its dead letters and, where the app "
        "knows the subscriber's projection container, what it holds, why, and what releases it, "
        "and the gaps it accepted",
        response=SubscribersView,
        errors=(400, 429, 500, 503),
    )
    async def subscribers_status(call: HttpCall[None]) -> Reply:
        views = await operations().subscribers.status()
        return Reply(SubscribersView(subscribers=[SubscriberStatusView.of(v) for v in views]))

    @operation(
        route=f"{prefix}/subscribers/{{subscription}}/release",
        method="POST",
        status=200,
        summary="Operators: give one version of an aggregate up at one subscription (its "
        "discard notice, to that subscription only): the subscriber records an accepted gap "
        "and applies the versions it held after it",
        request=ReleaseRequest,
        response=Released,
        errors=(400, 404, 413, 415, 429, 500, 503),
    )
    async def release_held(call: HttpCall[Any]) -> Reply:
        body = call.body
        released = await operations().subscribers.release(
            call.path["subscription"],
            aggregate_type=body.aggregate_type,
            aggregate_id=body.aggregate_id,
            version=body.version,
            reason=body.reason,
        )
        return Reply(released)
