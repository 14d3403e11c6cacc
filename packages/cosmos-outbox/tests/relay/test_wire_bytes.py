"""The AMQP bytes the relay hands to the Service Bus link, pinned byte for byte.

fixtures/wire_bytes.json was written once, before the relay's per-event path was made cheaper
(by a `write_fixture()` of this module when it was a test of the Contacts app's, before it moved
here; git keeps it): for each case, the stored documents relayed together, the CloudEvents
source base, and the encoded payload of every `ServiceBusMessageBatch` the relay filled (the
batch envelope and each message in it, as `sender.send_messages` transfers it). The relay runs
here as in production: documents parsed by `read_feed` (as the Contacts app reads them:
`LEGACY_EVENTS`, its legacy events' aggregate type and source), messages added by
`cosmos_outbox.servicebus._messages.ServiceBusBatch` to a real `ServiceBusMessageBatch`; only
the send is replaced. Never rewrite the fixture to make this test pass: a difference is a
change of the wire format.

The cases, each with its input documents in the fixture: the three events the Contacts app
stored before the envelope named its aggregate (its tests/contacts/fixtures/wire_format.json)
alone and together; one as stored today; with a `dataschema`, another source path and a source
base; with an unreadable creation time; a quarantine notice; an event of a second aggregate type
(a ticket).

One deliberate change since: the quarantine notice's properties gained `outboxFormat` (2), when
event messages got format 2 (round 6); that case's bytes were written again then, and only
those. The format 2 cases are pinned the same way in fixtures/wire_bytes_format_2.json (written
once by `write_format_2_fixture`).

The SDK's encoder is read through its private modules here (tests may; product code never does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessageBatch
from azure.servicebus._pyamqp._decode import decode_payload
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import BatchMessage

from cosmos_outbox._mapper import read_feed
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._relay.forwarding import Relay
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.ports import MessageBatch, MessagePublisher
from cosmos_outbox.servicebus._messages import ServiceBusBatch
from cosmos_outbox.settings import LegacyEvents
from cosmos_outbox.telemetry import RelayTelemetry
from cosmos_outbox_testing import InMemoryStore

#: How the Contacts app (the library's first user) reads the events it stored before event
#: documents named their aggregate type and source: the pinned cases' first three documents are
#: such events.
LEGACY_EVENTS = LegacyEvents(aggregate_type="contact", source="/contacts")

#: The relay's telemetry (the global providers: a no-op unless a test installs an SDK).
TELEMETRY = RelayTelemetry(destination="test-events")

FIXTURE = Path(__file__).parents[1] / "fixtures" / "wire_bytes.json"


class CapturingPublisher(MessagePublisher):
    """Real SDK batches, kept instead of sent."""

    def __init__(self, *, base: str) -> None:
        self.base = base
        self.sent: list[ServiceBusMessageBatch] = []

    def create_batch(self) -> MessageBatch:
        return ServiceBusBatch(ServiceBusMessageBatch(max_size_in_bytes=256 * 1024), base=self.base)

    def send(self, batch: MessageBatch) -> None:
        assert isinstance(batch, ServiceBusBatch)
        self.sent.append(batch.batch)


def batch_payload(batch: ServiceBusMessageBatch) -> bytes:
    """What the sender transfers for a batch: the envelope with each message as a data section
    (the SDK's own `send_messages` path: `BatchMessage(*batch._message)`)."""
    output = bytearray()
    encode_payload(output, BatchMessage(*batch._message))
    return bytes(output)


def message_payloads(batch: ServiceBusMessageBatch) -> list[bytes]:
    """Each message of a batch as encoded inside it."""
    return [bytes(data) for data in batch._message[5]]


def relayed_batches(documents: list[dict[str, Any]], *, base: str) -> list[ServiceBusMessageBatch]:
    publisher = CapturingPublisher(base=base)
    relay = Relay(publisher, Quarantine(InMemoryStore(), legacy=LEGACY_EVENTS), TELEMETRY)
    run_sync(relay.relay(read_feed(documents, legacy=LEGACY_EVENTS)))
    return publisher.sent


def decoded(payload: bytes) -> dict[str, Any]:
    """A message's sections, readable, for a failure message worth reading."""
    message = decode_payload(memoryview(payload))
    return {name: value for name, value in message._asdict().items() if value is not None}


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(FIXTURE.read_text("utf-8"))
    return cases


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_the_relay_packs_the_same_amqp_bytes_as_before(case: dict[str, Any]) -> None:
    batches = relayed_batches(case["documents"], base=case["base"])
    assert len(batches) == len(case["batches"])
    for batch, expected in zip(batches, case["batches"], strict=True):
        messages = message_payloads(batch)
        wanted = [bytes.fromhex(m) for m in expected["messages"]]
        assert [decoded(m) for m in messages] == [decoded(m) for m in wanted]
        assert messages == wanted
        assert batch_payload(batch) == bytes.fromhex(expected["batch"])


def test_the_fixture_covers_every_case() -> None:
    names = {c["name"] for c in _cases()}
    assert {
        "pinned-0",
        "pinned-1",
        "pinned-2",
        "pinned-together",
        "stored-today",
        "dataschema-and-base",
        "unreadable-time",
        "quarantine-notice",
        "second-aggregate",
    } <= names
    # The pinned events are as stored before documents named their aggregate: read as the
    # legacy events' (LEGACY_EVENTS), as the Contacts app reads them.
    pinned = [c["documents"][0] for c in _cases() if c["name"].startswith("pinned-")][:3]
    assert len(pinned) == 3
    assert all("aggregateType" not in d and "source" not in d for d in pinned)


# -- format 2 (the body the app's data, the envelope in the properties) -------------------------

FIXTURE_2 = Path(__file__).parents[1] / "fixtures" / "wire_bytes_format_2.json"
#: The envelope's names in a format 1 event's data (and `contactId`).
_ENVELOPE_1 = ("id", "contactId", "version", "createdAt", "traceparent", "action")


def _as_format_2(document: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A pinned format 1 document as the library stores the same event today (format 2)."""
    data = document["data"]
    return {
        "id": data["id"],
        "partitionKey": document["partitionKey"],
        "type": "domainEvent",
        "aggregateType": "contact",
        "aggregateId": data["contactId"],
        "source": "/contacts",
        "action": data["action"],
        "version": data["version"],
        "createdAt": data["createdAt"],
        "traceparent": data["traceparent"],
        "body": json.dumps(
            {k: v for k, v in data.items() if k not in _ENVELOPE_1},
            separators=(",", ":"),
            ensure_ascii=False,
        ),
        "ttl": document["ttl"],
        **changes,
    }


def format_2_cases() -> list[dict[str, Any]]:
    """The format 2 cases' documents (what `write_format_2_fixture` relayed once)."""
    pinned = [c["documents"][0] for c in _cases() if c["name"].startswith("pinned-")][:3]
    today = [_as_format_2(d) for d in pinned]
    dated = _as_format_2(
        pinned[0],
        body=json.dumps(
            {
                "due": "2019-01-01T00:00:01.0000000Z",
                "at": "2019-01-01T10:00:05.120000+02:00",
                "day": "2019-01-01",
                "note": "x 2019-01-01T00:00:01Z",
            },
            separators=(",", ":"),
        ),
        createdAt="2025-03-01T12:30:45.120000+00:00",
    )
    session = _as_format_2(
        pinned[1],
        partitionKey="customer-7",
        aggregateType="customer",
        aggregateId="booking-session-1",
        source="/customers",
        subject="booking-1",
        properties=json.dumps({"channel": "web", "attempt": 2}, separators=(",", ":")),
        dataschema="https://example.com/schemas/held.json",
    )
    return [
        {"name": "format-2", "base": "", "documents": today[:1]},
        {"name": "format-2-together", "base": "", "documents": today},
        {"name": "format-2-date-like-strings", "base": "", "documents": [dated]},
        {
            "name": "format-2-session-event",
            "base": "https://shop.example.com",
            "documents": [session],
        },
    ]


def write_format_2_fixture() -> None:  # pragma: no cover - how FIXTURE_2 was written, once
    cases = []
    for case in format_2_cases():
        batches = relayed_batches(case["documents"], base=case["base"])
        cases.append(
            {
                **case,
                "batches": [
                    {
                        "messages": [m.hex() for m in message_payloads(b)],
                        "batch": batch_payload(b).hex(),
                    }
                    for b in batches
                ],
            }
        )
    FIXTURE_2.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n", "utf-8")


def _cases_2() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(FIXTURE_2.read_text("utf-8"))
    return cases


@pytest.mark.parametrize("case", _cases_2(), ids=lambda c: c["name"])
def test_format_2_packs_the_pinned_amqp_bytes(case: dict[str, Any]) -> None:
    test_the_relay_packs_the_same_amqp_bytes_as_before(case)


def test_format_2_bodies_are_the_stored_text_byte_for_byte_after_the_host_re_formats() -> None:
    """The Azure host re-formats date-like strings of trigger documents (Newtonsoft.Json): the
    body is JSON text, which it leaves alone, and the time is read by parsing it, so the bytes
    on the wire are the same as from the document as written."""
    [case] = [c for c in _cases_2() if c["name"] == "format-2-date-like-strings"]
    [document] = case["documents"]
    re_formatted = {**document, "createdAt": "2025-03-01T12:30:45.12+00:00"}
    [batch] = relayed_batches([re_formatted], base=case["base"])
    assert batch_payload(batch) == bytes.fromhex(case["batches"][0]["batch"])
    [message] = message_payloads(batch)
    assert document["body"].encode() in message
