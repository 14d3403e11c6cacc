"""The subscriber reads what the relay writes: every pinned wire-format message, as sent by
the contacts app's publisher, reads through the CloudEvents SDK as the same contact event."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox.documents import aggregate_event_document, read_feed
from cosmos_outbox.relay import OutboxRecord, to_message
from cosmos_outbox.servicebus import to_servicebus_message
from cosmos_outbox.subscriber import UnreadableEventError, from_message
from domain.contact import Contact
from entrypoints.bootstrap import LEGACY_EVENTS

from contacts_projection.bootstrap import CONTACT  # isort: skip

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "contacts" / "fixtures" / "wire_format.json").read_text("utf-8")
)


def sent(stored: dict[str, Any]) -> tuple[bytes, str | None, dict[Any, Any]]:
    # as the contacts app's relay reads its stored events (those pinned predate the documents'
    # aggregateType and source: its legacy events)
    [item] = read_feed([stored], legacy=LEGACY_EVENTS)
    assert isinstance(item, OutboxRecord)
    message = to_servicebus_message(to_message(item))
    return str(message).encode(), message.content_type, dict(message.application_properties or {})


#: The envelope's names in a format 1 event's data (and `contactId`).
ENVELOPE = {"id", "contactId", "version", "createdAt", "traceparent", "action"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["stored"]["data"]["action"])
@pytest.mark.parametrize("stored_format", [1, 2])
def test_a_relayed_message_reads_as_its_contact_event(
    case: dict[str, Any], stored_format: int
) -> None:
    """Pinned events of format 1 (the envelope in the body) and the same events stored today
    (format 2: the body the event's own fields, the envelope in the properties) read alike."""
    data = case["stored"]["data"]
    stored = (
        case["stored"]
        if stored_format == 1
        else aggregate_event_document(
            Contact.parse_event(data), source=Contact.source(), ttl_seconds=60
        )
    )
    body, content_type, props = sent(stored)
    event = from_message(body, content_type=content_type, application_properties=props)
    assert (event.event_id, event.aggregate_id, event.type, event.version) == (
        data["id"],
        data["contactId"],
        data["action"],
        data["version"],
    )
    assert event.data == {k: v for k, v in data.items() if k not in ENVELOPE}
    assert event.source == "/contacts" and event.traceparent == data["traceparent"]
    assert event.time == datetime.fromisoformat(data["createdAt"])
    assert Contact.parse_event(event.envelope_and_data()) == Contact.parse_event(data)


def test_a_message_without_cloudevents_attributes_is_unreadable() -> None:
    body, content_type, props = sent(CASES[0]["stored"])
    plain = {k: v for k, v in props.items() if not str(k).startswith("cloudEvents_")}
    with pytest.raises(UnreadableEventError):
        from_message(body, content_type=content_type, application_properties=plain)


def test_a_subject_that_is_not_the_contact_of_the_data_is_unreadable() -> None:
    body, content_type, props = sent(CASES[0]["stored"])
    props["cloudEvents_subject"] = "someone-else"
    with pytest.raises(UnreadableEventError, match="subject"):
        from_message(body, content_type=content_type, application_properties=props)


def test_an_event_of_another_aggregate_type_reads_with_its_type() -> None:
    from tests.contacts.tickets import ticket_history

    [stored] = ticket_history(0)
    body, content_type, props = sent(stored)
    event = from_message(body, content_type=content_type, application_properties=props)
    assert (event.aggregate_type, event.aggregate_id, event.source) == (
        "ticket",
        stored["partitionKey"],
        "/tickets",
    )


def test_a_message_from_before_the_aggregate_type_property_reads_as_a_contact_event() -> None:
    body, content_type, props = sent(CASES[0]["stored"])
    del props["aggregateType"]
    assert (
        from_message(
            body,
            content_type=content_type,
            application_properties=props,
            default_aggregate_type=CONTACT,
        ).aggregate_type
        == "contact"
    )
    with pytest.raises(UnreadableEventError, match="aggregateType"):
        from_message(body, content_type=content_type, application_properties=props)
