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
from cosmos_outbox.settings import LegacyEvents
from cosmos_outbox.testing import InMemoryStore

#: How the Contacts app (the library's first user) reads the events it stored before event
#: documents named their aggregate type and source: the pinned cases' first three documents are
#: such events.
LEGACY_EVENTS = LegacyEvents(aggregate_type="contact", source="/contacts")

#: The relay's telemetry (the global providers: a no-op unless a test installs an SDK).
TELEMETRY = RelayTelemetry(destination="test-events")

FIXTURE = Path(__file__).parent / "fixtures" / "wire_bytes.json"


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
    # The pinned events are as stored before documents named their aggregate: read as the
    # legacy events' (LEGACY_EVENTS), as the Contacts app reads them.
    pinned = [c["documents"][0] for c in _cases() if c["name"].startswith("pinned-")][:3]
    assert len(pinned) == 3
    assert all("aggregateType" not in d and "source" not in d for d in pinned)

