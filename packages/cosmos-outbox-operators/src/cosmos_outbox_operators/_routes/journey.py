"""The journey's routes: where an event went, where each of an aggregate's events went (and each
subscriber's view of it), and the documents of an aggregate's partition as stored."""

from __future__ import annotations

from typing import Any

from cosmos_outbox.http import HttpCall, PageView, Reply, next_token
from cosmos_outbox.operations import AggregateJourney, DeadLetterMessage, EventJourney
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._types import WHOLE


class DocumentPage(PageView):
    """A page of an aggregate's documents, each as the store holds it."""

    items: list[dict[str, Any]]


def declare(routes: Routes) -> None:
    operations = routes.operations

    @routes.get("journey/events/{eventId}", EventJourney)
    async def event_journey(call: HttpCall[None]) -> Reply:
        """Operators: where an event went: stored (or removed by its TTL), relayed, quarantined
        or discarded, dead-lettered where, applied, held or given up by the subscribers the app
        knows"""
        return Reply(await operations().journey.of_event(call.path["eventId"]))

    @routes.get("failures/{failureId}", DeadLetterMessage, query=(WHOLE,))
    async def show_failure(call: HttpCall[None]) -> Reply:
        """Operators: one failed message kept as data (OUTBOX_FAILURE_INGEST), open, archived or
        resolved: the message whole as it was dead-lettered last, and its history (`failure`):
        each attempt that failed (when, the dead letter's sequence number, the reason) and what
        was done to it (retried, archived, unarchived: when, by whom, in which operation, why)"""
        return Reply(await operations().dead_letters.failure(call.path["failureId"]))

    @routes.get("journey/aggregates/{aggregateType}/{aggregateId}", AggregateJourney)
    async def aggregate_journey(call: HttpCall[None]) -> Reply:
        """Operators: where each of an aggregate's events went, and each subscriber's view of it
        (its version, what it holds, its gaps)"""
        path = call.path
        found = await operations().journey.of_aggregate(path["aggregateType"], path["aggregateId"])
        return Reply(found)

    @routes.get("documents/{aggregateId}", DocumentPage, paged=True)
    async def aggregate_documents(call: HttpCall[None]) -> Reply:
        """Operators: the documents in an aggregate's partition of the outbox's container (its
        state, its events not yet expired, its quarantine records, ...), as stored, a page at a
        time; read only"""
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
