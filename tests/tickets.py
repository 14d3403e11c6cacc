"""A second aggregate, defined only in the tests, to prove the outbox core is generic: it runs
through the same unit-of-work contract and relay tests as Contact, with no product code of its
own (no repository, no document mapping, no relay change), and, served by an app of its own
(tests/e2e/ticket_app: the outbox blueprint beside one route), through the operators' API and
the relay on the local stack."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, StringConstraints

from application.models import RequestModel, view_of
from domain.aggregate import Aggregate, DomainEvent, event_aliases

Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=80)]


class TicketEvent(DomainEvent):
    model_config = ConfigDict(alias_generator=event_aliases("ticket"))
    aggregate_type: ClassVar[str] = "ticket"


class TicketOpened(TicketEvent):
    action: Literal["TicketOpenedEvent"] = "TicketOpenedEvent"
    title: str


class TicketRetitled(TicketEvent):
    action: Literal["TicketRetitledEvent"] = "TicketRetitledEvent"
    title: str


class Ticket(Aggregate):
    aggregate_type: ClassVar[str] = "ticket"
    collection: ClassVar[str] = "tickets"

    title: Title
    priority: int = 3

    @classmethod
    def open(cls, title: str) -> Ticket:
        ticket = cls(title=title)
        ticket._record(TicketOpened, title=ticket.title)
        return ticket

    def retitle(self, title: str) -> None:
        if title == self.title:
            return
        self.title = title
        self._change(TicketRetitled, title=self.title)


class OpenTicket(RequestModel):
    """Body of POST /tickets."""

    title: Title


TicketView = view_of(Ticket, name="TicketView", hidden=set())
