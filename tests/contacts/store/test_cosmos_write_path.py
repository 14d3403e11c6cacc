"""The Cosmos DB document store (`cosmos_outbox.cosmos.CosmosDocumentStore`, and its `aio`
twin, the app's) on the local endpoint through the real SDK: the unit-of-work contract and the
contact list, one batch per command."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from application.contacts.ports import ContactList
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.documents import EVENT_TYPE
from cosmos_outbox_testing.contracts import EventLoop
from funcstack.deadlines import wait_for
from infra.cosmos.contacts import CosmosContactList, SyncCosmosContactList
from tests.contacts.store.unit_of_work_contract import (
    ContactsStoreContract,
    ContactsWorld,
)
from tools.httpclient import Client
from tools.provision import create_contacts_container
from tools.stack import Stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def account(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, Any]]:
    """The local endpoint and its key (verified: tests/conftest.py trusts funcstack's
    authority), or the official emulator / an account when COSMOS_ENDPOINT and COSMOS_KEY are
    set (the contract suite then runs there unchanged; COSMOS_VERIFY_TLS=false for an emulator
    whose certificate this process does not trust), with the clients' TLS options."""
    endpoint, key = os.environ.get("COSMOS_ENDPOINT"), os.environ.get("COSMOS_KEY")
    if endpoint and key:
        verify = os.environ.get("COSMOS_VERIFY_TLS", "true").lower() != "false"
        return endpoint, key, {"connection_verify": verify}
    stack: Stack = request.getfixturevalue("stack")
    assert stack.cosmos is not None
    return stack.cosmos.endpoint, stack.cosmos.key, {}


@pytest.fixture(scope="module")
def cosmos(account: tuple[str, str, dict[str, Any]]) -> CosmosClient:
    return CosmosClient(account[0], credential=account[1], **account[2])


def fresh_container(cosmos: CosmosClient, name: str) -> ContainerProxy:
    """A container as deployed (partition key, TTL, indexing policy)."""
    return create_contacts_container(cosmos.create_database_if_not_exists("contract"), name)


class CosmosWorld(ContactsWorld):
    """The document store on one container; event documents written with a TTL of `ttl`."""

    def __init__(self, container: ContainerProxy, ttl: int = 864000) -> None:
        self.container = container
        self.store = CosmosDocumentStore(container)
        self.event_ttl_seconds = ttl

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return list(self.container.query_items("SELECT * FROM c", partition_key=partition_key))

    def contact_list(self) -> ContactList:
        return SyncCosmosContactList(self.container)

    def expire(self, partition_key: str, document_id: str) -> None:
        """The store's own TTL, shortened to 1 s: wait until it has deleted the document."""
        document = self.container.read_item(document_id, partition_key=partition_key)
        self.container.replace_item(
            document_id, {k: v for k, v in document.items() if not k.startswith("_")} | {"ttl": 1}
        )
        wait_for(
            lambda: not any(d["id"] == document_id for d in self.documents(partition_key)),
            f"{document_id} deleted by the store's TTL",
            every=0.25,
        )


class AsyncCosmosWorld(CosmosWorld):
    """The same container through the SDK's `aio` client (the app's), on an event loop of its
    own; the sync client only arranges and inspects."""

    asynchronous = True

    def __init__(self, container: ContainerProxy, aio: AsyncCosmosClient, loop: EventLoop) -> None:
        super().__init__(container)
        self.loop = loop
        database = container.container_link.split("/")[1]
        self.aio_container = aio.get_database_client(database).get_container_client(container.id)
        self.store = AsyncCosmosDocumentStore(self.aio_container)

    def run(self, coroutine: Any) -> Any:
        return self.loop.run(coroutine)

    def contact_list(self) -> ContactList:
        return CosmosContactList(self.aio_container)


@pytest.fixture(scope="module")
def loop() -> Iterator[EventLoop]:
    running = EventLoop()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def aio(account: tuple[str, str, dict[str, Any]], loop: EventLoop) -> Iterator[AsyncCosmosClient]:
    """The SDK's `aio` client on `loop` (its session belongs to that loop)."""

    async def connect() -> AsyncCosmosClient:
        return AsyncCosmosClient(account[0], credential=account[1], **account[2])

    client: AsyncCosmosClient = loop.run(connect())
    try:
        yield client
    finally:
        loop.run(client.close())


class TestCosmosUnitOfWork(ContactsStoreContract):
    """On the sync client, then on the `aio` one (the app's)."""

    @pytest.fixture(params=["sync", "aio"])
    def world(
        self, cosmos: CosmosClient, request: pytest.FixtureRequest, loop: EventLoop
    ) -> ContactsWorld:
        import uuid

        container = fresh_container(cosmos, f"c{uuid.uuid4().hex[:12]}")
        if request.param == "sync":
            return CosmosWorld(container)
        aio: AsyncCosmosClient = request.getfixturevalue("aio")
        return AsyncCosmosWorld(container, aio, loop)


@pytest.mark.skipif(bool(os.environ.get("COSMOS_ENDPOINT")), reason="reads the local stack")
def test_a_create_over_http_writes_one_contact_and_one_event_in_its_partition(
    stack: Stack, cosmos: CosmosClient
) -> None:
    client = Client(stack.api_url)
    try:
        reply = client.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": "One",
                "lastName": "Batch",
                "email": "one@example.com",
                "companyName": "C",
            },
        )
    finally:
        client.close()
    cid = reply.json()["id"]
    values = stack.settings()
    container = cosmos.get_database_client(values["COSMOS_DATABASE"]).get_container_client(
        values["COSMOS_CONTAINER"]
    )
    docs = list(container.query_items("SELECT * FROM c", partition_key=cid))
    assert sorted(d["type"] for d in docs) == ["contact", EVENT_TYPE]
    event = next(d for d in docs if d["type"] == EVENT_TYPE)
    assert event["ttl"] == int(values["EVENT_TTL_SECONDS"])
    contact = next(d for d in docs if d["type"] == "contact")
    assert contact["ttl"] == -1 and "_etag" not in contact["data"]
    assert event["_ts"] == contact["_ts"]
