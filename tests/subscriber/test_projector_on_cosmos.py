"""The projector against the local Cosmos endpoint (real azure-cosmos SDK), through both of
cosmos-outbox's APIs: the sync `Projector` on the SDK's sync client and the async one
(`cosmos_outbox.subscriber.aio.Projector`, which the app runs) on its `aio` client. Each event
changes the projection exactly once (inbox record and projection in one transactional batch),
in version order; an event after a gap is held until the missing one arrives. Also the
projection's reads (the HTTP routes' port) on the `aio` client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import pytest
from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.aio import ContainerProxy as AsyncContainerProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.errors import PreconditionFailedError
from cosmos_outbox.ports import AsyncDocumentStore, DocumentStore
from cosmos_outbox.subscriber import (
    GAP_TYPE,
    HELD_TYPE,
    INBOX_TYPE,
    MAX_HELD_PER_BATCH,
    QUARANTINE_NOTICE,
    IncomingEvent,
    Outcome,
    Projector,
    Result,
    aio,
    held_id,
    inbox_id,
)
from cosmos_outbox.subscriber.aio import Projector as AsyncProjector
from cosmos_outbox_testing import run_sync
from funcstack.cosmos import CosmosEndpoint
from tools.provision import create_projection_container

from contacts_projection.projection import ContactProjection  # isort: skip
from contacts_projection.reads import StoreProjectionReads  # isort: skip

pytestmark = pytest.mark.integration
#: The module's database on the test process's Cosmos DB endpoint (tests/conftest.py's
#: `shared_cosmos`): its tests fault nothing and count only their own containers' documents.
DATABASE = f"subscriber-tests-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def cosmos(shared_cosmos: CosmosEndpoint) -> CosmosEndpoint:
    return shared_cosmos


@pytest.fixture(scope="module")
def database(cosmos: CosmosEndpoint) -> Iterator[Any]:
    # verified, as the subscriber's own client: tests/conftest.py trusts funcstack's authority
    client = CosmosClient.from_connection_string(cosmos.connection_string)
    try:
        yield client.create_database_if_not_exists(DATABASE)
    finally:
        client.delete_database(DATABASE)
        client.close()


@pytest.fixture
def container(database: Any) -> ContainerProxy:
    return create_projection_container(database, f"p-{uuid.uuid4().hex[:8]}")


class Handles(Protocol):
    def handle(self, event: IncomingEvent) -> Result: ...


@dataclass
class Awaited:
    """The async projector, each event run to its end on the test's event loop."""

    core: AsyncProjector
    run: Callable[[Coroutine[Any, Any, Result]], Result]

    def handle(self, event: IncomingEvent) -> Result:
        return self.run(self.core.handle(event))


@dataclass
class Side:
    """One API on the container: `sync` (the sync client's store; coroutines of the core run
    as the sync API runs them) or `async` (the `aio` client's store, on an event loop)."""

    name: str
    store: DocumentStore | AsyncDocumentStore
    run: Callable[[Coroutine[Any, Any, Any]], Any]

    def projector(self) -> Handles:
        if isinstance(self.store, DocumentStore):
            return Projector(self.store, ContactProjection(), inbox_ttl_seconds=3600)
        return Awaited(
            aio.Projector(self.store, ContactProjection(), inbox_ttl_seconds=3600), self.run
        )


@asynccontextmanager
async def aio_container(cosmos: CosmosEndpoint, name: str) -> AsyncIterator[AsyncContainerProxy]:
    async with AsyncCosmosClient.from_connection_string(cosmos.connection_string) as client:
        yield client.get_database_client(DATABASE).get_container_client(name)


@pytest.fixture
def aio_store(
    cosmos: CosmosEndpoint, container: ContainerProxy
) -> Iterator[tuple[AsyncCosmosDocumentStore, asyncio.Runner]]:
    """The container on the SDK's `aio` client, and the event loop it runs on."""
    with asyncio.Runner() as runner:
        opened = aio_container(cosmos, container.id)
        proxy = runner.run(opened.__aenter__())
        try:
            yield AsyncCosmosDocumentStore(proxy), runner
        finally:
            runner.run(opened.__aexit__(None, None, None))


@pytest.fixture(params=["sync", "async"])
def side(request: pytest.FixtureRequest, container: ContainerProxy) -> Side:
    if request.param == "sync":
        return Side("sync", CosmosDocumentStore(container), run_sync)
    store, runner = request.getfixturevalue("aio_store")
    return Side("async", store, runner.run)


def events(contact: str) -> list[IncomingEvent]:
    def ev(version: int, action: str, **data: Any) -> IncomingEvent:
        body = {
            "id": str(uuid.uuid4()),
            "contactId": contact,
            "version": version,
            "action": action,
            **data,
        }
        return IncomingEvent(
            event_id=body["id"],
            aggregate_id=contact,
            aggregate_type="contact",
            type=action,
            version=version,
            data=body,
        )

    return [
        ev(
            1,
            "ContactCreatedEvent",
            name={"firstName": "A", "lastName": "L"},
            email="a@example.com",
            description="d",
            company={"companyName": "C"},
        ),
        ev(2, "ContactEmailUpdatedEvent", email="b@example.com"),
        ev(3, "ContactNameUpdatedEvent", name={"firstName": "B", "lastName": "L"}),
        ev(4, "ContactDeletedEvent", deletedAt="2025-01-01T00:00:00Z"),
    ]


def documents(container: ContainerProxy, contact: str, kind: str) -> list[dict[str, Any]]:
    return list(
        container.query_items(
            "SELECT * FROM c WHERE c.type = @t",
            parameters=[{"name": "@t", "value": kind}],
            partition_key=contact,
        )
    )


def test_events_in_order_build_the_projection_with_one_inbox_record_each(
    side: Side,
    container: ContainerProxy,
) -> None:
    projector = side.projector()
    contact = str(uuid.uuid4())
    for event in events(contact):
        assert projector.handle(event).outcome is Outcome.APPLIED
    projection = container.read_item(contact, partition_key=contact)
    assert projection["version"] == 4 and projection["deleted"] is True
    assert projection["data"]["email"] == "b@example.com"
    assert projection["data"]["name"] == {"firstName": "B", "lastName": "L"}
    inbox = documents(container, contact, INBOX_TYPE)
    assert sorted(r["version"] for r in inbox) == [1, 2, 3, 4]
    assert {r["ttl"] for r in inbox} == {3600}


def test_a_redelivered_event_is_acknowledged_without_effect(
    side: Side,
    container: ContainerProxy,
) -> None:
    projector = side.projector()
    contact = str(uuid.uuid4())
    first, second, *_ = events(contact)
    projector.handle(first)
    projector.handle(second)
    before = container.read_item(contact, partition_key=contact)
    assert projector.handle(second).outcome is Outcome.DUPLICATE
    assert projector.handle(first).outcome is Outcome.DUPLICATE
    # its inbox record expired: the version check still drops it
    container.delete_item(inbox_id(first.event_id), partition_key=contact)
    assert projector.handle(first).outcome is Outcome.DUPLICATE
    after = container.read_item(contact, partition_key=contact)
    assert after["_etag"] == before["_etag"]


def test_an_event_after_a_gap_is_held_until_the_missing_one_arrives(
    side: Side,
    container: ContainerProxy,
) -> None:
    projector = side.projector()
    contact = str(uuid.uuid4())
    one, two, three, four = events(contact)
    projector.handle(one)
    held = projector.handle(three)
    assert (held.outcome, held.missing) == (Outcome.HELD, 2)
    assert projector.handle(four).outcome is Outcome.HELD
    assert projector.handle(three).outcome is Outcome.DUPLICATE  # held already: in the inbox
    assert container.read_item(contact, partition_key=contact)["version"] == 1
    assert [d["missingVersion"] for d in documents(container, contact, HELD_TYPE)] == [2, 2]
    closed = projector.handle(two)
    assert (closed.outcome, closed.applied) == (Outcome.APPLIED, [2, 3, 4])
    projection = container.read_item(contact, partition_key=contact)
    assert projection["version"] == 4 and projection["deleted"] is True
    assert documents(container, contact, HELD_TYPE) == []


class RacedProjector(AsyncProjector):
    """Another delivery changes the projection between this one's read and its batch."""

    def __init__(self, side: Side, container: ContainerProxy) -> None:
        super().__init__(side.store, ContactProjection(), inbox_ttl_seconds=3600)
        self.container = container
        self.raced = False

    async def _read(self, item: str, partition: str) -> dict[str, Any] | None:
        document = await super()._read(item, partition)
        if document is not None and item == partition and not self.raced:
            self.raced = True
            self.container.replace_item(item, {**document, "touched": True})
        return document


def test_a_batch_that_loses_a_race_writes_neither_the_projection_nor_the_inbox_record(
    side: Side,
    container: ContainerProxy,
) -> None:
    contact = str(uuid.uuid4())
    one, two, *_ = events(contact)
    side.projector().handle(one)
    with pytest.raises(PreconditionFailedError):  # the projection's etag (412)
        side.run(RacedProjector(side, container).handle(two))
    assert container.read_item(contact, partition_key=contact)["version"] == 1
    assert [r["version"] for r in documents(container, contact, INBOX_TYPE)] == [1]
    # the redelivery applies it
    projector = side.projector()
    assert projector.handle(two).outcome is Outcome.APPLIED


def notice(contact: str, version: int) -> IncomingEvent:
    body = {
        "eventId": str(uuid.uuid4()),
        "contactId": contact,
        "action": "ContactEmailUpdatedEvent",
        "version": version,
        "reason": "message of 300000 bytes is too large",
    }
    return IncomingEvent(
        event_id=str(uuid.uuid4()),
        aggregate_id=contact,
        aggregate_type="contact",
        type=QUARANTINE_NOTICE,
        version=version,
        data=body,
    )


def test_a_quarantine_notice_records_a_known_gap_that_the_replay_closes(
    side: Side,
    container: ContainerProxy,
) -> None:
    projector = side.projector()
    contact = str(uuid.uuid4())
    one, two, three, _ = events(contact)
    projector.handle(one)
    told = notice(contact, 2)
    assert projector.handle(told).outcome is Outcome.GAP_RECORDED
    assert projector.handle(told).outcome is Outcome.DUPLICATE  # redelivered notice
    [gap] = documents(container, contact, GAP_TYPE)
    assert (gap["version"], gap["eventId"], gap["reason"]) == (
        2,
        told.data["eventId"],
        told.data["reason"],
    )
    assert projector.handle(three).outcome is Outcome.HELD  # later events wait, as for any gap
    replayed = projector.handle(two)  # the operator replays the quarantined event
    assert replayed.applied == [2, 3]
    assert documents(container, contact, GAP_TYPE) == []
    assert documents(container, contact, HELD_TYPE) == []
    # a notice that arrives after its event was applied changes nothing
    assert projector.handle(notice(contact, 2)).outcome is Outcome.DUPLICATE
    assert documents(container, contact, GAP_TYPE) == []


def unknown(contact: str, version: int) -> IncomingEvent:
    """An action the contacts app emits that this subscriber does not know (yet)."""
    event_id = str(uuid.uuid4())
    body = {
        "id": event_id,
        "contactId": contact,
        "version": version,
        "action": "ContactNicknameChangedEvent",
        "nickname": "Ada",
    }
    return IncomingEvent(
        event_id=event_id,
        aggregate_id=contact,
        aggregate_type="contact",
        type="ContactNicknameChangedEvent",
        version=version,
        data=body,
    )


def at_version(event: IncomingEvent, version: int) -> IncomingEvent:
    """The same change as `event`, as the contact's `version`-th event."""
    return IncomingEvent(
        event_id=f"{event.event_id}-v{version}",
        aggregate_id=event.aggregate_id,
        aggregate_type="contact",
        type=event.type,
        version=version,
        data={**event.data, "version": version},
    )


def test_an_action_it_does_not_handle_is_recorded_and_its_version_taken_as_applied(
    side: Side,
    container: ContainerProxy,
) -> None:
    projector = side.projector()
    contact = str(uuid.uuid4())
    one, two, *_ = events(contact)
    projector.handle(one)
    nickname = unknown(contact, 2)
    assert projector.handle(nickname).outcome is Outcome.IGNORED
    [record] = [
        r for r in documents(container, contact, INBOX_TYPE) if r["eventId"] == nickname.event_id
    ]
    assert (record["ignored"], record["action"]) == (True, "ContactNicknameChangedEvent")
    projection = container.read_item(contact, partition_key=contact)
    assert projection["version"] == 2 and "nickname" not in projection["data"]
    # the next version is applied, not held behind the unknown one
    after = at_version(two, 3)
    assert projector.handle(after).outcome is Outcome.APPLIED
    assert container.read_item(contact, partition_key=contact)["version"] == 3
    assert projector.handle(nickname).outcome is Outcome.DUPLICATE


def test_versions_held_behind_an_unknown_action_follow_it_when_it_arrives(
    side: Side,
    container: ContainerProxy,
) -> None:
    projector = side.projector()
    contact = str(uuid.uuid4())
    one, two, *_ = events(contact)
    projector.handle(one)
    after = at_version(two, 3)
    assert projector.handle(after).outcome is Outcome.HELD
    result = projector.handle(unknown(contact, 2))
    assert (result.outcome, result.applied) == (Outcome.IGNORED, [2, 3])
    projection = container.read_item(contact, partition_key=contact)
    assert projection["version"] == 3 and projection["data"]["email"] == "b@example.com"


def described(contact: str, version: int) -> IncomingEvent:
    event_id = str(uuid.uuid4())
    return IncomingEvent(
        event_id=event_id,
        aggregate_id=contact,
        aggregate_type="contact",
        type="ContactDescriptionUpdatedEvent",
        version=version,
        data={
            "id": event_id,
            "contactId": contact,
            "version": version,
            "action": "ContactDescriptionUpdatedEvent",
            "description": f"v{version}",
        },
    )


def test_a_long_run_of_held_events_is_applied_in_batches_within_the_limit(
    side: Side,
    container: ContainerProxy,
) -> None:
    """More held events follow the missing one than one batch may delete (100 operations)."""
    projector = side.projector()
    contact = str(uuid.uuid4())
    one, *_ = events(contact)
    projector.handle(one)
    last = MAX_HELD_PER_BATCH * 2 + 5
    for version in range(3, last + 1):
        assert projector.handle(described(contact, version)).outcome is Outcome.HELD
    result = projector.handle(described(contact, 2))
    assert (result.outcome, result.applied) == (Outcome.APPLIED, list(range(2, last + 1)))
    projection = container.read_item(contact, partition_key=contact)
    assert (projection["version"], projection["data"]["description"]) == (last, f"v{last}")
    assert documents(container, contact, HELD_TYPE) == []
    assert len(documents(container, contact, INBOX_TYPE)) == last


def test_a_held_event_for_the_missing_version_is_applied_before_the_next_is_held(
    side: Side,
    container: ContainerProxy,
) -> None:
    """A delivery that raced the last apply held the version after it: the next event finds
    it instead of holding itself behind a version that is already there."""
    projector = side.projector()
    contact = str(uuid.uuid4())
    one, two, three, _ = events(contact)
    projector.handle(one)
    container.upsert_item(
        {
            "id": held_id(2),
            "partitionKey": contact,
            "type": HELD_TYPE,
            "missingVersion": 1,
            "ttl": -1,
            "event": {"id": two.event_id, "type": two.type, "version": 2, "data": dict(two.data)},
        }
    )
    result = projector.handle(three)
    assert (result.outcome, result.applied) == (Outcome.APPLIED, [3])
    assert container.read_item(contact, partition_key=contact)["version"] == 3
    assert documents(container, contact, HELD_TYPE) == []


# ---- reads (the HTTP routes' port) on Cosmos ----------------------------------------------


def test_the_reads_give_a_projection_as_viewed_and_nothing_for_other_documents(
    container: ContainerProxy,
    aio_store: tuple[AsyncCosmosDocumentStore, asyncio.Runner],
) -> None:
    store, loop = aio_store
    projector = Projector(container, ContactProjection(), inbox_ttl_seconds=3600)
    contact = str(uuid.uuid4())
    one, two, *_ = events(contact)
    projector.handle(one)
    projector.handle(two)
    reads = StoreProjectionReads(store)
    found = loop.run(reads.get(contact))
    assert found is not None and found.model_dump(by_alias=True) == {
        "id": contact,
        "version": 2,
        "lastEventId": two.event_id,
        "deleted": False,
        "data": {
            "name": {"firstName": "A", "lastName": "L"},
            "email": "b@example.com",
            "description": "d",
            "company": {"companyName": "C"},
        },
    }
    assert loop.run(reads.get(inbox_id(one.event_id))) is None  # another partition: not found
    assert loop.run(reads.get(str(uuid.uuid4()))) is None


def test_the_reads_page_through_every_projection_once(
    container: ContainerProxy,
    aio_store: tuple[AsyncCosmosDocumentStore, asyncio.Runner],
) -> None:
    store, loop = aio_store
    projector = Projector(container, ContactProjection(), inbox_ttl_seconds=3600)
    contacts = sorted(str(uuid.uuid4()) for _ in range(5))
    for contact in contacts:
        projector.handle(events(contact)[0])
    reads = StoreProjectionReads(store)
    seen: list[str] = []
    page = loop.run(reads.page(size=2, continuation=None))
    while True:
        assert len(page.items) <= 2
        seen += [item.id for item in page.items]
        if page.continuation_token is None:
            break
        page = loop.run(reads.page(size=2, continuation=page.continuation_token))
    assert sorted(seen) == contacts
