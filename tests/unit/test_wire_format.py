"""The messages subscribers receive, pinned byte for byte by a stored fixture
(tests/fixtures/wire_format.json, written by the code before the outbox became generic): body,
MessageId, SessionId, Subject, content type and application properties. Events stored before
the envelope named their aggregate (no `aggregateType`) still relay to the same message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from application.outbox import OutboxRecord, to_message
from application.relay import Relay
from domain.events import EVENT_ADAPTER
from infra.cosmos.documents import event_document, read_feed
from infra.servicebus.publisher import to_servicebus_message
from tests.fakes import FakePublisher, InMemoryQuarantine

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "wire_format.json").read_text("utf-8"))


def relayed(document: dict[str, Any]) -> dict[str, Any]:
    publisher = FakePublisher()
    Relay(publisher, InMemoryQuarantine()).relay(read_feed([document]))
    [message] = publisher.messages
    return {
        "message_id": message.message_id, "session_id": message.session_id,
        "subject": message.subject, "content_type": message.content_type,
        "application_properties": message.application_properties,
        "body": message.body.decode(),
    }


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["stored"]["data"]["action"])
def test_an_event_stored_before_is_relayed_as_the_same_message(case: dict[str, Any]) -> None:
    assert relayed(case["stored"]) == case["message"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["stored"]["data"]["action"])
def test_the_same_event_stored_today_is_relayed_as_the_same_message(case: dict[str, Any]) -> None:
    event = EVENT_ADAPTER.validate_python(case["stored"]["data"])
    document = event_document(event, ttl_seconds=case["stored"]["ttl"])
    assert document == case["stored"] | {"aggregateType": "contact"}
    assert relayed(document) == case["message"]


def test_the_service_bus_message_carries_the_pinned_fields() -> None:
    case = CASES[0]
    [item] = read_feed([case["stored"]])
    assert isinstance(item, OutboxRecord)
    message = to_servicebus_message(to_message(item))
    expected = case["message"]
    assert str(message) == expected["body"]
    assert message.message_id == expected["message_id"]
    assert message.session_id == expected["session_id"]
    assert message.subject == expected["subject"]
    assert message.content_type == expected["content_type"]
    assert message.application_properties == expected["application_properties"]
