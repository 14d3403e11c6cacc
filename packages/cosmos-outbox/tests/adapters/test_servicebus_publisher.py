"""The relay's Service Bus publishers, sync and `aio`, through the azure-servicebus SDK against
the local endpoint, in what test_azure_adapters.py does not hold: the SDK's own size check
quarantining an event too large for a message (no claim check), a fresh link after the broker
comes back, a received message read by the official CloudEvents SDK as the same event, leases
relaying at once through the one sync publisher, and the claim check on a namespace that takes
1 MB messages, by the topic's limit or the publisher's cap, whichever is smaller."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason=(
        "funcstack in this interpreter (Python 3.13+) runs these tests: "
        "they stop and start funcstack's Service Bus endpoint in-process"
    ),
)

from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import ServiceBusError
from azure_stack import (
    PAYLOADS,
    TELEMETRY,
    TOPIC,
    history,
    properties,
    received,
    received_from,
    relay_through,
    retitle,
)
from cloudevents.core.bindings.amqp import AMQPMessage, from_binary
from cloudevents.core.formats.json import JSONFormat
from deadlines import LONG, LOOPBACK

from cosmos_outbox._mapper import read_feed
from cosmos_outbox._quarantine import QUARANTINE_TYPE, Quarantine
from cosmos_outbox._relay.forwarding import Relay, RelayReport
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.blob import BlobPayloadStore
from cosmos_outbox.blob.aio import BlobPayloadStore as AsyncBlobPayloadStore
from cosmos_outbox.servicebus import ServiceBusPublisher
from cosmos_outbox.servicebus.aio import ServiceBusPublisher as AsyncServiceBusPublisher
from cosmos_outbox_testing import InMemoryStore
from cosmos_outbox_testing.contracts import EventLoop
from funcstack import LocalStack
from funcstack.servicebus import ServiceBusEndpoint, start_servicebus

pytestmark = pytest.mark.integration
FLAVOURS = pytest.mark.parametrize("flavour", ["sync", "aio"])


class Publishing:
    """A publisher of the test topic, sync or `aio` (`options`: the publisher's; `sdk`: its
    client's), and one relay over it, as the trigger runs it (its quarantine in
    `quarantine`); closed by `close()`."""

    def __init__(
        self,
        flavour: str,
        connection: str,
        loop: EventLoop,
        *,
        payloads: Any = None,
        sdk: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self.loop = loop if flavour == "aio" else None
        self.quarantine = InMemoryStore()
        if self.loop is None:
            self.publisher: Any = ServiceBusPublisher(
                lambda: ServiceBusClient.from_connection_string(connection, **(sdk or {})),
                TOPIC,
                **options,
            )
        else:

            async def make() -> AsyncServiceBusPublisher:
                return AsyncServiceBusPublisher(
                    AsyncServiceBusClient.from_connection_string(connection, **(sdk or {})),
                    TOPIC,
                    **options,
                )

            self.publisher = self.loop.run(make())
        self._relay = Relay(
            self.publisher, Quarantine(self.quarantine), TELEMETRY, payloads=payloads
        )

    def sender(self) -> object:
        """The SDK sender the last invocation sent on (of this thread, sync; of the link the
        `aio` publisher keeps for the next invocation)."""
        if self.loop is None:
            return self.publisher._local.link[1].sender
        # The invocation's task gives its link back in a done callback, queued on the loop with
        # the one that hands this thread the result: this thread may read before it has run. A
        # round trip through the loop runs what was queued before it.
        self.loop.run(asyncio.sleep(0))
        [link] = self.publisher._idle
        return link.sender

    def relay(self, documents: list[dict[str, Any]]) -> RelayReport:
        work = self._relay.relay(read_feed(documents))
        report: RelayReport = self.loop.run(work) if self.loop is not None else run_sync(work)
        return report

    def close(self) -> None:
        if self.loop is None:
            self.publisher.close()
        else:
            self.loop.run(self.publisher.close())


@pytest.fixture
def publishing(
    request: pytest.FixtureRequest, funcstack_services: LocalStack, loop: EventLoop
) -> Iterator[Publishing]:
    """The test's publisher (its `flavour` parameter), on the stack's topic."""
    publishing = Publishing(
        request.getfixturevalue("flavour"), funcstack_services.servicebus_connection_string, loop
    )
    try:
        yield publishing
    finally:
        publishing.close()


@FLAVOURS
def test_an_event_over_the_message_size_limit_is_quarantined_by_the_sdk_check(
    publishing: Publishing, flavour: str
) -> None:
    """Without a claim check, the event the SDK refuses to add to a batch is set aside with
    the reason, and the ones after it go."""
    documents = history(tickets=1, changes=2)
    retitle(documents[1], "x" * 300_000)  # over the topic's 256 KB
    report = publishing.relay(documents)
    assert report.sent == 2 and report.quarantined == [documents[1]["id"]]
    [record] = publishing.quarantine.of_type(QUARANTINE_TYPE)
    assert "larger than" in record["reason"]


@FLAVOURS
def test_after_the_broker_restarts_the_next_attempt_uses_a_fresh_link(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    """A send on a link the broker dropped fails (the trigger retries the invocation); the
    publisher does not reuse that link: the retried invocation's events go on a new one. (The
    SDK's own retries are off: the failure comes at once, not after 12 s of back-off.)"""
    publishing = Publishing(
        flavour, funcstack_services.servicebus_connection_string, loop, sdk={"retry_total": 0}
    )
    try:
        assert publishing.relay(history(tickets=1, changes=0)).sent == 1
        first = publishing.sender()
        funcstack_services.stop_servicebus()
        try:
            with pytest.raises(ServiceBusError):
                publishing.relay(history(tickets=1, changes=0))
        finally:
            funcstack_services.start_servicebus()  # on its port, with its entities
        later = history(tickets=2, changes=1)
        assert publishing.relay(later).sent == 4
        assert publishing.sender() is not first
    finally:
        publishing.close()
    messages = received(funcstack_services, {d["partitionKey"] for d in later}, 4)
    assert sorted(str(m.message_id) for m in messages) == sorted(d["id"] for d in later)


@FLAVOURS
def test_a_received_message_reads_through_the_cloudevents_sdk_as_the_same_event(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    publishing = Publishing(
        flavour,
        funcstack_services.servicebus_connection_string,
        loop,
        cloudevents_source_base="https://tickets.example.com/api",
    )
    [document] = history(tickets=1, changes=0)
    try:
        assert publishing.relay([document]).sent == 1
    finally:
        publishing.close()
    [message] = received(funcstack_services, {document["partitionKey"]}, 1)
    event = from_binary(amqp_message(message), JSONFormat())
    assert (event.get_id(), event.get_type(), event.get_subject()) == (
        document["id"],
        document["action"],
        document["aggregateId"],
    )
    assert event.get_source() == "https://tickets.example.com/api/tickets"
    assert event.get_specversion() == "1.0"
    assert event.get_time() == datetime.fromisoformat(document["createdAt"])
    assert event.get_data() == json.loads(document["body"])  # what the app published
    # What was there before the CloudEvents attributes stays.
    assert properties(message)["version"] == 1
    assert message.message_id == document["id"]
    assert message.session_id == document["aggregateId"]


def amqp_message(message: ServiceBusReceivedMessage) -> AMQPMessage:
    """A received message as the CloudEvents SDK's AMQP binding reads it."""
    return AMQPMessage(
        properties={"content-type": message.content_type},
        application_properties=properties(message),
        application_data=b"".join(message.body),
    )


def test_leases_relaying_at_once_through_the_one_sync_publisher_deliver_every_event(
    funcstack_services: LocalStack,
) -> None:
    """The sync API's worker runs one invocation per lease, concurrently, on threads of its
    own, all with the process's one publisher: each thread sends on a link of its own (the
    SDK's senders are not thread-safe), so every event arrives and no send fails. (The `aio`
    publisher's concurrent invocations: test_azure_adapters.py.)"""
    publisher = ServiceBusPublisher.from_connection_string(
        funcstack_services.servicebus_connection_string, TOPIC
    )
    leases = [history(tickets=2, changes=49, title_size=50) for _ in range(4)]  # 4 x 100 events
    start = threading.Barrier(len(leases))
    errors: list[BaseException] = []

    def lease(documents: list[dict[str, Any]]) -> None:
        start.wait(LOOPBACK)  # every thread started
        try:
            for i in range(0, len(documents), 10):  # invocations of 10 events: many sends
                relay_through(publisher, documents[i : i + 10], None)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=lease, args=(documents,)) for documents in leases]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(LONG)  # 10 invocations of 10 sends each
        assert not any(thread.is_alive() for thread in threads), f"sends not done in {LONG:g} s"
    finally:
        publisher.close()
    assert errors == []
    sent = [d for documents in leases for d in documents]
    messages = received(funcstack_services, {d["partitionKey"] for d in sent}, len(sent))
    assert sorted(str(m.message_id) for m in messages) == sorted(d["id"] for d in sent)


# -- the claim check on a namespace that takes 1 MB messages -----------------------------------


@pytest.fixture(scope="module")
def premium(
    funcstack_services: LocalStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceBusEndpoint]:
    """A second Service Bus endpoint with the test topic, taking messages of 1 MB (as a
    Premium namespace can)."""
    assert funcstack_services.config is not None
    endpoint = start_servicebus(
        config=funcstack_services.config.servicebus_file,
        log_path=tmp_path_factory.mktemp("premium") / "sb.log",
        max_message_size=1024 * 1024,
    )
    try:
        yield endpoint
    finally:
        endpoint.stop()


#: The publisher's cap (SERVICEBUS_MAX_MESSAGE_BYTES; None: its 256 KB default) and whether a
#: 300 KB event goes by claim check under it, on a topic taking 1 MB.
CAPS: list[tuple[int | None, bool]] = [(None, True), (300_000, True), (1024 * 1024, False)]


@FLAVOURS
def test_a_message_over_the_topic_or_the_set_limit_goes_by_claim_check_through_the_sdks(
    funcstack_services: LocalStack, premium: ServiceBusEndpoint, loop: EventLoop, flavour: str
) -> None:
    """On a namespace taking 1 MB messages, a 300 KB event is offloaded under the default cap
    (256 KB) and a 300 000-byte one, sent whole under a 1 MB one; on the wire a claim check is
    the same message with an empty body and `cloudEvents_dataref`, which the official
    CloudEvents SDK reads as an event whose data is at that reference."""
    storage = funcstack_services.storage_connection_string
    reader = BlobPayloadStore.from_connection_string(storage, PAYLOADS)
    if flavour == "sync":
        payloads: Any = reader
    else:

        async def connect() -> AsyncBlobPayloadStore:
            return AsyncBlobPayloadStore.from_connection_string(storage, PAYLOADS)

        payloads = loop.run(connect())
    relayed: list[tuple[list[dict[str, Any]], bool]] = []
    for cap, offloaded in CAPS:
        options: dict[str, Any] = {} if cap is None else {"max_message_bytes": cap}
        publishing = Publishing(
            flavour, premium.connection_string, loop, payloads=payloads, **options
        )
        documents = history(tickets=1, changes=2)
        retitle(documents[1], "x" * 300_000)
        try:
            report = publishing.relay(documents)
        finally:
            publishing.close()
        assert (report.sent, report.offloaded, report.quarantined) == (3, int(offloaded), [])
        relayed.append((documents, offloaded))
    messages = received_from(
        premium.connection_string,
        {documents[0]["partitionKey"] for documents, _ in relayed},
        3 * len(relayed),
    )
    for documents, offloaded in relayed:
        session = [m for m in messages if m.session_id == documents[0]["partitionKey"]]
        assert [properties(m)["version"] for m in session] == [1, 2, 3]
        big = session[1]
        body = b"".join(big.body)
        dataref = properties(big).get("cloudEvents_dataref")
        assert big.content_type == "application/json"
        assert [m.message_id for m in session] == [d["id"] for d in documents]
        if not offloaded:
            assert dataref is None and len(body) > 300_000
            assert body == documents[1]["body"].encode()  # whole
            continue
        assert body == b""
        assert dataref == reader.reference(
            f"ticket/{documents[1]['partitionKey']}/{documents[1]['id']}"
        )
        assert reader.get(dataref) == documents[1]["body"].encode()  # whole, fetched
        event = from_binary(amqp_message(big), JSONFormat())
        assert event.get_data() is None
        assert event.get_attributes()["dataref"] == dataref
        assert (event.get_id(), event.get_attributes()["datacontenttype"]) == (
            documents[1]["id"],
            "application/json",
        )
