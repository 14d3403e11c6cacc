"""A relay that cannot do its work says so at once, and where every instance can read it: it
checks what it needs before it first relays (the topic, the claim check's payload container),
refuses to start with one line naming what is missing and the fix, relays nothing meanwhile
(its invocation fails and is retried: nothing is lost), and the operators' status and /health
show that it is blocked, on which event and why, until it gets past it."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from typing import Any

import pytest
from conftest import TicketWorld, body, console_fragment
from tickets import Ticket

from cosmos_outbox.documents import aggregate_event_document
from cosmos_outbox.errors import RelayNotReadyError
from cosmos_outbox.ports import MessageBatch
from cosmos_outbox_testing import FakePublisher, timer_request


def _stored(world: TicketWorld, *, title: str = "Printer on fire") -> list[dict[str, Any]]:
    ticket = Ticket.open(title)
    documents = [
        aggregate_event_document(e, source=Ticket.source(), ttl_seconds=60)
        for e in ticket.collect_events()
    ]
    for document in documents:
        world.memory.store.put(document)
    return documents


def _status(world: TicketWorld) -> dict[str, Any]:
    reply = world.client.request("GET", "outbox/status")
    assert reply.status_code == 200, reply.get_body()
    status: dict[str, Any] = body(reply)
    return status


def test_a_relay_without_its_payload_container_refuses_to_start_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = TicketWorld()
    world.memory.payloads.exists = False
    small = _stored(world)  # not even a small event goes before the relay can run
    with (
        caplog.at_level(logging.ERROR, "cosmos_outbox.relay"),
        pytest.raises(RelayNotReadyError, match="payload container outbox-payloads"),
    ):
        world.relay(small)
    assert world.memory.publisher.messages == []
    assert any(
        "OUTBOX_PAYLOAD_CONTAINER" in r.getMessage()
        or "outbox-payloads" in str(r.args)
        or "RelayNotReadyError" in r.getMessage()
        for r in caplog.records
    )
    blocked = _status(world)["relayBlocked"]
    assert blocked["eventId"] == small[0]["id"] and blocked["attempts"] == 1
    assert "RelayNotReadyError" in blocked["reason"] and "does not exist" in blocked["reason"]
    health = world.client.request("GET", "health")
    assert health.status_code == 200
    assert body(health)["status"] == "degraded"
    assert body(health)["relay"]["eventId"] == small[0]["id"]

    with pytest.raises(RelayNotReadyError):  # a retry: still missing, one more attempt
        world.relay(small)
    assert _status(world)["relayBlocked"]["attempts"] == 2

    world.memory.payloads.exists = True  # created: the next retry relays, the status clears
    report = world.relay(small)
    assert report.sent == 1 and [m.message_id for m in world.memory.publisher.messages] == [
        small[0]["id"]
    ]
    assert _status(world)["relayBlocked"] is None
    assert body(world.client.request("GET", "health")) == {"status": "healthy"}


class _NoTopic(FakePublisher):
    """A publisher whose topic does not exist: a sender's link cannot open."""

    def create_batch(self) -> MessageBatch:
        raise LookupError("The messaging entity 'sb://local/test-events' could not be found")


def test_a_relay_whose_topic_is_missing_refuses_to_start_naming_the_topic() -> None:
    world = TicketWorld()
    world.memory.services = dataclasses.replace(world.memory.services, publisher=_NoTopic)
    stored = _stored(world)
    with pytest.raises(RelayNotReadyError, match=r"topic 'test-events'.*SERVICEBUS_TOPIC"):
        world.relay(stored)
    assert "could not be found" in _status(world)["relayBlocked"]["reason"]


def test_a_relay_stuck_on_a_send_names_the_event_in_the_status() -> None:
    world = TicketWorld(max_batch_bytes=4096)
    stored = _stored(world)
    world.memory.publisher.fail_on_send = 1
    with pytest.raises(ConnectionError):
        world.relay(stored)
    blocked = _status(world)["relayBlocked"]
    assert blocked["eventId"] == stored[0]["id"] and "broker unavailable" in blocked["reason"]
    world.relay(stored)  # the retry sends it: unblocked
    assert _status(world)["relayBlocked"] is None
    assert json.loads(world.memory.publisher.messages[0].body)["title"] == "Printer on fire"


def test_before_any_event_the_backlog_timer_says_what_the_relay_cannot_do(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """issue 48: a fresh deployment with no event yet showed healthy while its claim check's
    container was missing; the first large event then stalled the relay. The backlog timer
    (`outbox_backlog`, every minute) checks what the relay needs until it is found."""
    world = TicketWorld()
    world.memory.payloads.exists = False
    with caplog.at_level(logging.ERROR, "cosmos_outbox.relay"):
        world.client.invoke("outbox_backlog", timer_request())
    [line] = [r.getMessage() for r in caplog.records if "relay not ready" in r.getMessage()]
    assert "payload container outbox-payloads does not exist" in line
    blocked = _status(world)["relayBlocked"]
    assert blocked["eventId"] is None and "RelayNotReadyError" in blocked["reason"]
    health = world.client.request("GET", "health")
    assert body(health)["status"] == "degraded"

    world.memory.payloads.exists = True  # created: the next tick finds it, the status clears
    world.client.invoke("outbox_backlog", timer_request())
    assert _status(world)["relayBlocked"] is None
    assert body(world.client.request("GET", "health")) == {"status": "healthy"}
    caplog.clear()
    with caplog.at_level(logging.INFO, "cosmos_outbox.relay"):
        world.client.invoke("outbox_backlog", timer_request())  # ready: not asked again
    assert not [r for r in caplog.records if "payload container" in r.getMessage()]


def test_a_lease_container_created_after_the_timer_said_it_was_missing_clears_the_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The backlog's read of the lease container said "not ready"; once the container is there
    the next tick clears the status, though no event was sent since (a quiet app would show
    degraded for the record's hour)."""
    world = TicketWorld()
    missing = RelayNotReadyError("the relay's lease container 'leases' does not exist")

    def lease_container_missing() -> list[Any]:
        raise missing

    monkeypatch.setattr(world.memory.backlog, "estimate", lease_container_missing)
    said = _status(world)  # before any tick: no backlog to read, and why (not a 500)
    assert said["leases"] == [] and "lease container 'leases'" in said["relayBlocked"]["reason"]
    with pytest.raises(Exception, match="lease container 'leases' does not exist"):
        world.client.invoke("outbox_backlog", timer_request())
    blocked = _status(world)["relayBlocked"]
    assert blocked["eventId"] is None and "lease container" in blocked["reason"]

    monkeypatch.undo()  # created
    world.client.invoke("outbox_backlog", timer_request())
    assert _status(world)["relayBlocked"] is None
    assert body(world.client.request("GET", "health")) == {"status": "healthy"}


def test_a_hung_broker_is_stalled_not_ready_then_healthy_once_events_leave(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 66, item 1: with Service Bus frozen over two minutes the console said "The relay
    is ready: nothing blocks it." in green while events waited 2 min 3 s (its lease row said
    "Checkpoint: 1 s ago": a lease is renewed while its invocation hangs). Healthy means moving:
    an event pending longer than the poll delay and the bound is stalled, since when the oldest
    should have left, naming the dependency that does not answer; the backlog timer logs it each
    tick and /health says degraded; once the events leave, healthy."""
    import time

    from cosmos_outbox.ports import LeaseBacklog

    world = TicketWorld()
    stored = _stored(world)
    allowed = world.memory.services.stall_after_seconds
    waited = allowed + 62.0
    frozen = world.memory.publisher

    def hangs() -> None:
        raise TimeoutError("Service Bus did not answer: the connection timed out")

    monkeypatch.setattr(frozen, "probe", hangs)
    created = time.time() - waited
    world.memory.backlog.leases = [
        LeaseBacklog(
            "0",
            1,
            created,
            owner="instance-1",
            checkpoint_at="2026-11-26T08:00:00Z",  # renewed: says nothing about movement
            pending_ids=(stored[0]["id"],),
            pending_ids_complete=True,
        )
    ]
    relay = _status(world)["relay"]
    assert (relay["state"], relay["ready"], relay["moving"]) == ("stalled", True, False)
    assert relay["notAnswering"] == "Service Bus" and "TimeoutError" in relay["lastError"]
    assert "stalled" in relay["summary"] and "Service Bus does not answer" in relay["summary"]
    assert abs(_since(relay) - (created + allowed)) < 2
    page = console_fragment(world.client, "status", monkeypatch)  # never green while stalled
    assert 'data-relay-state="stalled"' in page and "The relay is stalled" in page
    # M11 (issue 92): one story, its times consistent: how long the oldest has waited, the
    # bound, and since when it is over it ("stalled since 9 s ago" beside "oldest pending 1 min
    # 8 s" read as a contradiction)
    said = re.search(r"the oldest has waited ([^,]+), longer than the ([\d.]+) s allowed", page)
    assert said is not None, page
    assert float(said.group(2)) == allowed and "stalled from when it went over:" in page
    assert "Not answering: Service Bus" in page and 'class="ok"' not in page
    with caplog.at_level(logging.ERROR, "cosmos_outbox.relay"):
        world.client.invoke("outbox_backlog", timer_request())
    assert any("relay stalled since" in r.getMessage() for r in caplog.records)
    health = body(world.client.request("GET", "health"))
    assert health["status"] == "degraded" and health["relay"]["state"] == "stalled"

    monkeypatch.undo()  # the broker answers again: the events leave
    world.relay(stored)
    world.memory.backlog.leases = [LeaseBacklog("0", 0, None, pending_ids_complete=True)]
    assert _status(world)["relay"]["state"] == "healthy"
    assert "The relay is healthy" in console_fragment(world.client, "status", monkeypatch)
    world.client.invoke("outbox_backlog", timer_request())
    assert body(world.client.request("GET", "health")) == {"status": "healthy"}


def _since(relay: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(relay["since"].replace("Z", "+00:00")).timestamp()
