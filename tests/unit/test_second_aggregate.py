"""A second aggregate (Ticket, tests/tickets.py) served by an app of its own
(tests/e2e/ticket_app: one route and the outbox blueprint as it ships), through its indexed
functions on the in-memory fakes: the write path, the relay, the quarantine and its notice, and
the operators' API name the ticket generically. No shared plumbing knows tickets."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from application.outbox.records import QUARANTINE_NOTICE_SUBJECT, notice_id
from domain.contact import Contact
from domain.values import Company, Name
from infra.cosmos.documents import EVENT_TYPE, read_feed
from tests.conftest import FakeWorld
from tests.unit.test_http_api import Api, body, problem

TICKET_APP = Path(__file__).resolve().parents[1] / "e2e" / "ticket_app" / "function_app.py"


def load_ticket_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ticket_function_app", TICKET_APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ticket_functions() -> Iterator[dict[str, Any]]:
    app = load_ticket_app().app
    yield {str(f.get_function_name()): f for f in app.get_functions()}


@pytest.fixture
def api(ticket_functions: dict[str, Any], world: FakeWorld) -> Api:
    world.publisher.max_batch_bytes = 4096
    return Api(ticket_functions)


def open_ticket(api: Api, title: str = "Printer on fire") -> str:
    reply = api.call("open_ticket", "POST", "tickets", body={"title": title})
    assert reply.status_code == 201, reply.get_body()
    ticket_id: str = body(reply)["id"]
    return ticket_id


def relay_all(world: FakeWorld) -> None:
    world.deps.outbox.relay.relay(read_feed(list(world.store.documents.values())))


def test_the_ticket_app_is_its_route_and_the_outbox_functions(
    ticket_functions: dict[str, Any],
) -> None:
    assert set(ticket_functions) == {
        "open_ticket", "relay_events", "outbox_backlog", "outbox_status", "list_quarantine",
        "replay_quarantined", "discard_quarantined", "redrive_events"}


def test_a_ticket_and_its_event_are_written_and_relayed_under_its_own_type(
    api: Api, world: FakeWorld,
) -> None:
    tid = open_ticket(api)
    [event] = world.store.of_type(EVENT_TYPE)
    assert (event["aggregateType"], event["partitionKey"], event["source"]) == (
        "ticket", tid, "/tickets")
    assert event["data"]["ticketId"] == tid
    relay_all(world)
    [message] = world.publisher.messages
    assert (message.session_id, message.subject, message.source) == (
        tid, "TicketOpenedEvent", "/tickets")
    assert message.application_properties["aggregateType"] == "ticket"
    assert message.application_properties["ticketId"] == tid


def test_a_poison_ticket_event_is_quarantined_with_a_notice_and_listed_generically(
    api: Api, world: FakeWorld,
) -> None:
    tid = open_ticket(api)
    [doc] = world.store.of_type(EVENT_TYPE)
    doc["data"]["title"] = "x" * 5000
    world.store.put(doc)
    relay_all(world)
    [notice] = world.publisher.messages
    assert (notice.subject, notice.message_id, notice.session_id) == (
        QUARANTINE_NOTICE_SUBJECT, notice_id(doc["id"]), tid)
    assert json.loads(notice.body) | {"reason": ""} == {
        "eventId": doc["id"], "ticketId": tid, "aggregateType": "ticket", "aggregateId": tid,
        "action": "TicketOpenedEvent", "version": 1, "reason": ""}
    [item] = body(api.call("list_quarantine", "GET", "outbox/quarantine"))["items"]
    assert (item["eventId"], item["aggregateType"], item["aggregateId"], item["contactId"]) == (
        doc["id"], "ticket", tid, None)
    world.publisher.max_batch_bytes = 1024 * 1024
    replayed = body(api.call("replay_quarantined", "POST",
                             f"outbox/quarantine/{doc['id']}/replay",
                             route_params={"eventId": doc["id"]}))
    assert (replayed["status"], replayed["aggregateType"]) == ("resolved", "ticket")
    assert world.publisher.messages[-1].message_id == doc["id"]


def test_a_redrive_takes_one_aggregate_type_or_one_aggregate_of_it(
    api: Api, world: FakeWorld,
) -> None:
    tids = [open_ticket(api, f"T{i}") for i in range(2)]
    contact = Contact.create(name=Name(first_name="A", last_name="L"), email="a@example.com",
                             company=Company(company_name="E"))
    with world.deps.uow() as uow:
        uow.repository(Contact).add(contact)
        uow.commit()

    def redrive(**scope: str) -> dict[str, Any]:
        reply = api.call("redrive_events", "POST", "outbox/redrive",
                         body={"since": "2000-01-01T00:00:00Z", **scope})
        assert reply.status_code == 202, reply.get_body()
        return body(reply)  # type: ignore[no-any-return]

    assert redrive()["events"] == 3
    assert redrive(aggregateType="ticket")["events"] == 2
    assert redrive(aggregateType="ticket", aggregateId=tids[0])["events"] == 1
    assert redrive(aggregateType="contact")["events"] == 1
    assert redrive(contactId=contact.id)["events"] == 1
    assert redrive(contactId=tids[0])["events"] == 0  # a ticket is no contact


@pytest.mark.parametrize(("scope", "field"), [
    ({"aggregateId": "abc"}, "$"),
    ({"contactId": "abc", "aggregateId": "abc", "aggregateType": "contact"}, "$"),
    ({"contactId": "abc", "aggregateType": "ticket"}, "$"),
    ({"aggregateType": "no spaces"}, "aggregateType"),
])
def test_a_redrive_scope_that_does_not_hold_together_is_a_400(
    api: Api, scope: dict[str, str], field: str,
) -> None:
    doc = problem(api.call("redrive_events", "POST", "outbox/redrive",
                           body={"since": "2000-01-01T00:00:00Z", **scope}), 400)
    assert doc["errors"][0]["field"] == field
