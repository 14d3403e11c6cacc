"""The relay with the real Service Bus publisher (azure-servicebus SDK) against the local
endpoint: real size-limited batches, the SDK's size check quarantining an oversized event, and
a fresh link after the broker comes back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from azure.storage.blob import BlobServiceClient
from cloudevents.core.bindings.amqp import AMQPMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from cosmos_outbox._aio import run_sync
from cosmos_outbox._documents import event_documents, read_feed
from cosmos_outbox._quarantine import QUARANTINE_TYPE, Quarantine
from cosmos_outbox._relay.relay import Relay, RelayReport
from cosmos_outbox._relay.telemetry import RelayTelemetry
from cosmos_outbox.blob import BlobPayloadStore
from cosmos_outbox.servicebus import ServiceBusPublisher
from cosmos_outbox.testing import InMemoryStore
from domain.contact import Contact
from domain.values import Company, Name
from funcstack.servicebus import ServiceBusEndpoint, start_servicebus
from funcstack.services import LocalServices
from tools.receive import count_at_least, drain
from tools.stack import SERVICEBUS_CONFIG

#: The relay's telemetry (the global providers: a no-op unless a test installs an SDK).
TELEMETRY = RelayTelemetry(destination="test-events")

pytestmark = pytest.mark.integration


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[ServiceBusEndpoint]:
    sb = start_servicebus(config=SERVICEBUS_CONFIG, log_path=tmp_path / "sb.log")
    try:
        yield sb
    finally:
        sb.stop()


def publisher_for(endpoint: ServiceBusEndpoint, **options: Any) -> ServiceBusPublisher:
    """The publisher of the topic the local stack has (`options`: `max_message_bytes`,
    `cloudevents_source_base`; the settings' defaults otherwise)."""
    return ServiceBusPublisher.from_connection_string(endpoint.connection_string,
                                                      "contact-events", **options)


class Relaying:
    """The relay as the trigger runs it: stored documents parsed at the boundary, then relayed
    (the sync API's way: over sync adapters, run to its end in this thread); its quarantine in
    an in-memory store (`store`)."""

    def __init__(self, publisher: ServiceBusPublisher, *,
                 payloads: BlobPayloadStore | None = None) -> None:
        self.store = InMemoryStore()
        self._relay = Relay(publisher, Quarantine(self.store), TELEMETRY, payloads=payloads)

    def relay(self, documents: list[dict[str, Any]]) -> RelayReport:
        return run_sync(self._relay.relay(read_feed(documents)))


def events(contacts: int, changes: int, size: int = 400) -> list[dict[str, Any]]:
    docs = []
    for i in range(contacts):
        contact = Contact.create(name=Name(first_name=f"S{i}", last_name="B"),
                                 email=f"s{i}@example.com", company=Company(company_name="C"))
        for u in range(changes):
            contact.describe(f"{u}:" + "x" * size)
        docs += event_documents(contact, ttl_seconds=60)
    return docs


def test_a_backlog_larger_than_one_batch_is_split_and_all_arrive(
    endpoint: ServiceBusEndpoint,
) -> None:
    publisher = publisher_for(endpoint)
    docs = events(contacts=20, changes=29)  # 600 events of ~0.6 KB: more than 256 KB
    try:
        report = Relaying(publisher).relay(docs)
    finally:
        publisher.close()
    assert report.sent == 600 and report.batches >= 2
    received = drain(endpoint.connection_string, until=count_at_least(600), timeout=60)
    assert {r.message_id for r in received} == {d["id"] for d in docs}


def test_an_event_over_the_message_size_limit_is_quarantined_by_the_sdk_check(
    endpoint: ServiceBusEndpoint,
) -> None:
    publisher = publisher_for(endpoint)
    docs = events(contacts=1, changes=2)
    docs[1]["data"]["description"] = "x" * 300_000
    relaying = Relaying(publisher)
    try:
        report = relaying.relay(docs)
    finally:
        publisher.close()
    assert report.sent == 2 and report.quarantined == [docs[1]["id"]]
    [record] = relaying.store.of_type(QUARANTINE_TYPE)
    assert "larger than" in record["reason"]


def test_after_the_broker_restarts_the_next_attempt_uses_a_fresh_link(tmp_path: Path) -> None:
    sb = start_servicebus(config=SERVICEBUS_CONFIG, log_path=tmp_path / "sb.log")
    publisher = publisher_for(sb)
    relay = Relaying(publisher)
    try:
        relay.relay(events(contacts=1, changes=0))
        port = sb.port
        sb.stop()
        with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises, it must raise
            relay.relay(events(contacts=1, changes=0))
        sb = start_servicebus(port=port, config=SERVICEBUS_CONFIG, log_path=tmp_path / "sb2.log")
        later = events(contacts=2, changes=1)
        assert relay.relay(later).sent == 4
        received = drain(sb.connection_string, until=count_at_least(4), timeout=30)
        assert {r.message_id for r in received} == {d["id"] for d in later}
    finally:
        publisher.close()
        sb.stop()


def test_a_received_message_reads_through_the_cloudevents_sdk_as_the_same_event(
    endpoint: ServiceBusEndpoint,
) -> None:
    publisher = publisher_for(endpoint,
                              cloudevents_source_base="https://contacts.example.com/api")
    [doc] = events(contacts=1, changes=0)
    try:
        assert Relaying(publisher).relay([doc]).sent == 1
    finally:
        publisher.close()
    with (
        ServiceBusClient.from_connection_string(endpoint.connection_string) as client,
        client.get_subscription_receiver(
            "contact-events", "all-events", session_id=doc["partitionKey"], max_wait_time=10,
        ) as receiver,
    ):
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=10)
        receiver.complete_message(message)
    amqp = AMQPMessage(
        properties={"content-type": message.content_type},
        application_properties={
            (k.decode() if isinstance(k, bytes) else k): v.decode() if isinstance(v, bytes) else v
            for k, v in (message.application_properties or {}).items()
        },
        application_data=b"".join(message.body),
    )
    event = from_binary(amqp, JSONFormat())
    data = doc["data"]
    assert (event.get_id(), event.get_type(), event.get_subject()) == (
        data["id"], data["action"], data["contactId"])
    assert event.get_source() == "https://contacts.example.com/api/contacts"
    assert event.get_specversion() == "1.0"
    assert event.get_time() == datetime.fromisoformat(data["createdAt"])
    assert event.get_data() == data
    # What was there before stays.
    assert message.application_properties is not None
    assert message.application_properties[b"version"] == 1
    assert message.message_id == data["id"] and message.session_id == data["contactId"]


def test_leases_relaying_at_once_through_one_publisher_each_deliver_every_event(
    endpoint: ServiceBusEndpoint,
) -> None:
    """The worker runs one invocation per lease, concurrently, on threads of its own, all with
    the process's one publisher: each thread sends on a link of its own (the SDK's senders are
    not thread-safe), so every event arrives and no send fails."""
    publisher = publisher_for(endpoint)
    leases = [events(contacts=10, changes=9, size=50) for _ in range(4)]  # 4 x 100 events
    start = threading.Barrier(len(leases))
    errors: list[BaseException] = []

    def lease(docs: list[dict[str, Any]]) -> None:
        relay = Relaying(publisher)
        start.wait()
        try:
            for i in range(0, len(docs), 10):  # invocations of 10 events: many sends at once
                relay.relay(docs[i:i + 10])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=lease, args=(docs,)) for docs in leases]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        publisher.close()
    assert errors == []
    received = drain(endpoint.connection_string, until=count_at_least(400), timeout=60)
    assert sorted(r.message_id for r in received) == sorted(d["id"] for docs in leases
                                                            for d in docs)


@pytest.fixture
def azurite(tmp_path: Path) -> Iterator[BlobPayloadStore]:
    services = LocalServices(workdir=tmp_path / "azurite")
    try:
        running = services.run_azurite()
        with BlobServiceClient.from_connection_string(running.connection_string) as service:
            service.create_container("outbox-payloads")
        yield BlobPayloadStore.from_connection_string(running.connection_string,
                                                      "outbox-payloads")
    finally:
        services.stop()


@pytest.mark.parametrize(("cap", "offloaded"), [(None, True), (300_000, True),
                                                  (1024 * 1024, False)])
def test_a_message_over_the_topic_or_the_set_limit_goes_by_claim_check_through_the_sdks(
    tmp_path: Path, azurite: BlobPayloadStore, cap: int | None, offloaded: bool,
) -> None:
    """On a namespace taking 1 MB messages, a 300 KB event is offloaded under the default
    SERVICEBUS_MAX_MESSAGE_BYTES (256 KB) and a 301 KB cap, sent whole under a 1 MB one; on
    the wire a claim check is the same message with an empty body and `cloudEvents_dataref`,
    which the official CloudEvents SDK reads as an event whose data is at that reference."""
    sb = start_servicebus(config=SERVICEBUS_CONFIG, log_path=tmp_path / "sb.log",
                          max_message_size=1024 * 1024)
    publisher = publisher_for(sb, **({} if cap is None else {"max_message_bytes": cap}))
    docs = events(contacts=1, changes=2)
    docs[1]["data"]["description"] = "x" * 300_000
    try:
        report = Relaying(publisher, payloads=azurite).relay(docs)
        assert (report.sent, report.offloaded, report.quarantined) == (3, int(offloaded), [])
        received = drain(sb.connection_string, until=count_at_least(3), timeout=30,
                         payloads=azurite.get)
    finally:
        publisher.close()
        sb.stop()
    assert [r.version for r in received] == [1, 2, 3]
    assert [r.body for r in received] == [d["data"] for d in docs]  # whole, fetched or not
    big = received[1]
    assert big.content_type == "application/json"
    if not offloaded:
        assert big.dataref is None and big.raw_size > 300_000
        return
    assert big.raw_size == 0
    assert big.dataref == azurite.reference(f"contact/{docs[1]['partitionKey']}/{docs[1]['id']}")
    event = from_binary(AMQPMessage(properties={"content-type": big.content_type},
                                    application_properties=big.properties,
                                    application_data=b""), JSONFormat())
    assert event.get_data() is None
    assert event.get_attributes()["dataref"] == big.dataref
    assert (event.get_id(), event.get_attributes()["datacontenttype"]) == (
        docs[1]["id"], "application/json")
