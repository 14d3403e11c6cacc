"""The refund command, handled from its queue message (built with the test kit, as the worker
hands it over): the refund, the count and the event in one batch; a command for a ticket that
is not sold changes nothing."""

from __future__ import annotations

from conftest import World
from test_api import announced

from cosmos_outbox_testing import service_bus_message


def test_a_refund_command_refunds_the_ticket_with_its_event(world: World) -> None:
    concert_id = announced(world)
    _, ticket = world.call(
        "POST", f"concerts/{concert_id}/tickets", {"buyer": "Grace", "quantity": 2}
    )
    command = {"type": "RefundTicket", "concertId": concert_id, "ticketId": ticket["id"]}
    world.client.invoke("handle_command", service_bus_message(command, session_id=concert_id))
    assert (
        world.call("GET", f"concerts/{concert_id}/tickets/{ticket['id']}")[1]["status"]
        == "refunded"
    )
    assert world.call("GET", f"concerts/{concert_id}")[1]["sold"] == 0
    assert [e["action"] for e in world.events()] == [
        "ConcertAnnounced",
        "TicketsSold",
        "TicketRefunded",
    ]
    world.client.invoke("handle_command", service_bus_message(command, session_id=concert_id))
    assert len(world.events()) == 3  # refunded already: nothing more
