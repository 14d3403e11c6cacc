"""An example app, for the contract suites and the kit's checks when an app has none of its own
to run them on (and for cosmos-outbox's packages' own tests, which share it): a `Ticket`
aggregate (a title, a code with a text type of its own, a state) and its events, its request
models and view, `TICKET` (the `AggregateExample` the write path's contract suites take), its
routes on the route helper (`ticket_routes`), and its Functions app (`ticket_app`). On
cosmos-outbox's public names only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import azure.functions as func
from pydantic import ConfigDict, StringConstraints

from cosmos_outbox import Outbox, Services
from cosmos_outbox.aggregates import Aggregate, DomainError, Event, Text
from cosmos_outbox.http import AggregateRoutes, RequestModel, omit_null_defaults, view_of
from cosmos_outbox_testing.contracts import AggregateExample

__all__ = [
    "TICKET",
    "ChangeTicket",
    "Code",
    "OpenTicket",
    "Ticket",
    "TicketClosed",
    "TicketClosedError",
    "TicketOpened",
    "TicketRecoded",
    "TicketRetitled",
    "TicketView",
    "Title",
    "ticket_app",
    "ticket_routes",
]

Title = Annotated[str, Text(max_length=80)]
#: A text type with a pattern of its own: three capitals.
Code = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$"), Text(max_length=3)]


class TicketClosedError(DomainError):
    def __init__(self, ticket_id: str) -> None:
        super().__init__(f"ticket {ticket_id} is closed")


class Ticket(Aggregate):
    title: Title
    code: Code = "NEW"
    closed: bool = False

    @classmethod
    def open(cls, title: str, code: str = "NEW") -> Ticket:
        ticket = cls(title=title, code=code)
        ticket.record(TicketOpened)
        return ticket

    def change(self, *, title: str | None = None, code: str | None = None) -> None:
        if title is not None:
            self.retitle(title)
        if code is not None and code != self.code:
            self._refuse_if_closed()
            self.code = code
            self.record(TicketRecoded)

    def retitle(self, title: str) -> None:
        self._refuse_if_closed()
        if title == self.title:
            return
        self.title = title
        self.record(TicketRetitled)

    def close(self) -> None:
        self._refuse_if_closed()
        self.closed = True
        self.record(TicketClosed)

    def _refuse_if_closed(self) -> None:
        if self.closed:
            raise TicketClosedError(self.id)


@Ticket.event("TicketOpenedEvent")
class TicketOpened(Event):
    title: str
    code: str


@Ticket.event("TicketRetitledEvent")
class TicketRetitled(Event):
    title: str


@Ticket.event("TicketRecodedEvent")
class TicketRecoded(Event):
    code: str


@Ticket.event("TicketClosedEvent")
class TicketClosed(Event):
    pass


class OpenTicket(RequestModel):
    """Body of POST /tickets."""

    title: Title
    code: Code = "NEW"


class ChangeTicket(RequestModel):
    """Body of PATCH /tickets/{id}: any of title, code."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults({"minProperties": 1}))

    title: Title | None = None
    code: Code | None = None


TicketView = view_of(Ticket, name="TicketView", hidden=set())

TICKET = AggregateExample(
    "ticket",
    lambda: Ticket.open("Printer on fire"),
    change=lambda t: t.retitle("Changed"),
    actions=("TicketOpenedEvent", "TicketRetitledEvent"),
)


def ticket_routes(outbox: Outbox, *, etag_request_header: bool = False) -> AggregateRoutes[Ticket]:
    tickets = outbox.routes(Ticket, view=TicketView, etag_request_header=etag_request_header)
    tickets.create(
        route="tickets",
        request=OpenTicket,
        summary="Open a ticket",
        build=lambda body: Ticket.open(body.title, body.code),
        name="open_ticket",
    )
    tickets.read(route="tickets/{id}", summary="Read a ticket")
    tickets.update(
        route="tickets/{id}",
        method="PATCH",
        request=ChangeTicket,
        apply=Ticket.change,
        summary="Change a ticket",
    )
    tickets.update(
        route="tickets/{id}/close",
        method="POST",
        apply=Ticket.close,
        precondition_required=True,
        summary="Close a ticket (If-Match required)",
    )
    return tickets


def ticket_app(services: Callable[[], Services]) -> func.FunctionApp:
    outbox = Outbox([Ticket], services=services)
    return outbox.function_app(ticket_routes(outbox), title="Tickets")
