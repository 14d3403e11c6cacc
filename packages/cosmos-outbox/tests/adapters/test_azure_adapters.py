"""The library's own adapters, sync and `aio`, through the unmodified Azure SDKs against the local
Azure stack (funcstack's pytest plugin: Cosmos DB, Service Bus and Azurite on free ports, the
resources of fixtures/funcstack.json): each held to the same contract suites as the in-memory
fakes (the store's by role: the write path's, one document at a time, the queries'; the
quarantine's; payload store; message publisher; backlog estimator), and the relay's publisher
sending real batches that a receiver reads back, in order, with their ids."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import CosmosClient
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from azure.servicebus import ServiceBusClient
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.blob.aio import ContainerClient as AsyncContainerClient
from azure_stack import (
    DATABASE,
    PAYLOADS,
    TELEMETRY,
    TOPIC,
    OnCosmos,
    cosmos_world,
    history,
    properties,
    received,
    relay_through,
    retitle,
    verified,
)
from tickets import TICKET

from cosmos_changefeed import lease_prefix
from cosmos_outbox._mapper import QUARANTINE_NOTICE_SUBJECT, notice_id, payload_name, read_feed
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._records import OutboxRecord
from cosmos_outbox._relay.forwarding import Relay
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.blob import BlobPayloadStore
from cosmos_outbox.blob.aio import BlobPayloadStore as AsyncBlobPayloadStore
from cosmos_outbox.cosmos import CosmosBacklogEstimator, CosmosDocumentStore
from cosmos_outbox.cosmos.aio import CosmosBacklogEstimator as AsyncCosmosBacklogEstimator
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.errors import PayloadStoreError, RelayNotReadyError, StoreUnavailableError
from cosmos_outbox.servicebus import ServiceBusPublisher
from cosmos_outbox.servicebus.aio import ServiceBusPublisher as AsyncServiceBusPublisher
from cosmos_outbox_testing import InMemoryStore
from cosmos_outbox_testing.contracts import (
    BacklogEstimatorContract,
    BacklogWorld,
    DocumentWritesContract,
    EventLoop,
    OperationStoreContract,
    PayloadStoreContract,
    PayloadWorld,
    PublisherContract,
    PublisherWorld,
    QuarantineContract,
    QueryContract,
    Received,
    WritePathContract,
    examples,
)

if TYPE_CHECKING:
    from funcstack import LocalStack

pytestmark = pytest.mark.integration


# -- Cosmos DB ---------------------------------------------------------------------------------


class TestCosmosWritePath(OnCosmos, WritePathContract):
    example = examples(TICKET)


class TestCosmosQuarantine(OnCosmos, QuarantineContract):
    example = examples(TICKET)


class TestCosmosQueries(OnCosmos, QueryContract):
    pass


class TestCosmosDocumentWrites(OnCosmos, DocumentWritesContract):
    pass


class TestCosmosOperationStore(OnCosmos, OperationStoreContract):
    pass


class TestCosmosOperationStoreIndexingOnlyType(OnCosmos, OperationStoreContract):
    """The operations' store in a container that indexes `/type` alone (an app's container may
    index little more: deploy/indexing-policy.json), where Cosmos DB refuses an ORDER BY on
    another path (seen: the operators' list of operations answered 500 in the Contacts app)."""

    @pytest.fixture
    def fresh(self, admin_database: Any) -> Iterator[str]:
        from azure.cosmos import PartitionKey

        name = f"outbox-{uuid.uuid4().hex[:12]}"
        admin_database.create_container(
            id=name,
            partition_key=PartitionKey(path="/partitionKey"),
            default_ttl=-1,
            indexing_policy={
                "indexingMode": "consistent",
                "includedPaths": [{"path": "/type/?"}],
                "excludedPaths": [{"path": "/*"}],
            },
        )
        try:
            yield name
        finally:
            admin_database.delete_container(name)


def test_the_health_probe_passes_on_an_empty_container_and_fails_on_a_missing_one(
    funcstack_services: LocalStack, loop: EventLoop, fresh: str
) -> None:
    """An empty container (no probe document) answers: healthy. A container that does not
    exist is the store unavailable, said so, not healthy (a point read of a missing container
    answers "not found" like a missing document)."""
    client = CosmosClient.from_connection_string(
        funcstack_services.cosmos_connection_string, **verified(funcstack_services)
    )
    database = client.get_database_client(DATABASE)
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        CosmosDocumentStore(database.get_container_client("no-such-container")).ping()
    CosmosDocumentStore(database.get_container_client(fresh)).ping()

    async def aio_ping(name: str) -> None:
        async with AsyncCosmosClient.from_connection_string(
            funcstack_services.cosmos_connection_string, **verified(funcstack_services)
        ) as aio:
            await AsyncCosmosDocumentStore(
                aio.get_database_client(DATABASE).get_container_client(name)
            ).ping()

    with pytest.raises(StoreUnavailableError, match="does not exist"):
        loop.run(aio_ping("no-such-container"))
    loop.run(aio_ping(fresh))


def test_a_missing_lease_container_is_the_relay_not_ready_naming_it(
    funcstack_services: LocalStack, loop: EventLoop, fresh: str
) -> None:
    """issue 48: the backlog estimate (the timer's, every minute) says that the relay's lease
    container does not exist as the relay says what it misses: RelayNotReadyError naming it
    and the fix, sync and aio (the timer records it in the relay's status)."""
    client = CosmosClient.from_connection_string(
        funcstack_services.cosmos_connection_string, **verified(funcstack_services)
    )
    database = client.get_database_client(DATABASE)
    missing = "lease container 'no-such-leases' does not exist.*COSMOS_LEASE_CONTAINER"
    with pytest.raises(RelayNotReadyError, match=missing):
        CosmosBacklogEstimator(
            database.get_container_client(fresh), database.get_container_client("no-such-leases")
        ).estimate()

    async def aio_estimate() -> None:
        async with AsyncCosmosClient.from_connection_string(
            funcstack_services.cosmos_connection_string, **verified(funcstack_services)
        ) as aio:
            adatabase = aio.get_database_client(DATABASE)
            await AsyncCosmosBacklogEstimator(
                adatabase.get_container_client(fresh),
                adatabase.get_container_client("no-such-leases"),
            ).estimate()

    with pytest.raises(RelayNotReadyError, match=missing):
        loop.run(aio_estimate())


class _CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The event loop's default executor, counting the work handed to it."""

    submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        type(self).submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.mark.parametrize("proxy_settings", [False, True])
def test_the_aio_client_reads_the_environment_on_each_request_only_when_it_has_settings(
    funcstack_services: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fresh: str,
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
            **verified(funcstack_services),
        ) as aio:
            store = AsyncCosmosDocumentStore(
                aio.get_database_client(DATABASE).get_container_client(fresh)
            )
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
                return BlobPayloadStore(
                    ContainerClient.from_connection_string(connection, name, retry_total=0)
                )

            self.store = sync(PAYLOADS)
            self.foreign_reference = sync("other-payloads").reference("ticket/t1/e1")
        else:

            async def connect(name: str) -> AsyncBlobPayloadStore:
                return AsyncBlobPayloadStore(
                    AsyncContainerClient.from_connection_string(connection, name, retry_total=0)
                )

            self.store = loop.run(connect(PAYLOADS))
            self.foreign_reference = loop.run(connect("other-payloads")).reference("t/t1/e1")

    def run(self, coroutine: Any) -> Any:
        return self.loop.run(coroutine) if self.loop is not None else run_sync(coroutine)

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        if not hasattr(self.stack, "stop_part"):  # conftest.py's ExternalStack
            pytest.skip("stops Azurite: needs funcstack in this interpreter (Python 3.13+)")
        self.stack.stop_part("azurite")
        try:
            yield
        finally:
            self.stack.run_azurite()  # on its ports, with its data


class TestBlobPayloadStore(PayloadStoreContract):
    @pytest.fixture(params=["sync", "aio"])
    def world(
        self, request: pytest.FixtureRequest, funcstack_services: LocalStack, loop: EventLoop
    ) -> PayloadWorld:
        return AzuriteWorld(funcstack_services, loop if request.param == "aio" else None)


def payload_store(
    flavour: str, stack: LocalStack, loop: EventLoop, container: str = PAYLOADS
) -> Any:
    """The claim check's store of `container`, sync or `aio`, by its public factory."""
    if flavour == "sync":
        return BlobPayloadStore.from_connection_string(stack.storage_connection_string, container)

    async def connect() -> AsyncBlobPayloadStore:
        return AsyncBlobPayloadStore.from_connection_string(
            stack.storage_connection_string, container
        )

    return loop.run(connect())


def run_on(flavour: str, loop: EventLoop, work: Any) -> Any:
    """A store's call: its result (sync), or its coroutine run on the loop (`aio`)."""
    return loop.run(work) if flavour == "aio" else work


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_a_payload_is_a_private_blob_with_the_events_content_type_named_by_the_event(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    record = OutboxRecord(
        event_id=f"e-{flavour}",
        aggregate_type="manuscript",
        aggregate_id="m/1",
        action="Revised",
        version=2,
        event_source="/manuscripts",
        body=b"{}",
    )
    payloads = payload_store(flavour, funcstack_services, loop)
    name = payload_name(record)
    run_on(flavour, loop, payloads.put(name, b'{"text":"x"}', content_type="application/json"))
    assert name == f"manuscript/m%2F1/e-{flavour}"
    with BlobServiceClient.from_connection_string(
        funcstack_services.storage_connection_string
    ) as service:
        container = service.get_container_client(PAYLOADS)
        blob = container.get_blob_client(name).get_blob_properties()
        assert blob.content_settings.content_type == "application/json"
        assert blob.size == len(b'{"text":"x"}')
        assert container.get_container_properties().public_access is None  # private
    blob_endpoint = dict(
        part.split("=", 1)
        for part in funcstack_services.storage_connection_string.split(";")
        if part
    )["BlobEndpoint"]
    assert payloads.reference(name).startswith(f"{blob_endpoint}/{PAYLOADS}/manuscript/")


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_a_missing_container_fails_the_upload_naming_it(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    payloads = payload_store(flavour, funcstack_services, loop, "no-such-container")
    with pytest.raises(PayloadStoreError, match="no-such-container"):
        run_on(flavour, loop, payloads.put("a/b/c", b"{}", content_type="application/json"))


class CosmosBacklogWorld(BacklogWorld):
    """The backlog estimator of a container and a lease container, sync or `aio`; a checkpoint
    is a lease as the Functions host's change feed processor writes it (an etag continuation
    on the whole range)."""

    def __init__(
        self, flavour: str, stack: LocalStack, loop: EventLoop, monitored: str, leases: str
    ) -> None:
        self.store_world = cosmos_world(
            flavour, stack.container_client(DATABASE, monitored), stack, loop
        )
        self.monitored = stack.container_client(DATABASE, monitored)
        self.leases = stack.container_client(DATABASE, leases)
        self.endpoint = stack.cosmos_endpoint
        if flavour == "sync":
            self.estimator = CosmosBacklogEstimator(
                self.monitored, self.leases, processor_name="outbox."
            )
        else:

            async def connect() -> AsyncCosmosBacklogEstimator:
                client = loop.closing(
                    AsyncCosmosClient.from_connection_string(
                        stack.cosmos_connection_string, **verified(stack)
                    )
                )
                database = client.get_database_client(DATABASE)
                return AsyncCosmosBacklogEstimator(
                    database.get_container_client(monitored),
                    database.get_container_client(leases),
                    processor_name="outbox.",
                )

            self.estimator = loop.run(connect())

    def checkpoint(self) -> None:
        latest = max(
            int(d["_lsn"]) for d in self.monitored.query_items_change_feed(start_time="Beginning")
        )
        prefix = lease_prefix("outbox.", self.endpoint, str(self.monitored.read()["_rid"]))
        self.leases.upsert_item(
            {
                "id": f"{prefix}..0",
                "version": 1,
                "LeaseToken": "0",
                "ContinuationToken": f'"{latest}"',
                "Owner": None,
                "timestamp": "2026-01-01T00:00:00Z",
                "FeedRange": {"Range": {"min": "", "max": "FF"}},
            }
        )


class TestCosmosBacklogEstimator(BacklogEstimatorContract):
    @pytest.fixture(params=["sync", "aio"])
    def world(
        self,
        request: pytest.FixtureRequest,
        funcstack_services: LocalStack,
        loop: EventLoop,
        fresh: str,
        leases: str,
    ) -> BacklogWorld:
        return CosmosBacklogWorld(request.param, funcstack_services, loop, fresh, leases)


# -- Service Bus -------------------------------------------------------------------------------


class ServiceBusWorld(PublisherWorld):
    """The relay's publisher of the test topic, sync or `aio`; what reached the topic read back
    from its session subscription; an outage is the endpoint stopped (funcstack in-process)."""

    def __init__(self, flavour: str, stack: LocalStack, loop: EventLoop) -> None:
        self.stack, self.loop = stack, loop if flavour == "aio" else None
        connection = stack.servicebus_connection_string
        # the SDK's retries as configured, quicker (its backoff while the endpoint is down took
        # 15 s a send): the outage's send still fails after them, the next one reconnects
        backoff = 0.05
        if self.loop is None:
            self.publisher = ServiceBusPublisher(
                lambda: ServiceBusClient.from_connection_string(
                    connection, retry_backoff_factor=backoff
                ),
                TOPIC,
            )
        else:

            async def connect() -> AsyncServiceBusPublisher:
                return AsyncServiceBusPublisher(
                    AsyncServiceBusClient.from_connection_string(
                        connection, retry_backoff_factor=backoff
                    ),
                    TOPIC,
                )

            self.publisher = self.loop.run(connect())

    def run(self, coroutine: Any) -> Any:
        return self.loop.run(coroutine) if self.loop is not None else run_sync(coroutine)

    def received(self, sessions: list[str], count: int) -> list[Received]:
        return [
            Received(str(m.message_id), m.session_id, m.subject, b"".join(m.body), properties(m))
            for m in received(self.stack, set(sessions), count)
        ]

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        if not hasattr(self.stack, "stop_servicebus"):  # conftest.py's ExternalStack
            pytest.skip("stops Service Bus: needs funcstack in this interpreter (Python 3.13+)")
        self.stack.stop_servicebus()
        try:
            yield
        finally:
            self.stack.start_servicebus()  # on its port, with its entities

    def close(self) -> None:
        publisher = self.publisher
        if isinstance(publisher, ServiceBusPublisher):
            publisher.close()
        elif isinstance(publisher, AsyncServiceBusPublisher):
            self.run(publisher.close())


class TestServiceBusPublisher(PublisherContract):
    @pytest.fixture(params=["sync", "aio"])
    def world(
        self, request: pytest.FixtureRequest, funcstack_services: LocalStack, loop: EventLoop
    ) -> Iterator[PublisherWorld]:
        world = ServiceBusWorld(request.param, funcstack_services, loop)
        try:
            yield world
        finally:
            world.close()


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_the_publisher_sends_every_event_once_in_order_per_session_in_size_limited_batches(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    documents = history(tickets=3, changes=20, title_size=300)
    connection = funcstack_services.servicebus_connection_string
    if flavour == "sync":
        publisher: Any = ServiceBusPublisher.from_connection_string(
            connection, TOPIC, max_message_bytes=4096
        )
        report = relay_through(publisher, documents, None)
        publisher.close()
    else:

        async def make() -> AsyncServiceBusPublisher:
            return AsyncServiceBusPublisher.from_connection_string(
                connection, TOPIC, max_message_bytes=4096
            )

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
    retitle(document, "x" * 300_000)  # over the topic's 256 KB
    connection = funcstack_services.servicebus_connection_string
    storage = funcstack_services.storage_connection_string
    if flavour == "sync":
        publisher: Any = ServiceBusPublisher.from_connection_string(connection, TOPIC)
        payloads: Any = BlobPayloadStore.from_connection_string(storage, PAYLOADS)
        report = relay_through(publisher, [document], None, payloads)
        publisher.close()
    else:

        async def make() -> tuple[AsyncServiceBusPublisher, AsyncBlobPayloadStore]:
            service = AsyncBlobServiceClient.from_connection_string(storage)
            return (
                AsyncServiceBusPublisher.from_connection_string(connection, TOPIC),
                AsyncBlobPayloadStore(service.get_container_client(PAYLOADS)),
            )

        publisher, payloads = loop.run(make())
        report = relay_through(publisher, [document], loop, payloads)
        loop.run(publisher.close())
    assert (report.sent, report.offloaded) == (1, 1)
    [message] = received(funcstack_services, {document["partitionKey"]}, 1)
    dataref = str(properties(message)["cloudEvents_dataref"])
    assert b"".join(message.body) == b""
    body = BlobPayloadStore.from_connection_string(storage, PAYLOADS).get(dataref)
    assert b"x" * 300_000 in body


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_an_event_service_bus_refuses_at_every_send_is_quarantined_and_the_rest_are_sent(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    """A stored event whose application property is 40 KB (written by an older library, or by
    hand: the session refuses it at publish), relayed through the SDK to funcstack's endpoint,
    which refuses such a message as Service Bus does (32 KB a value): set aside with its
    reason, its notice in its place, the session's other events sent, the batch not failed (a
    failed batch is retried by the trigger for ever: its lease would never move on)."""
    documents = history(tickets=1, changes=2)
    documents[1]["properties"] = json.dumps({"note": "x" * 40 * 1024})
    connection = funcstack_services.servicebus_connection_string
    quarantine = InMemoryStore()
    if flavour == "sync":
        publisher: Any = ServiceBusPublisher.from_connection_string(connection, TOPIC)
        report = relay_through(publisher, documents, None, quarantine=quarantine)
        publisher.close()
    else:

        async def make() -> AsyncServiceBusPublisher:
            return AsyncServiceBusPublisher.from_connection_string(connection, TOPIC)

        publisher = loop.run(make())
        report = relay_through(publisher, documents, loop, quarantine=quarantine)
        loop.run(publisher.close())
    assert report.quarantined == [documents[1]["id"]]
    assert (report.sent, report.notices) == (2, 1)
    [kept] = quarantine.documents.values()
    assert "application property 'note' is 40960 bytes" in kept["reason"]
    messages = received(funcstack_services, {documents[0]["partitionKey"]}, 3)
    assert [m.subject == QUARANTINE_NOTICE_SUBJECT for m in messages] == [False, True, False]
    assert [str(m.message_id) for m in messages] == [
        documents[0]["id"],
        notice_id(documents[1]["id"]),
        documents[2]["id"],
    ]


def test_one_async_sender_serves_concurrent_invocations_and_is_reused_after(
    funcstack_services: LocalStack, loop: EventLoop
) -> None:
    connection = funcstack_services.servicebus_connection_string

    async def invocations() -> tuple[int, int]:
        publisher = AsyncServiceBusPublisher.from_connection_string(connection, TOPIC)
        relay = Relay(publisher, Quarantine(InMemoryStore()), TELEMETRY)
        feeds = [history(tickets=1, changes=4) for _ in range(4)]
        await asyncio.gather(*(asyncio.ensure_future(relay.relay(read_feed(f))) for f in feeds))
        await asyncio.sleep(0)  # the ended tasks' callbacks run
        first = len(publisher._idle)
        await asyncio.ensure_future(relay.relay(read_feed(history(tickets=1, changes=1))))
        await asyncio.sleep(0)
        second = len(publisher._idle)
        await publisher.close()
        return first, second

    first, second = loop.run(invocations())
    assert 1 <= first <= 4 and second == first  # the next invocation took an idle sender


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_the_payload_store_says_when_its_container_is_missing_and_how_to_fix_it(
    funcstack_services: LocalStack, loop: EventLoop, flavour: str
) -> None:
    storage = funcstack_services.storage_connection_string

    def check(container: str) -> None:
        if flavour == "sync":
            BlobPayloadStore.from_connection_string(storage, container).check()
        else:
            store = AsyncBlobPayloadStore.from_connection_string(storage, container)
            loop.run(store.check())

    check(PAYLOADS)  # declared in fixtures/funcstack.json: found
    with pytest.raises(PayloadStoreError, match="no-such-payloads does not exist") as raised:
        check("no-such-payloads")
    assert "OUTBOX_PAYLOAD_CONTAINER" in str(raised.value)
    assert "OUTBOX_PAYLOAD_MAX_BYTES=0" in str(raised.value)
