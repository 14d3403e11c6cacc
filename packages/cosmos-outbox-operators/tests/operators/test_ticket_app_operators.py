"""The tickets app's quarantine and re-drive through the operators' routes, generic over
aggregates (moved from the core's http_api/test_ticket_app.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import TicketWorld, body, problem

from cosmos_outbox.documents import EVENT_TYPE
from cosmos_outbox.relay import QUARANTINE_NOTICE_SUBJECT, notice_id


def opened(world: TicketWorld, title: str = "Printer on fire") -> tuple[str, str]:
    reply = world.client.request("POST", "tickets", body={"title": title})
    assert reply.status_code == 201, reply.get_body()
    return body(reply)["id"], reply.headers["ETag"]


def relay_all(world: TicketWorld) -> None:
    world.relay(list(world.memory.store.documents.values()))


def test_a_poison_event_is_quarantined_with_a_notice_and_listed_generically() -> None:
    world = TicketWorld(max_payload_bytes=0)  # no claim check: too large for a message = poison
    tid, _ = opened(world)
    [doc] = world.memory.store.of_type(EVENT_TYPE)
    doc["body"] = json.dumps({**json.loads(doc["body"]), "title": "x" * 5000})
    world.memory.store.put(doc)
    relay_all(world)
    [notice] = world.memory.publisher.messages
    assert (notice.subject, notice.message_id, notice.session_id) == (
        QUARANTINE_NOTICE_SUBJECT,
        notice_id(doc["id"]),
        tid,
    )
    assert json.loads(notice.body) | {"reason": ""} == {
        "eventId": doc["id"],
        "ticketId": tid,
        "aggregateType": "ticket",
        "aggregateId": tid,
        "action": "TicketOpenedEvent",
        "version": 1,
        "reason": "",
    }
    [item] = body(world.client.request("GET", "outbox/quarantine"))["items"]
    assert (item["eventId"], item["aggregateType"], item["aggregateId"]) == (
        doc["id"],
        "ticket",
        tid,
    )
    assert "contactId" not in item
    world.memory.publisher.max_batch_bytes = 1024 * 1024
    replayed = body(world.client.request("POST", f"outbox/quarantine/{doc['id']}/replay"))
    assert (replayed["status"], replayed["aggregateType"]) == ("resolved", "ticket")
    assert world.memory.publisher.messages[-1].message_id == doc["id"]


def test_a_redrive_takes_one_aggregate_type_or_one_aggregate_of_it(world: TicketWorld) -> None:
    tids = [opened(world, f"T{i}")[0] for i in range(2)]

    def redrive(**scope: str) -> dict[str, Any]:
        reply = world.client.request(
            "POST", "outbox/redrive", body={"since": "2000-01-01T00:00:00Z", **scope}
        )
        assert reply.status_code == 202, reply.get_body()
        return body(reply)  # type: ignore[no-any-return]

    assert redrive()["events"] == 2
    assert redrive(aggregateType="ticket")["events"] == 2
    assert redrive(aggregateType="ticket", aggregateId=tids[0])["events"] == 1
    assert redrive(aggregateType="order")["events"] == 0


@pytest.mark.parametrize(
    ("scope", "field"),
    [
        ({"aggregateId": "abc"}, "$"),
        ({"aggregateType": "no spaces"}, "aggregateType"),
        ({"contactId": "abc"}, "contactId"),
    ],
)
def test_a_redrive_scope_that_does_not_hold_together_is_a_400(
    world: TicketWorld,
    scope: dict[str, str],
    field: str,
) -> None:
    doc = problem(
        world.client.request(
            "POST", "outbox/redrive", body={"since": "2000-01-01T00:00:00Z", **scope}
        ),
        400,
    )
    assert doc["errors"][0]["field"] == field
