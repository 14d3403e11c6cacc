"""The quarantine's routes: its records a page at a time, one record with its event's body,
replay through the relay, and discard. A discard's reason is the required query parameter
`reason` (DELETE bodies are dropped by some clients and proxies; a query parameter shows in the
host's request log next to the route); it answers 200 with what was given up, the notice sent
and what subscribers will see. They stay for the clients that call them: with the failure
records kept (OUTBOX_FAILURE_INGEST), a quarantined event is a failure record like a dead
letter, and `failures/...` (the `failures` module) is the one set of routes for both kinds --
listed, read, retried (its replay), archived (its discard) by the record's id."""

from __future__ import annotations

from pydantic import TypeAdapter

from cosmos_outbox.http import HttpCall, QueryParameter, Reply, next_token
from cosmos_outbox.operations import Discarded
from cosmos_outbox.ports import Page
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._routes.models import QuarantinedEventView
from cosmos_outbox_operators._types import WHOLE, OperatorReason

REASON = QueryParameter(
    "reason",
    TypeAdapter(OperatorReason),
    "Why the event is discarded (written to the audit log)",
    required=True,
    missing="reason is required: say why the event is discarded",
)


def declare(routes: Routes) -> None:
    operations, models = routes.operations, routes.models

    @routes.get("quarantine", models.quarantine_page, paged=True, errors=(400, 429, 500, 503))
    async def list_quarantine(call: HttpCall[None]) -> Reply:
        """Operators: the quarantined events (resolved ones too, until they expire), one page
        at a time (GET failures?kind=quarantine lists their failure records, beside the dead
        letters': the one set of routes for both kinds)"""
        ops = operations()
        cursor = call.cursor(ops.tokens.quarantine)
        page = await ops.quarantine.page(
            page_size=call.page_size, continuation=cursor.store_token if cursor else None
        )
        token = next_token(page.continuation_token, cursor, ops.tokens.quarantine)
        body = models.quarantine_page.of(Page(page.items, token), models.quarantine_item)
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @routes.get("quarantine/{eventId}", QuarantinedEventView, query=(WHOLE,))
    async def show_quarantined(call: HttpCall[None]) -> Reply:
        """Operators: one quarantine record with the event's body and trace id"""
        entry = await operations().quarantine.get(call.path["eventId"])
        return Reply(QuarantinedEventView.of_entry(entry))

    @routes.post("quarantine/{eventId}/replay", models.quarantine_item, status=202)
    async def replay_quarantined(call: HttpCall[None]) -> Reply:
        """Operators: send a quarantined event through the relay again with its own id; the
        record answered is resolved, or still quarantined with the new reason (POST
        failures/{failureId}/retry does the same by its failure record's id)"""
        replayed = await operations().quarantine.replay(call.path["eventId"])
        return Reply(models.quarantine_item.of(replayed))

    @routes.delete("quarantine/{eventId}", Discarded, query=(REASON,))
    async def discard_quarantined(call: HttpCall[None]) -> Reply:
        """Operators: give a quarantined event up, with the reason: its discard notice
        (OutboxEventDiscarded) sent in its session to every subscription, then its record kept
        as discarded; the answer and the audit line say what subscribers will see (POST
        failures/{failureId}/archive does the same by its failure record's id)"""
        event_id, reason = call.path["eventId"], call.query["reason"]
        return Reply(await operations().quarantine.discard(event_id, reason))
