"""The journey's routes: where an event went, where each of an aggregate's events went (and each
subscriber's view of it), and the documents of an aggregate's partition as stored."""

from __future__ import annotations

from typing import Any

from cosmos_outbox.http import HttpCall, PageView, Reply, next_token
from cosmos_outbox.operations import AggregateJourney, EventJourney
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._types import ERRORS


class DocumentPage(PageView):
    """A page of an aggregate's documents, each as the store holds it."""

    items: list[dict[str, Any]]


def declare(routes: Routes) -> None:
    prefix, operations, operation = routes.prefix, routes.operations, routes.operation

    @operation(
        route=f"{prefix}/journey/events/{{eventId}}",
        method="GET",
        status=200,
        summary="Operators: where an event went: stored (or removed by its TTL), relayed, "
        "quarantined or discarded, dead-lettered where, applied, held or given up by the "
        "subscribers the app knows",
        response=EventJourney,
        errors=ERRORS,
    )
    async def event_journey(call: HttpCall[None]) -> Reply:
        return Reply(await operations().journey.of_event(call.path["eventId"]))

    @operation(
        route=f"{prefix}/journey/aggregates/{{aggregateType}}/{{aggregateId}}",
        method="GET",
        status=200,
        summary="Operators: where each of an aggregate's events went, and each subscriber's "
        "view of it (its version, what it holds, its gaps)",
        response=AggregateJourney,
        errors=ERRORS,
    )
    async def aggregate_journey(call: HttpCall[None]) -> Reply:
        path = call.path
        found = await operations().journey.of_aggregate(path["aggregateType"], path["aggregateId"])
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
        errors=ERRORS,
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
