"""The library's own adapters, sync and `aio`, through the unmodified Azure SDKs against the local
Azure stack (funcstack's pytest plugin: Cosmos DB, Service Bus and Azurite on free ports, the
resources of fixtures/funcstack.json): each held to the same contract suites as the in-memory
fakes (unit of work, Idempotency-Key, quarantine, session; payload store), and the relay's
publisher sending real batches that a receiver reads back, in order, with their ids."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("funcstack", reason="the local Azure stack (funcstack) runs these tests: "
                                        "pip install funcstack")

from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage
from azure.storage.blob import ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.blob.aio import ContainerClient as AsyncContainerClient
from tickets import TICKET, Ticket

from cosmos_outbox._aio import run_sync
from cosmos_outbox._documents import event_documents, read_feed
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._relay.relay import Relay
from cosmos_outbox._relay.telemetry import RelayTelemetry
from cosmos_outbox.blob import AsyncBlobPayloadStore, BlobPayloadStore
from cosmos_outbox.cosmos import AsyncCosmosDocumentStore, CosmosDocumentStore
from cosmos_outbox.servicebus import AsyncServiceBusPublisher, ServiceBusPublisher
from cosmos_outbox.testing import InMemoryStore
from cosmos_outbox.testing.contracts import (
    EventLoop,
    IdempotencyContract,
    PayloadStoreContract,
    PayloadWorld,
    QuarantineContract,
    SessionContract,
    StoreWorld,
    UnitOfWorkContract,
    examples,
)
from funcstack import LocalStack

pytestmark = pytest.mark.integration
DATABASE, CONTAINER, TOPIC = "outbox-tests", "outbox", "outbox-events"
TELEMETRY = RelayTelemetry(destination=TOPIC)


@pytest.fixture(scope="session")
def funcstack_config() -> Path:
    return Path(__file__).parent / "fixtures" / "funcstack.json"


@pytest.fixture(scope="module")
def container(funcstack_services: LocalStack) -> ContainerProxy:
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    return funcstack_services.container_client(DATABASE, CONTAINER)


@pytest.fixture
def fresh(funcstack_services: LocalStack) -> Iterator[str]:
    """A container of its own for one test (as the outbox's: /partitionKey, per-item TTL on),
    deleted after it: the suites count what a store holds."""
    name = f"outbox-{uuid.uuid4().hex[:12]}"
    client = CosmosClient.from_connection_string(funcstack_services.cosmos_connection_string,
                                                 connection_verify=False)
    created = client.get_database_client(DATABASE).create_container(
        id=name, partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1)
    try:
        yield name
    finally:
        client.get_database_client(DATABASE).delete_container(created)


@pytest.fixture(scope="module")
def loop() -> Iterator[EventLoop]:
    running = EventLoop()
    try:
        yield running
    finally:
        running.close()


# -- Cosmos DB ---------------------------------------------------------------------------------

class CosmosWorld(StoreWorld):
    """The outbox's container through the SDK's sync client."""

    def __init__(self, container: ContainerProxy) -> None:
        self.container = container
        self.store = CosmosDocumentStore(container)

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return list(self.container.query_items("SELECT * FROM c", partition_key=partition_key))

    def expire(self, partition_key: str, document_id: str) -> None:
        """The store's own TTL, shortened to 1 s: wait until it has deleted the document."""
        document = self.container.read_item(document_id, partition_key=partition_key)
        self.container.replace_item(document_id, {
            k: v for k, v in document.items() if not k.startswith("_")} | {"ttl": 1})
        deadline = time.monotonic() + 30
        while any(d["id"] == document_id for d in self.documents(partition_key)):
            assert time.monotonic() < deadline, f"{document_id} did not expire"
            time.sleep(0.25)


class AsyncCosmosWorld(CosmosWorld):
    """The same container through the SDK's `aio` client, on an event loop of its own (the
    sync client only arranges and inspects)."""

    asynchronous = True

    def __init__(self, container: ContainerProxy, stack: LocalStack, loop: EventLoop) -> None:
        super().__init__(container)
        self.loop = loop
        name = container.id

        async def connect() -> AsyncCosmosDocumentStore:
            client = AsyncCosmosClient.from_connection_string(
                stack.cosmos_connection_string, connection_verify=False)
            return AsyncCosmosDocumentStore(
                client.get_database_client(DATABASE).get_container_client(name))

        self.store = loop.run(connect())

    def run(self, coroutine: Any) -> Any:
        return self.loop.run(coroutine)


class OnCosmos:
    """The suites' world: the container through the sync client, then through the aio one."""

    @pytest.fixture(params=["sync", "aio"])
    def world(self, request: pytest.FixtureRequest, fresh: str,
              funcstack_services: LocalStack, loop: EventLoop) -> StoreWorld:
        container = funcstack_services.container_client(DATABASE, fresh)
        if request.param == "sync":
            return CosmosWorld(container)
        return AsyncCosmosWorld(container, funcstack_services, loop)


class TestCosmosUnitOfWork(OnCosmos, UnitOfWorkContract):
    example = examples(TICKET)


class TestCosmosIdempotency(OnCosmos, IdempotencyContract):
    example = examples(TICKET)


class TestCosmosQuarantine(OnCosmos, QuarantineContract):
    example = examples(TICKET)


class TestCosmosSession(OnCosmos, SessionContract):
    pass


def test_a_container_that_is_gone_is_unavailable_not_healthy(
    funcstack_services: LocalStack, loop: EventLoop
) -> None:
    from cosmos_outbox.errors import StoreUnavailableError

    client = CosmosClient.from_connection_string(funcstack_services.cosmos_connection_string,
                                                 connection_verify=False)
    missing = client.get_database_client(DATABASE).get_container_client("no-such-container")
    with pytest.raises(StoreUnavailableError):
        CosmosDocumentStore(missing).ping()
    CosmosDocumentStore(client.get_database_client(DATABASE).get_container_client(
        CONTAINER)).ping()

    async def aio_ping(name: str) -> None:
        async with AsyncCosmosClient.from_connection_string(
                funcstack_services.cosmos_connection_string, connection_verify=False) as aio:
            await AsyncCosmosDocumentStore(
                aio.get_database_client(DATABASE).get_container_client(name)).ping()

    with pytest.raises(StoreUnavailableError):
        loop.run(aio_ping("no-such-container"))
    loop.run(aio_ping(CONTAINER))



class _CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The event loop's default executor, counting the work handed to it."""

    submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        type(self).submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.mark.parametrize("proxy_settings", [False, True])
def test_the_aio_client_reads_the_environment_on_each_request_only_when_it_has_settings(
    funcstack_services: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    proxy_settings: bool,
) -> None:
    """The SDK's aio transport looks for proxies and a .netrc on two threads of the loop's
    executor per request when it may: the library's client lets it only when the process has
    such settings (here NO_PROXY), else its requests hand nothing to the executor."""
    from cosmos_outbox.cosmos._client import async_cosmos_client

    for name in [n for n in os.environ if n.upper().endswith("_PROXY") or n.upper() == "NETRC"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no .netrc
    if proxy_settings:
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")

    async def reads() -> None:
        asyncio.get_running_loop().set_default_executor(_CountingExecutor(2))
        async with async_cosmos_client(
                connection_string=funcstack_services.cosmos_connection_string,
                verify_tls=False) as aio:
            store = AsyncCosmosDocumentStore(
                aio.get_database_client(DATABASE).get_container_client(CONTAINER))
            await store.ping()
            _CountingExecutor.submitted = 0
            for _ in range(5):
                await store.read("missing", "missing")

    asyncio.run(reads())
    assert (_CountingExecutor.submitted >= 5) is proxy_settings, _CountingExecutor.submitted


# -- Blob Storage ------------------------------------------------------------------------------

class AzuriteWorld(PayloadWorld):
    """Azurite's blob containers through the SDK, sync or aio; the SDK's retries off (the
    outage fails at once: the adapter's translation of it is what is held, not the SDK's
    back-off)."""

    def __init__(self, stack: LocalStack, loop: EventLoop | None) -> None:
        self.stack, self.loop = stack, loop
        connection = stack.storage_connection_string
        if loop is None:
            def sync(name: str) -> BlobPayloadStore:
                return BlobPayloadStore(ContainerClient.from_connection_string(
                    connection, name, retry_total=0))

            self.store = sync("outbox-payloads")
            self.foreign_reference = sync("other-payloads").reference("ticket/t1/e1")
        else:
            async def connect(name: str) -> AsyncBlobPayloadStore:
                return AsyncBlobPayloadStore(AsyncContainerClient.from_connection_string(
                    connection, name, retry_total=0))

            self.store = loop.run(connect("outbox-payloads"))
            self.foreign_reference = loop.run(connect("other-payloads")).reference("t/t1/e1")

    def run(self, coroutine: Any) -> Any:
        return self.loop.run(coroutine) if self.loop is not None else run_sync(coroutine)

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        self.stack.stop_part("azurite")
        try:
            yield
        finally:
            self.stack.run_azurite()  # on its ports, with its data


class TestBlobPayloadStore(PayloadStoreContract):
    @pytest.fixture(params=["sync", "aio"])
    def world(self, request: pytest.FixtureRequest, funcstack_services: LocalStack,
              loop: EventLoop) -> PayloadWorld:
        return AzuriteWorld(funcstack_services, loop if request.param == "aio" else None)


# -- Service Bus -------------------------------------------------------------------------------

def history(tickets: int, changes: int, title_size: int = 40) -> list[dict[str, Any]]:
    """The stored events of `tickets` tickets, each opened then retitled `changes` times, their
    titles `title_size` characters long (as stored: events of larger tickets than the app's)."""
    documents = []
    for _ in range(tickets):
        ticket = Ticket.open("Printer on fire")
        for n in range(changes):
            ticket.retitle(f"Retitled {n}")
        documents += event_documents(ticket, ttl_seconds=600)
    for document in documents:
        document["data"]["title"] = "t" * title_size
    return documents


def received(stack: LocalStack, sessions: set[str], count: int,
             wait: float = 60) -> list[ServiceBusReceivedMessage]:
    """`count` messages of the sessions of the test subscription, in order per session."""
    found: list[ServiceBusReceivedMessage] = []
    deadline = time.monotonic() + wait
    with ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as client:
        for session in sorted(sessions):
            with client.get_subscription_receiver(TOPIC, "all", session_id=session,
                                                  max_wait_time=2) as receiver:
                while time.monotonic() < deadline:
                    batch = receiver.receive_messages(max_message_count=50, max_wait_time=2)
                    for message in batch:
                        receiver.complete_message(message)
                    found += batch
                    if not batch:
                        break
        assert len(found) >= count or time.monotonic() < deadline
    return found


def properties(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """A received message's application properties, names and text values decoded."""
    def text(value: Any) -> Any:
        return value.decode() if isinstance(value, bytes) else value

    return {text(k): text(v) for k, v in (message.application_properties or {}).items()}


def relay_through(publisher: Any, documents: list[dict[str, Any]], loop: EventLoop | None,
                  payloads: Any = None) -> Any:
    relay = Relay(publisher, Quarantine(InMemoryStore()), TELEMETRY, payloads=payloads)
    work = relay.relay(read_feed(documents))
    return loop.run(work) if loop is not None else run_sync(work)


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_the_publisher_sends_every_event_once_in_order_per_session_in_size_limited_batches(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    documents = history(tickets=3, changes=20, title_size=300)
    connection = funcstack_services.servicebus_connection_string
    if flavour == "sync":
        publisher: Any = ServiceBusPublisher.from_connection_string(
            connection, TOPIC, max_message_bytes=4096)
        report = relay_through(publisher, documents, None)
        publisher.close()
    else:
        async def make() -> AsyncServiceBusPublisher:
            return AsyncServiceBusPublisher.from_connection_string(
                connection, TOPIC, max_message_bytes=4096)

        publisher = loop.run(make())
        report = relay_through(publisher, documents, loop)
        loop.run(publisher.close())
    assert report.sent == len(documents) and report.batches > 3  # split by size
    sessions = {d["partitionKey"] for d in documents}
    messages = received(funcstack_services, sessions, len(documents))
    assert sorted(str(m.message_id) for m in messages) == sorted(d["id"] for d in documents)
    for session in sessions:
        versions = [properties(m)["version"] for m in messages if m.session_id == session]
        assert versions == sorted(versions) == list(range(1, 22))


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_an_event_too_large_for_a_message_goes_by_claim_check_through_blob_storage(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    [document] = history(tickets=1, changes=0, title_size=1)
    document["data"]["title"] = "x" * 300_000  # over the topic's 256 KB
    connection = funcstack_services.servicebus_connection_string
    storage = funcstack_services.storage_connection_string
    if flavour == "sync":
        publisher: Any = ServiceBusPublisher.from_connection_string(connection, TOPIC)
        payloads: Any = BlobPayloadStore.from_connection_string(storage, "outbox-payloads")
        report = relay_through(publisher, [document], None, payloads)
        publisher.close()
    else:
        async def make() -> tuple[AsyncServiceBusPublisher, AsyncBlobPayloadStore]:
            service = AsyncBlobServiceClient.from_connection_string(storage)
            return (AsyncServiceBusPublisher.from_connection_string(connection, TOPIC),
                    AsyncBlobPayloadStore(service.get_container_client("outbox-payloads")))

        publisher, payloads = loop.run(make())
        report = relay_through(publisher, [document], loop, payloads)
        loop.run(publisher.close())
    assert (report.sent, report.offloaded) == (1, 1)
    [message] = received(funcstack_services, {document["partitionKey"]}, 1)
    dataref = str(properties(message)["cloudEvents_dataref"])
    assert b"".join(message.body) == b""
    body = BlobPayloadStore.from_connection_string(storage, "outbox-payloads").get(dataref)
    assert b"x" * 300_000 in body


def test_one_async_sender_serves_concurrent_invocations_and_is_reused_after(
    funcstack_services: LocalStack, loop: EventLoop
) -> None:
    connection = funcstack_services.servicebus_connection_string

    async def invocations() -> tuple[int, int]:
        publisher = AsyncServiceBusPublisher.from_connection_string(connection, TOPIC)
        relay = Relay(publisher, Quarantine(InMemoryStore()), TELEMETRY)
        feeds = [history(tickets=1, changes=4) for _ in range(4)]
        await asyncio.gather(*(asyncio.ensure_future(relay.relay(read_feed(f)))
                               for f in feeds))
        await asyncio.sleep(0)  # the ended tasks' callbacks run
        first = len(publisher._idle)
        await asyncio.ensure_future(relay.relay(read_feed(history(tickets=1, changes=1))))
        await asyncio.sleep(0)
        second = len(publisher._idle)
        await publisher.close()
        return first, second

    first, second = loop.run(invocations())
    assert 1 <= first <= 4 and second == first  # the next invocation took an idle sender


def unique() -> str:
    return uuid.uuid4().hex
