"""The quarantine's routes: its records a page at a time, one record with its event's body,
replay through the relay, and discard.

Decision: the reason of a discard is the required query parameter `reason` (1-500 characters,
the text rules of every field). DELETE bodies are dropped by some clients and proxies, and a
query parameter shows in the host's request log next to the route. The discard answers 200 with
what was given up, the notice sent and what subscribers will see (it answered 204 before 0.4)."""

from __future__ import annotations

from pydantic import TypeAdapter

from cosmos_outbox.http import HttpCall, QueryParameter, Reply, next_token
from cosmos_outbox.operations import Discarded
from cosmos_outbox.ports import Page
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._routes.models import QuarantinedEventView
from cosmos_outbox_operators._types import ERRORS, WHOLE, OperatorReason

REASON = QueryParameter(
    "reason",
    TypeAdapter(OperatorReason),
    "Why the event is discarded (written to the audit log)",
    required=True,
    missing="reason is required: say why the event is discarded",
)


def declare(routes: Routes) -> None:
    prefix, operations, operation, models = (
        routes.prefix,
        routes.operations,
        routes.operation,
        routes.models,
    )

    @operation(
        route=f"{prefix}/quarantine",
        method="GET",
        status=200,
        paged=True,
        summary="Operators: the quarantined events (resolved ones too, until they "
        "expire), one page at a time",
        response=models.quarantine_page,
        errors=(400, 429, 500, 503),
    )
    async def list_quarantine(call: HttpCall[None]) -> Reply:
        ops = operations()
        cursor = call.cursor(ops.tokens.quarantine)
        page = await ops.quarantine.page(
            page_size=call.page_size, continuation=cursor.store_token if cursor else None
        )
        token = next_token(page.continuation_token, cursor, ops.tokens.quarantine)
        body = models.quarantine_page.of(Page(page.items, token), models.quarantine_item)
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @operation(
        route=f"{prefix}/quarantine/{{eventId}}",
        method="GET",
        status=200,
        summary="Operators: one quarantine record with the event's body and trace id",
        query=(WHOLE,),
        response=QuarantinedEventView,
        errors=ERRORS,
    )
    async def show_quarantined(call: HttpCall[None]) -> Reply:
        entry = await operations().quarantine.get(call.path["eventId"])
        return Reply(QuarantinedEventView.of_entry(entry))

    @operation(
        route=f"{prefix}/quarantine/{{eventId}}/replay",
        method="POST",
        status=202,
        summary="Operators: send a quarantined event through the relay again with its "
        "own id; the record answered is resolved, or still quarantined with "
        "the new reason",
        response=models.quarantine_item,
        errors=ERRORS,
    )
    async def replay_quarantined(call: HttpCall[None]) -> Reply:
        replayed = await operations().quarantine.replay(call.path["eventId"])
        return Reply(models.quarantine_item.of(replayed))

    @operation(
        route=f"{prefix}/quarantine/{{eventId}}",
        method="DELETE",
        status=200,
        summary="Operators: give a quarantined event up, with the reason: its discard notice "
        "(OutboxEventDiscarded) sent in its session to every subscription, then its record "
        "kept as discarded; the answer and the audit line say what subscribers will see",
        query=(REASON,),
        response=Discarded,
        errors=ERRORS,
    )
    async def discard_quarantined(call: HttpCall[None]) -> Reply:
        event_id, reason = call.path["eventId"], call.query["reason"]
        return Reply(await operations().quarantine.discard(event_id, reason))
