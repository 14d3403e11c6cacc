"""The claim check on the in-memory services: an event too large for a message travels as the
same message with an empty body and `dataref`, its body in the payload store, in its place in
its session; a failed upload sends nothing of its batch and is retried; what cannot be
offloaded is quarantined; a subscriber reads the event whole."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from conftest import TicketWorld

from cosmos_outbox._mapper import EVENT_TYPE, QUARANTINE_NOTICE_SUBJECT, application_properties
from cosmos_outbox._records import OutboxMessage
from cosmos_outbox.errors import PayloadNotFoundError, PayloadStoreError
from cosmos_outbox.subscriber import UnreadableEventError, from_message

LIMIT = 4096  # the fake publisher's batch (and so message) limit


def history(world: TicketWorld, sizes: list[int]) -> tuple[str, list[dict[str, Any]]]:
    """A ticket whose version i+1 has a title of sizes[i] characters (0: the API's own)."""
    reply = world.client.request("POST", "tickets", body={"title": "Printer on fire"})
    assert reply.status_code == 201, reply.get_body()
    tid = json.loads(reply.get_body())["id"]
    for _ in sizes[1:]:
        changed = world.client.request(
            "PATCH", f"tickets/{tid}", body={"title": f"Retitled {len(sizes)}x"}
        )
        assert changed.status_code == 200, changed.get_body()
        world.client.request("PATCH", f"tickets/{tid}", body={"title": "Printer on fire"})
    docs = sorted(world.memory.store.of_type(EVENT_TYPE), key=lambda d: d["version"])
    docs = docs[: len(sizes)]
    for doc, size in zip(docs, sizes, strict=True):
        if size:
            doc["body"] = json.dumps(
                {**json.loads(doc["body"]), "title": "t" * size}, separators=(",", ":")
            )
            world.memory.store.put(doc)
    return tid, docs


def relay(world: TicketWorld, docs: list[dict[str, Any]]) -> Any:
    return world.relay(docs)


def test_an_event_too_large_for_a_message_travels_by_claim_check_in_its_place() -> None:
    world = TicketWorld(max_batch_bytes=LIMIT)
    tid, docs = history(world, [0, 300_000, 1_500_000, 0])
    report = relay(world, docs)
    assert (report.sent, report.offloaded, report.quarantined) == (4, 2, [])
    assert report.offloaded_bytes == sum(len(d["body"].encode()) for d in docs[1:3])
    messages = world.memory.publisher.messages
    assert [(m.message_id, m.session_id, m.version) for m in messages] == [
        (d["id"], tid, d["version"]) for d in docs
    ]  # in order, same ids
    small, *claims, last = messages
    assert small.dataref is None and last.dataref is None
    for message, doc in zip(claims, docs[1:3], strict=True):
        assert message.body == b""
        assert message.content_type == "application/json"
        assert message.subject == doc["action"]
        assert message.application_properties["ticketId"] == tid
        name = f"ticket/{tid}/{doc['id']}"
        assert message.dataref == world.memory.payloads.reference(name)
        assert world.memory.payloads.bodies[name] == doc["body"].encode()  # the body, whole
        assert world.memory.payloads.content_types[name] == "application/json"
        properties = application_properties(message)
        assert properties["cloudEvents_dataref"] == message.dataref
        assert properties["cloudEvents_id"] == doc["id"]


def test_a_claim_check_goes_in_the_batch_being_filled_not_a_batch_of_its_own() -> None:
    """A message that can never fit a batch does not close the batch before it: its claim
    check travels with the events around it (one send, not three)."""
    world = TicketWorld(max_batch_bytes=LIMIT)
    _, docs = history(world, [0, 300_000, 0])
    report = relay(world, docs)
    assert (report.sent, report.offloaded, report.batches) == (3, 1, 1)
    [batch] = world.memory.publisher.sent
    assert [m.dataref is not None for m in batch] == [False, True, False]


def test_a_small_event_is_sent_as_before_and_stores_nothing() -> None:
    world = TicketWorld(max_batch_bytes=LIMIT)
    _, docs = history(world, [0])
    relay(world, docs)
    [message] = world.memory.publisher.messages
    assert message.dataref is None and message.body
    assert "cloudEvents_dataref" not in application_properties(message)
    assert world.memory.payloads.puts == 0


def test_a_failed_upload_sends_nothing_of_its_batch_and_the_retry_sends_it_once() -> None:
    world = TicketWorld(max_batch_bytes=LIMIT)
    tid, docs = history(world, [0, 300_000, 0])
    world.memory.payloads.unavailable = True
    with pytest.raises(PayloadStoreError):
        relay(world, docs)
    # The claim check's batch (which holds version 1 too) is not sent: nothing is sent before
    # its blob exists, nor anything after it.
    assert world.memory.publisher.messages == []
    world.memory.payloads.unavailable = False
    report = relay(world, docs)  # the trigger's retry: the same documents
    assert (report.sent, report.offloaded) == (3, 1)
    assert [m.version for m in world.memory.publisher.messages] == [1, 2, 3]
    assert list(world.memory.payloads.bodies) == [f"ticket/{tid}/{docs[1]['id']}"]
    relay(world, docs)  # a resend (the topic drops it): the same name, the same bytes
    assert len(world.memory.payloads.bodies) == 1


def test_an_event_above_the_payload_limit_is_quarantined_with_its_notice() -> None:
    world = TicketWorld(max_batch_bytes=LIMIT, max_payload_bytes=100_000)
    _, docs = history(world, [0, 300_000, 0])
    report = relay(world, docs)
    assert report.quarantined == [docs[1]["id"]]
    assert "OUTBOX_PAYLOAD_MAX_BYTES (100000)" in report.reasons[docs[1]["id"]]
    assert [m.subject for m in world.memory.publisher.messages] == [
        "TicketOpenedEvent",
        QUARANTINE_NOTICE_SUBJECT,
        "TicketRetitledEvent",
    ]
    assert world.memory.payloads.puts == 0


def test_without_a_claim_check_a_large_event_is_quarantined_as_before() -> None:
    world = TicketWorld(max_batch_bytes=LIMIT, max_payload_bytes=0)
    _, docs = history(world, [0, 300_000])
    report = relay(world, docs)
    assert report.quarantined == [docs[1]["id"]]
    assert "no claim check" in report.reasons[docs[1]["id"]]
    assert world.memory.payloads.puts == 0


def test_a_claim_check_message_that_does_not_fit_either_is_quarantined_and_stores_nothing() -> None:
    world = TicketWorld(max_batch_bytes=150)  # a claim check (id + reference) is larger
    _, docs = history(world, [200])
    report = relay(world, docs)
    assert report.quarantined == [docs[0]["id"]]
    assert "claim-check message does not fit" in report.reasons[docs[0]["id"]]
    assert world.memory.payloads.puts == 0  # no orphan


def test_the_link_is_asked_again_once_per_invocation_not_once_per_large_event() -> None:
    world = TicketWorld(max_batch_bytes=LIMIT)
    world.memory.publisher.entity_limit = 2 * LIMIT  # raised since the link opened
    _, docs = history(world, [0, 10_000, 20_000, 30_000])
    relay(world, docs)
    assert world.memory.publisher.refreshes == 1


def test_an_offloaded_event_is_logged_with_its_size_and_reference(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = TicketWorld(max_batch_bytes=LIMIT)
    _, docs = history(world, [0, 10_000])
    with caplog.at_level(logging.INFO, logger="cosmos_outbox.relay"):
        relay(world, docs)
    [line] = [r for r in caplog.records if "offloaded event" in r.getMessage()]
    assert line.__dict__["outbox.event_id"] == docs[1]["id"]
    assert line.__dict__["outbox.dataref"].endswith(docs[1]["id"])
    summary = [r for r in caplog.records if r.getMessage().startswith("relay invocation")]
    assert "offloaded=1" in summary[-1].getMessage()
    assert summary[-1].__dict__["outbox.offloaded"] == 1


# -- the subscriber's side -----------------------------------------------------------------------


def _claim(world: TicketWorld) -> tuple[OutboxMessage, dict[str, Any]]:
    _, docs = history(world, [0, 300_000])
    relay(world, docs)
    return world.memory.publisher.messages[1], docs[1]


def test_a_subscriber_reads_a_claim_check_as_the_whole_event() -> None:
    world = TicketWorld(max_batch_bytes=LIMIT)
    message, doc = _claim(world)
    event = from_message(
        message.body,
        content_type=message.content_type,
        application_properties=application_properties(message),
        payloads=world.memory.payloads.get,
    )
    assert event.data == json.loads(doc["body"])
    assert (event.event_id, event.version, event.type) == (doc["id"], 2, "TicketRetitledEvent")
    assert event.dataref == message.dataref


def test_a_claim_check_whose_payload_is_gone_raises_and_one_without_a_store_is_unreadable() -> None:
    world = TicketWorld(max_batch_bytes=LIMIT)
    message, _ = _claim(world)
    world.memory.payloads.bodies.clear()  # expired, deleted
    properties = application_properties(message)
    with pytest.raises(PayloadNotFoundError):
        from_message(
            b"",
            content_type="application/json",
            application_properties=properties,
            payloads=world.memory.payloads.get,
        )
    with pytest.raises(UnreadableEventError, match="dataref"):
        from_message(b"", content_type="application/json", application_properties=properties)
