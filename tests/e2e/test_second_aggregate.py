"""A second aggregate through the whole outbox on the local stack: the ticket app
(tests/e2e/ticket_app: one route and the outbox blueprint as it ships) in the local Functions
host, real SDKs. Its events reach the topic in their own sessions with their own aggregate type,
CloudEvents source and id property; a poison ticket event is quarantined with a notice, and
listed, re-driven and discarded through the operators' routes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from application.outbox.records import QUARANTINE_NOTICE_SUBJECT, notice_id
from funcstack.functions_host._launcher import RunningRunner, start_runner
from tools.httpclient import Client
from tools.receive import count_at_least, drain
from tools.stack import ROOT, Ports, Stack

pytestmark = pytest.mark.e2e
TICKET_APP = Path(__file__).resolve().parent / "ticket_app"


@pytest.fixture
def ticket_app(tmp_path: Path) -> Iterator[tuple[Stack, RunningRunner]]:
    with Stack(workdir=tmp_path / "stack", ports=Ports.free(), with_runner=False) as stack:
        runner = start_runner(
            app_dir=TICKET_APP, port=0, log_path=tmp_path / "ticket-app.log",
            settings={**stack.settings(), "FEED_POLL_DELAY_MS": "100"},
            # the ticket app imports this repository's outbox modules, which are not installed
            extra_import_paths=[ROOT])
        try:
            yield stack, runner
        finally:
            runner.stop()


def test_tickets_travel_the_outbox_under_their_own_type_and_operators_see_them(
    ticket_app: tuple[Stack, RunningRunner],
) -> None:
    stack, runner = ticket_app
    assert stack.servicebus is not None and stack.cosmos is not None
    client = Client(runner.url)
    ids = []
    for title in ("Printer on fire", "Coffee machine empty"):
        reply = client.request("POST", "/tickets", json_body={"title": title})
        assert reply.status == 201, reply.body
        ids.append(reply.json()["id"])
    received = drain(stack.servicebus.connection_string, until=count_at_least(2), timeout=60)
    assert sorted((r.session_id, r.subject, r.version) for r in received) == sorted(
        (tid, "TicketOpenedEvent", 1) for tid in ids)
    for r in received:
        assert r.properties["aggregateType"] == "ticket"
        assert r.properties["ticketId"] == r.session_id == r.body["ticketId"]
        assert r.properties["cloudEvents_source"] == "/tickets"
        assert "contactId" not in r.properties
    # the subscriber app's subscription filters on the aggregate type: no ticket reaches it
    assert drain(stack.servicebus.connection_string, until=lambda got: False, timeout=3,
                 subscription="contact-projection") == []

    # a poison ticket event (larger than the topic takes) is set aside with a notice
    container = stack.contacts_container()
    poison = {"id": "poison-ticket-event", "partitionKey": ids[0], "type": "domainEvent",
              "aggregateType": "ticket", "source": "/tickets", "ttl": 600,
              "data": {"id": "poison-ticket-event", "ticketId": ids[0], "version": 2,
                       "action": "TicketRetitledEvent", "createdAt": "2026-01-01T00:00:00Z",
                       "title": "x" * 300_000}}
    container.create_item(poison)
    [notice] = drain(stack.servicebus.connection_string, until=count_at_least(1), timeout=60)
    assert (notice.subject, notice.message_id, notice.session_id, notice.version) == (
        QUARANTINE_NOTICE_SUBJECT, notice_id(poison["id"]), ids[0], 2)
    assert notice.properties["aggregateType"] == "ticket"
    listed = client.request("GET", "/outbox/quarantine").json()["items"]
    assert [(i["eventId"], i["aggregateType"], i["aggregateId"], i["contactId"])
            for i in listed] == [(poison["id"], "ticket", ids[0], None)]

    # re-drive one ticket's events (the topic drops them: inside its duplicate window)
    reply = client.request("POST", "/outbox/redrive", json_body={
        "since": "2000-01-01T00:00:00Z", "aggregateType": "ticket", "aggregateId": ids[1]})
    assert reply.status == 202, reply.body
    assert reply.json() == {"events": 1, "sent": 1, "quarantined": 0}

    # the event fixed where it is stored: the change feed relays it, with its own id, in its
    # ticket's session; the record is then discarded, with the reason, by an operator
    container.upsert_item({**poison, "data": {**poison["data"], "title": "Printer fixed"}})
    received = drain(stack.servicebus.connection_string,
                     until=lambda got: any(r.message_id == poison["id"] for r in got),
                     timeout=60)
    [fixed] = [r for r in received if r.message_id == poison["id"]]
    assert (fixed.session_id, fixed.subject, fixed.body["title"]) == (
        ids[0], "TicketRetitledEvent", "Printer fixed")
    reply = client.request("DELETE", f"/outbox/quarantine/{poison['id']}?reason=fixed+in+place")
    assert reply.status == 204, reply.body
    assert client.request("GET", "/outbox/quarantine").json()["items"] == []
