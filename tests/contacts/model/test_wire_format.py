"""The messages subscribers receive, pinned byte for byte by a stored fixture
(tests/contacts/fixtures/wire_format.json, written by the code before the outbox became generic):
body, MessageId, SessionId, Subject, content type and application properties. Events stored before
(format 1: the envelope in `data`, and before that without `aggregateType`) still relay to the
same message, read as the Contacts app reads them (`LEGACY_EVENTS`: contact events, from
/contacts). The same events stored today (format 2) relay with their own fields as the body and
the same properties, plus `outboxFormat`.

Each case's `cloudevents` (added later, the pinned fields untouched) pins the CloudEvents
attributes the Service Bus message adds beside them (AMQP binding, binary content mode); the
official SDK reads the message back as the same event."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage
from cloudevents.core.bindings.amqp import AMQPMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from cosmos_outbox.documents import aggregate_event_document, read_feed
from cosmos_outbox.relay import OutboxRecord, Quarantine, Relay, RelayTelemetry, to_message
from cosmos_outbox.servicebus import to_servicebus_message
from cosmos_outbox_testing import FakePublisher, InMemoryStore, run_sync
from domain.contact import Contact
from entrypoints.bootstrap import LEGACY_EVENTS

#: The relay's telemetry (the global providers: a no-op unless a test installs an SDK).
TELEMETRY = RelayTelemetry(destination="test-events")

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "wire_format.json").read_text("utf-8")
)
#: The one addition to the pinned properties since the fixture was written: the
#: aggregate type, which subscriptions filter on (a correlation filter per aggregate type).
ADDED_PROPERTIES = {"aggregateType": "contact"}


def pinned(case: dict[str, Any]) -> dict[str, Any]:
    """The message as the fixture pins it, with the documented addition."""
    message = dict(case["message"])
    message["application_properties"] = message["application_properties"] | ADDED_PROPERTIES
    return message


def relayed(document: dict[str, Any]) -> dict[str, Any]:
    publisher = FakePublisher()
    relay = Relay(publisher, Quarantine(InMemoryStore(), legacy=LEGACY_EVENTS), TELEMETRY)
    run_sync(relay.relay(read_feed([document], legacy=LEGACY_EVENTS)))
    [message] = publisher.messages
    return {
        "message_id": message.message_id,
        "session_id": message.session_id,
        "subject": message.subject,
        "content_type": message.content_type,
        "application_properties": message.application_properties,
        "body": message.body.decode(),
    }


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["stored"]["data"]["action"])
def test_an_event_stored_before_is_relayed_as_the_same_message(case: dict[str, Any]) -> None:
    assert relayed(case["stored"]) == pinned(case)


#: The envelope's names in a format 1 event's data (and `contactId`).
ENVELOPE = {"id", "contactId", "version", "createdAt", "traceparent", "action"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["stored"]["data"]["action"])
def test_the_same_event_stored_today_is_relayed_with_only_its_own_fields_as_the_body(
    case: dict[str, Any],
) -> None:
    """Format 2: the body is the event's own fields, byte for byte as stored (JSON text in the
    document); the envelope is in the properties, as it was, and `outboxFormat` says so."""
    data = case["stored"]["data"]
    own = {k: v for k, v in data.items() if k not in ENVELOPE}
    event = Contact.parse_event(data)
    document = aggregate_event_document(
        event, source=Contact.source(), ttl_seconds=case["stored"]["ttl"]
    )
    assert document["body"] == json.dumps(own, separators=(",", ":"), ensure_ascii=False)
    assert (document["id"], document["aggregateId"], document["version"], document["action"]) == (
        data["id"],
        data["contactId"],
        data["version"],
        data["action"],
    )
    expected = pinned(case)
    assert relayed(document) == expected | {
        "body": document["body"],
        "application_properties": expected["application_properties"] | {"outboxFormat": 2},
    }


def servicebus_message(stored: dict[str, Any], **kwargs: Any) -> ServiceBusMessage:
    [item] = read_feed([stored], legacy=LEGACY_EVENTS)
    assert isinstance(item, OutboxRecord)
    return to_servicebus_message(to_message(item), **kwargs)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["stored"]["data"]["action"])
def test_the_service_bus_message_carries_the_pinned_fields_and_the_cloudevent(
    case: dict[str, Any],
) -> None:
    message = servicebus_message(case["stored"])
    expected = pinned(case)
    assert str(message) == expected["body"]
    assert message.message_id == expected["message_id"]
    assert message.session_id == expected["session_id"]
    assert message.subject == expected["subject"]
    assert message.content_type == expected["content_type"]
    assert message.application_properties == (
        expected["application_properties"] | case["cloudevents"]
    )


def as_amqp(message: ServiceBusMessage) -> AMQPMessage:
    """The bare AMQP message as the CloudEvents AMQP binding sees it."""
    raw = message.raw_amqp_message
    assert raw.properties is not None and raw.application_properties is not None
    return AMQPMessage(
        properties={"content-type": raw.properties.content_type},
        application_properties={
            (k.decode() if isinstance(k, bytes) else k): v
            for k, v in raw.application_properties.items()
        },
        application_data=b"".join(raw.body),
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["stored"]["data"]["action"])
def test_the_official_sdk_reads_the_message_as_the_same_event(case: dict[str, Any]) -> None:
    event = from_binary(as_amqp(servicebus_message(case["stored"])), JSONFormat())
    data = case["stored"]["data"]
    assert event.get_specversion() == "1.0"
    assert event.get_id() == data["id"]
    assert event.get_source() == "/contacts"
    assert event.get_type() == data["action"]
    assert event.get_subject() == data["contactId"]
    assert event.get_time() == datetime.fromisoformat(data["createdAt"])
    assert event.get_datacontenttype() == "application/json"
    assert event.get_dataschema() is None
    assert event.get_data() == data


def test_the_source_is_the_configured_base_and_the_stored_path_and_a_dataschema_is_carried() -> (
    None
):
    stored = CASES[1]["stored"] | {
        "dataschema": "https://example.com/schemas/contact-v1.json",
        "source": "/people",
    }
    message = servicebus_message(stored, base="https://crm.example.com")
    event = from_binary(as_amqp(message), JSONFormat())
    assert event.get_source() == "https://crm.example.com/people"
    assert event.get_dataschema() == "https://example.com/schemas/contact-v1.json"


def test_an_event_without_a_readable_creation_time_has_no_time_attribute() -> None:
    stored = json.loads(json.dumps(CASES[1]["stored"]))
    stored["data"]["createdAt"] = "yesterday"
    properties = servicebus_message(stored).application_properties
    assert properties is not None
    assert "cloudEvents_time" not in properties and "cloudEvents_id" in properties
