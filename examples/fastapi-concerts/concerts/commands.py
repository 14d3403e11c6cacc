"""Commands from a Service Bus queue: `RefundTicket` `{concertId, ticketId}`. The queue has
sessions, and a command's SessionId is its concert's id: the commands of one concert are handled
one at a time, in the order they were sent (commands of other concerts in parallel), so two
refunds of one concert never race. The outbox's transaction writes the refund and `TicketRefunded`
in one batch; a command that fails is retried, then dead-lettered."""

from __future__ import annotations

import json
import logging

import azure.functions as func

from concerts.outbox import outbox, read

logger = logging.getLogger(__name__)
commands = func.Blueprint()  # type: ignore[no-untyped-call]  # untyped in azure-functions


@commands.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%COMMANDS_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
)
async def handle_command(message: func.ServiceBusMessage) -> None:
    command = json.loads(message.get_body())
    if command.get("type") != "RefundTicket":  # retried, then dead-lettered
        raise ValueError(f"unknown command {command.get('type')!r}")
    concert_id, ticket_id = command["concertId"], command["ticketId"]
    ticket = await read(concert_id, ticket_id)
    if ticket is None or ticket.get("status") != "sold":
        logger.info("ticket %s of concert %s: nothing to refund", ticket_id, concert_id)
        return
    unsold = [{"op": "incr", "path": "/sold", "value": -ticket["quantity"]}]
    refunded = {**ticket, "status": "refunded"}
    tx = outbox.transaction(concert_id, entity="concert")
    tx.replace(refunded, if_match=ticket["_etag"])
    tx.patch(concert_id, unsold)
    tx.publish("TicketRefunded", {"ticketId": ticket_id, "quantity": ticket["quantity"]})
    await tx.commit()
