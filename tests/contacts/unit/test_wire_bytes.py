"""The AMQP bytes the relay hands to the Service Bus link, pinned byte for byte.

tests/contacts/fixtures/wire_bytes.json was written once by this module's `write_fixture()`
before the relay's per-event path was made cheaper: for each case, the stored documents relayed
together, the CloudEvents source base, and the encoded payload of every
`ServiceBusMessageBatch` the relay filled (the batch envelope and each message in it, as
`sender.send_messages` transfers it). The relay runs here as in production: documents parsed by
`read_feed` (as the Contacts app reads them: `LEGACY_EVENTS`), messages added by
`cosmos_outbox.servicebus._messages.ServiceBusBatch` to a real
`ServiceBusMessageBatch`; only the send is replaced. Never rewrite the fixture to make this test
pass: a difference is a change of the wire format.

The cases: the three events of tests/contacts/fixtures/wire_format.json (stored before the envelope
named its aggregate) alone and together; one as stored today; with a `dataschema`, another source
path and a source base; with an unreadable creation time; a quarantine notice; an event of a second
aggregate type (tests/contacts/tickets.py).

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

from cosmos_outbox._aio import run_sync
from cosmos_outbox._documents import read_feed
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._relay.relay import Relay
from cosmos_outbox._relay.telemetry import RelayTelemetry
from cosmos_outbox.ports import MessageBatch, MessagePublisher
from cosmos_outbox.servicebus._messages import ServiceBusBatch
from cosmos_outbox.testing import InMemoryStore
from entrypoints.bootstrap import LEGACY_EVENTS

#: The relay's telemetry (the global providers: a no-op unless a test installs an SDK).
TELEMETRY = RelayTelemetry(destination="test-events")

FIXTURE = Path(__file__).parents[1] / "fixtures" / "wire_bytes.json"
PINNED = Path(__file__).parents[1] / "fixtures" / "wire_format.json"


class CapturingPublisher(MessagePublisher):
    """Real SDK batches, kept instead of sent."""

    def __init__(self, *, base: str) -> None:
        self.base = base
        self.sent: list[ServiceBusMessageBatch] = []

    def create_batch(self) -> MessageBatch:
        return ServiceBusBatch(ServiceBusMessageBatch(max_size_in_bytes=256 * 1024),
                               base=self.base)

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
    if not FIXTURE.exists():
        return []
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
    assert {"pinned-0", "pinned-1", "pinned-2", "pinned-together", "stored-today",
            "dataschema-and-base", "unreadable-time", "quarantine-notice",
            "second-aggregate"} <= names


def write_fixture() -> None:  # pragma: no cover - run once, by hand, at the commit named above
    from cosmos_outbox._documents import event_document
    from domain.contact import Contact

    pinned: list[dict[str, Any]] = [c["stored"] for c in json.loads(PINNED.read_text("utf-8"))]
    today = event_document(Contact.parse_event(pinned[0]["data"]), source=Contact.source(),
                           ttl_seconds=pinned[0]["ttl"])
    unreadable_time = json.loads(json.dumps(pinned[1]))
    unreadable_time["data"]["createdAt"] = "yesterday"
    poison = json.loads(json.dumps(pinned[2]))
    poison["data"]["version"] = "three"
    ticket = {
        "id": "6a1d0c7e-3f2b-4e59-8c1a-9b0d2e4f6a03",
        "partitionKey": "1f7e2d3c-4b5a-4c69-8d7e-0a1b2c3d4e5f",
        "type": "domainEvent", "aggregateType": "ticket", "source": "/tickets",
        "data": {"id": "6a1d0c7e-3f2b-4e59-8c1a-9b0d2e4f6a03",
                 "ticketId": "1f7e2d3c-4b5a-4c69-8d7e-0a1b2c3d4e5f", "version": 1,
                 "createdAt": "2026-11-20T08:00:00.000001+00:00",
                 "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                 "action": "TicketOpenedEvent", "title": "Printer on fire"},
        "ttl": 60,
    }
    inputs: list[tuple[str, list[dict[str, Any]], str]] = [
        *((f"pinned-{i}", [doc], "") for i, doc in enumerate(pinned)),
        ("pinned-together", list(reversed(pinned)), ""),
        ("stored-today", [today], ""),
        ("dataschema-and-base",
         [pinned[1] | {"dataschema": "https://example.com/schemas/contact-v1.json",
                       "source": "/people"}], "https://crm.example.com"),
        ("unreadable-time", [unreadable_time], ""),
        ("quarantine-notice", [pinned[0], poison, pinned[1]], ""),
        ("second-aggregate", [ticket], ""),
    ]
    cases = []
    for name, documents, base in inputs:
        batches = relayed_batches(documents, base=base)
        cases.append({"name": name, "base": base, "documents": documents, "batches": [
            {"batch": batch_payload(b).hex(), "messages": [m.hex() for m in message_payloads(b)]}
            for b in batches]})
    FIXTURE.write_text(json.dumps(cases, indent=2, ensure_ascii=False) + "\n", "utf-8")


if __name__ == "__main__":  # pragma: no cover
    write_fixture()
