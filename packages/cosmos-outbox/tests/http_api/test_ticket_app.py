"""An app built on the package's public API only (tickets.py: an aggregate, its routes on the
route helper, `Outbox.function_app`), called through its indexed functions on the in-memory
services: the write path, conditional requests, the relay, the quarantine and its notice, the
operators' API, all generic."""

from __future__ import annotations

from typing import Annotated

import pytest
from conftest import TicketWorld, body, problem
from pydantic import StringConstraints, ValidationError
from tickets import Ticket, TicketView

from cosmos_outbox._mapper import EVENT_TYPE
from cosmos_outbox.http import View


def opened(world: TicketWorld, title: str = "Printer on fire") -> tuple[str, str]:
    reply = world.client.request("POST", "tickets", body={"title": title})
    assert reply.status_code == 201, reply.get_body()
    return body(reply)["id"], reply.headers["ETag"]


def relay_all(world: TicketWorld) -> None:
    world.relay(list(world.memory.store.documents.values()))


def test_create_answers_201_with_location_etag_and_the_view(world: TicketWorld) -> None:
    reply = world.client.request("POST", "tickets", body={"title": " Printer ", "code": "ABC"})
    assert reply.status_code == 201
    ticket = body(reply)
    assert ticket == {
        "id": ticket["id"],
        "version": 1,
        "title": "Printer",
        "code": "ABC",
        "closed": False,
    }
    assert reply.headers["Location"] == f"/api/tickets/{ticket['id']}"
    assert reply.headers["ETag"].startswith('"')
    [event] = world.memory.store.of_type(EVENT_TYPE)
    assert (event["aggregateType"], event["partitionKey"], event["source"]) == (
        "ticket",
        ticket["id"],
        "/tickets",
    )
    assert event["aggregateId"] == ticket["id"]


def test_read_answers_the_etag_and_304_when_unchanged_and_404_when_missing(
    world: TicketWorld,
) -> None:
    tid, etag = opened(world)
    reply = world.client.request("GET", f"tickets/{tid}")
    assert (reply.status_code, reply.headers["ETag"]) == (200, etag)
    assert (
        world.client.request("GET", f"tickets/{tid}", headers={"If-None-Match": etag}).status_code
        == 304
    )
    problem(world.client.request("GET", f"tickets/{tid}", headers={"If-Match": '"other"'}), 412)
    problem(world.client.request("GET", "tickets/nope"), 404)


def test_a_patch_applies_the_fields_sent_one_event_each_in_one_batch(world: TicketWorld) -> None:
    tid, etag = opened(world)
    batches = world.memory.store.batches
    reply = world.client.request(
        "PATCH",
        f"tickets/{tid}",
        body={"title": "Fixed", "code": "FIX"},
        headers={"If-Match": etag},
    )
    assert reply.status_code == 200, reply.get_body()
    assert (body(reply)["title"], body(reply)["code"], body(reply)["version"]) == (
        "Fixed",
        "FIX",
        3,
    )
    assert reply.headers["ETag"] != etag
    assert world.memory.store.batches == batches + 1
    actions = sorted(e["action"] for e in world.memory.store.of_type(EVENT_TYPE))
    assert actions == ["TicketOpenedEvent", "TicketRecodedEvent", "TicketRetitledEvent"]


def test_a_stale_if_match_is_412_and_writes_nothing(world: TicketWorld) -> None:
    tid, _ = opened(world)
    batches = world.memory.store.batches
    problem(
        world.client.request(
            "PATCH", f"tickets/{tid}", body={"title": "Late"}, headers={"If-Match": '"stale"'}
        ),
        412,
    )
    assert world.memory.store.batches == batches


def test_an_etag_request_header_is_a_precondition_only_where_the_api_says_so(
    world: TicketWorld,
) -> None:
    """The reference sample's clients send the etag they read in a header named `ETag`: an
    app for them opts in (`etag_request_header=True`); elsewhere it is no precondition."""
    tid, _ = opened(world)
    changed = world.client.request(
        "PATCH", f"tickets/{tid}", body={"title": "Late"}, headers={"ETag": '"stale"'}
    )
    assert changed.status_code == 200
    legacy = TicketWorld(etag_request_header=True)
    tid, _ = opened(legacy)
    problem(
        legacy.client.request(
            "PATCH", f"tickets/{tid}", body={"title": "Later"}, headers={"ETag": '"stale"'}
        ),
        412,
    )


def test_a_business_rule_refusal_is_409_and_a_missing_precondition_428(
    world: TicketWorld,
) -> None:
    tid, etag = opened(world)
    problem(world.client.request("POST", f"tickets/{tid}/close"), 428)
    closed = world.client.request("POST", f"tickets/{tid}/close", headers={"If-Match": etag})
    assert (closed.status_code, body(closed)["closed"]) == (200, True)
    doc = problem(world.client.request("PATCH", f"tickets/{tid}", body={"title": "Again"}), 409)
    assert doc["detail"] == f"ticket {tid} is closed"


def test_the_code_field_keeps_its_own_pattern_and_the_text_rules(world: TicketWorld) -> None:
    for code in ("abc", "AB\u200b", "ABCD"):
        doc = problem(
            world.client.request("POST", "tickets", body={"title": "T", "code": code}), 400
        )
        assert doc["errors"][0]["field"] == "code"


def test_a_ticket_is_relayed_under_its_own_type(world: TicketWorld) -> None:
    tid, _ = opened(world)
    relay_all(world)
    [message] = world.memory.publisher.messages
    assert (message.session_id, message.subject, message.source) == (
        tid,
        "TicketOpenedEvent",
        "/tickets",
    )
    assert message.application_properties["aggregateType"] == "ticket"
    assert message.application_properties["ticketId"] == tid


def test_health_is_200_and_503_when_the_store_is_down(world: TicketWorld) -> None:
    assert world.client.request("GET", "health").status_code == 200
    from cosmos_outbox.errors import StoreUnavailableError

    world.memory.store.unavailable = StoreUnavailableError("down", retry_after=5)
    reply = world.client.request("GET", "health")
    problem(reply, 503)
    assert reply.headers["Retry-After"] == "5"


def test_unknown_routes_and_methods_are_problems(world: TicketWorld) -> None:
    problem(world.client.request("GET", "nothing/here"), 404)
    reply = world.client.request("PUT", "tickets")
    problem(reply, 405)
    assert reply.headers["Allow"] == "POST"


def test_a_view_of_its_own_model_is_the_validated_view_and_any_other_view_validates() -> None:
    """`View.of` takes the values of the model `view_of` made the view of as they are (the same
    types and limits, validated when the aggregate was); a view of another shape checks them."""
    ticket = Ticket.open("Printer on fire", "ABC")
    view = TicketView.of(ticket)
    assert view == TicketView.model_validate(
        ticket.model_dump(include=set(TicketView.model_fields))
    )
    assert view.model_dump_json(by_alias=True) == TicketView.model_validate(
        ticket.model_dump(include=set(TicketView.model_fields))
    ).model_dump_json(by_alias=True)

    class ShortTitle(View):
        title: Annotated[str, StringConstraints(max_length=3)]

    with pytest.raises(ValidationError):
        ShortTitle.of(ticket)
