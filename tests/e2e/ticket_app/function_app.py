"""Another app using the outbox for its own aggregate (the README's example): one route that
opens a Ticket (tests/tickets.py) in one unit of work, and the outbox blueprint as it ships —
relay, backlog timer, operators' routes — with no change to the outbox's code."""

from __future__ import annotations

import azure.functions as func

from entrypoints.bootstrap import dependencies
from entrypoints.http.operations import HttpApi, HttpCall, Reply
from entrypoints.http.routing import FunctionApp
from entrypoints.outbox import outbox_blueprint
from tests.tickets import OpenTicket, Ticket, TicketView

tickets = func.Blueprint()  # type: ignore[no-untyped-call]
api = HttpApi(tickets)


@api.operation(route="tickets", method="POST", status=201, summary="Open a ticket",
               request=OpenTicket, response=TicketView, errors=(400, 413, 415, 429, 500, 503))
def open_ticket(call: HttpCall[OpenTicket]) -> Reply:
    ticket = Ticket.open(call.body.title)
    with dependencies().uow() as uow:
        uow.repository(Ticket).add(ticket)
        uow.commit(traceparent=call.traceparent)
    return Reply(TicketView.of(ticket))


app = FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(tickets)
app.register_functions(outbox_blueprint())
