"""The domain core: events register themselves in the catalogue by aggregate type and action,
an aggregate records events and hands them over once, and `live` hides a soft-deleted one."""

from __future__ import annotations

from typing import ClassVar, Literal

import pytest
from pydantic import ConfigDict
from tickets import Ticket, TicketClosed, TicketOpened, TicketRetitled

from cosmos_outbox._domain import (
    AGGREGATES,
    EVENTS,
    Aggregate,
    DomainEvent,
    UnknownEventError,
    event_aliases,
)


def test_the_catalogue_holds_every_concrete_event_class_by_its_aggregate_and_action() -> None:
    assert {"TicketOpenedEvent", "TicketRetitledEvent", "TicketClosedEvent"} <= EVENTS.actions(
        "ticket")
    assert EVENTS.resolve("ticket", "TicketOpenedEvent") is TicketOpened
    assert {TicketOpened, TicketRetitled, TicketClosed} <= Ticket.event_classes()
    assert AGGREGATES["ticket"] is Ticket
    with pytest.raises(UnknownEventError):
        EVENTS.resolve("ticket", "NoSuchEvent")
    with pytest.raises(UnknownEventError):
        EVENTS.resolve("ticket", 3)


def test_two_classes_cannot_share_an_action_and_an_event_needs_an_aggregate() -> None:
    class LocalEvent(DomainEvent):
        model_config = ConfigDict(alias_generator=event_aliases("ticket"))
        aggregate_type: ClassVar[str] = "ticket"

    with pytest.raises(TypeError, match="both have the ticket action"):
        type("Impostor", (LocalEvent,), {
            "__annotations__": {"action": Literal["TicketOpenedEvent"]},
            "action": "TicketOpenedEvent", "__module__": __name__})
    with pytest.raises(TypeError, match="bound to no aggregate type"):
        type("Orphan", (DomainEvent,), {
            "__annotations__": {"action": Literal["OrphanEvent"]}, "action": "OrphanEvent",
            "__module__": __name__})


def test_an_aggregate_must_name_its_collection() -> None:
    with pytest.raises(TypeError, match="names no collection"):
        type("Nameless", (Aggregate,), {"aggregate_type": "nameless", "__module__": __name__,
                                        "__annotations__": {"aggregate_type": ClassVar[str]}})


def test_events_carry_the_aggregate_id_under_its_own_name_and_are_collected_once() -> None:
    ticket = Ticket.open("Printer on fire")
    ticket.retitle("Printer fixed")
    assert [e.version for e in ticket.events] == [1, 2]
    wire = ticket.events[0].model_dump(mode="json", by_alias=True)
    assert wire["ticketId"] == ticket.id and "aggregateId" not in wire
    assert [type(e) for e in ticket.collect_events()] == [TicketOpened, TicketRetitled]
    assert ticket.collect_events() == []
    assert ticket.live
