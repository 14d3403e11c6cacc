"""The processor through the Cosmos DB adapter, on funcstack's endpoint and the unmodified SDK:
what only a server proves -- each flavour end to end (several instances, several physical
partitions, checkpoints of the service's etags, leases released at a stop), a live split the SDK
answers from the children, and an instance whose SDK routing map predates a split. The
processor's behaviour itself is held in-process, on the in-memory feed (``test_processing``).
Short lease intervals (a second or two) keep each test to seconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypedDict

import pytest
import pytest_asyncio
from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.aio import ContainerProxy as AsyncContainerProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from deadlines import LOOPBACK, SHORT
from inprocess import in_order_per_partition_key

from cosmos_changefeed import ChangeFeedProcessor, Lease, LeaseContext, lease_prefix
from cosmos_changefeed._ranges import EpkRange
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]


class Intervals(TypedDict):
    poll_delay: float
    lease_acquire_interval: float
    lease_renew_interval: float
    lease_expiration_interval: float


FAST = Intervals(
    poll_delay=0.1,
    lease_acquire_interval=0.3,
    lease_renew_interval=0.5,
    lease_expiration_interval=2.0,
)


class Delivered:
    """What the handlers were given, in the order they were given it. ``owner_of`` (aio: a
    lease token, its owner as the lease container says): the batches given to the lease's
    owner are told apart from a former owner's batch in flight after a steal, which is given
    but not checkpointed (``owners_positions``; as ``inprocess.Delivered``)."""

    def __init__(self, owner_of: Callable[[str], Awaitable[str | None]] | None = None) -> None:
        self.batches: list[tuple[LeaseContext, list[dict[str, Any]]]] = []
        self.owner_of = owner_of
        #: Each lease's continuation after the last batch given to its owner at the time.
        self.owners_positions: dict[str, str | None] = {}

    async def handler(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        owner = await self.owner_of(context.lease_token) if self.owner_of is not None else None
        self.batches.append((context, changes))
        if owner == context.instance_name:
            self.owners_positions[context.lease_token] = context.continuation

    def sync_handler(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        self.batches.append((context, changes))

    @property
    def ids(self) -> set[str]:
        return {doc["id"] for _, changes in self.batches for doc in changes}

    def assert_in_order_per_partition_key(self) -> None:
        in_order_per_partition_key(self.batches)


async def eventually(condition: Callable[[], bool], within: float = SHORT) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.05)


def leases_of(container: ContainerProxy) -> list[Lease]:
    return [
        Lease.from_document(doc)
        for doc in container.query_items("SELECT * FROM c", enable_cross_partition_query=True)
        if "LeaseToken" in doc
    ]


@pytest_asyncio.fixture
async def aio(cosmos: CosmosEndpoint) -> AsyncIterator[AsyncCosmosClient]:
    async with AsyncCosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options()) as client:
        yield client


def aio_of(client: AsyncCosmosClient, container: ContainerProxy) -> AsyncContainerProxy:
    database = container.container_link.split("/")[1]
    return client.get_database_client(database).get_container_client(container.id)


def write(container: ContainerProxy, keys: int, per_key: int, *, start: int = 0) -> list[str]:
    ids: list[str] = []
    for seq in range(start, start + per_key):
        for key in range(keys):
            ids.append(f"k{key}-{seq}")
            container.create_item({"id": ids[-1], "pk": f"k{key}", "seq": seq})
    return ids


@pytest.mark.asyncio
async def test_two_instances_deliver_every_change_in_order_per_key_and_checkpoint_it(
    aio: AsyncCosmosClient, make_container: MakeContainer
) -> None:
    monitored, leases = make_container(4), make_container(path="/id")
    aio_leases = aio_of(aio, leases)

    async def owner_of(token: str) -> str | None:
        lease_id = f"{processors[0].lease_prefix}..{token}"
        return Lease.from_document(await aio_leases.read_item(lease_id, lease_id)).owner

    delivered = Delivered(owner_of)
    processors = [
        AsyncChangeFeedProcessor(
            aio_of(aio, monitored),
            aio_leases,
            processor_name="orders",
            instance_name=f"instance-{i}",
            handler=delivered.handler,
            max_items=7,
            **FAST,
        )
        for i in range(2)
    ]
    for processor in processors:
        await processor.start()
    try:
        for processor in processors:
            await processor.wait_until_listening()
        ids = write(monitored, keys=12, per_key=10)
        await eventually(lambda: delivered.ids >= set(ids))
        await eventually(  # two each (equal partitions), every lease held
            lambda: (
                [len(p.owned_leases) for p in processors] == [2, 2]
                and sorted(t for p in processors for t in p.owned_leases) == ["0", "1", "2", "3"]
            )
        )
    finally:
        for processor in processors:
            await processor.stop()
    delivered.assert_in_order_per_partition_key()
    assert all(len(changes) <= 7 for _, changes in delivered.batches)
    stored = sorted(leases_of(leases), key=lambda lease: lease.lease_token)
    assert [lease.lease_token for lease in stored] == ["0", "1", "2", "3"]
    assert all(lease.version == 0 and lease.owner is None for lease in stored), "not released"
    # each lease's checkpoint is the etag of the last batch its owner was given (a former
    # owner's batch in flight after a steal may come later: test_processing's stolen lease)
    assert {lease.lease_token: lease.continuation for lease in stored} == (
        delivered.owners_positions
    )


@pytest.mark.asyncio
async def test_a_live_split_replaces_the_lease_by_version_0_children_that_start_where_it_was(
    aio: AsyncCosmosClient, make_container: MakeContainer, cosmos: CosmosEndpoint
) -> None:
    monitored, leases = make_container(2), make_container(path="/id")
    database = monitored.container_link.split("/")[1]
    delivered = Delivered()
    processor = AsyncChangeFeedProcessor(
        aio_of(aio, monitored),
        aio_of(aio, leases),
        processor_name="p",
        instance_name="only",
        handler=delivered.handler,
        max_items=5,
        **FAST,
    )
    async with processor:
        await processor.wait_until_listening()
        before = write(monitored, keys=10, per_key=3)
        await eventually(lambda: delivered.ids >= set(before))
        children = cosmos.split(database, monitored.id, "0")
        after = write(monitored, keys=10, per_key=3, start=3)
        await eventually(lambda: delivered.ids >= set(before) | set(after))
        await eventually(lambda: processor.owned_leases == sorted(["1", *children]))
    delivered.assert_in_order_per_partition_key()
    stored = {lease.lease_token: lease for lease in leases_of(leases)}
    assert sorted(stored) == sorted(["1", *children])
    ranges = {p.id: p for p in cosmos.physical_partitions(database, monitored.id)}
    for child in children:
        lease = stored[child]
        assert lease.version == 0 and lease.continuation
        assert lease.feed_range is not None
        assert (lease.feed_range.min, lease.feed_range.max) == (
            ranges[child].min_inclusive,
            ranges[child].max_exclusive,
        )


def test_the_sync_processor_checkpoints_after_the_handler_and_releases_at_a_stop(
    make_container: MakeContainer,
) -> None:
    monitored, leases = make_container(2), make_container(path="/id")
    delivered = Delivered()
    with ChangeFeedProcessor(
        monitored,
        leases,
        processor_name="p",
        instance_name="sync",
        handler=delivered.sync_handler,
        **FAST,
    ) as processor:
        processor.wait_until_listening(LOOPBACK)
        ids = write(monitored, keys=6, per_key=4)
        deadline = time.monotonic() + SHORT
        while not delivered.ids >= set(ids):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert processor.owned_leases == ["0", "1"]
    delivered.assert_in_order_per_partition_key()
    stored = leases_of(leases)
    assert all(lease.owner is None and lease.continuation for lease in stored)


def test_an_instance_whose_routing_map_predates_a_split_takes_a_child_lease_as_it_is(
    cosmos: CosmosEndpoint, make_container: MakeContainer
) -> None:
    """An instance paused through a split (its SDK's routing map still the parent's) steals a
    child lease: the child is read, not taken for gone and "merged" into an EPK lease."""
    monitored, leases = make_container(1), make_container(path="/id")
    database = monitored.container_link.split("/")[1]
    stale = CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())
    stale_monitored = stale.get_database_client(database).get_container_client(monitored.id)
    list(stale_monitored.read_feed_ranges())  # the routing map, cached before the split
    write(monitored, keys=8, per_key=1)
    children = cosmos.split(database, monitored.id, "0")
    prefix = lease_prefix("p", cosmos.endpoint, monitored.read()["_rid"])
    for child in cosmos.physical_partitions(database, monitored.id):
        leases.create_item(
            Lease(
                id=f"{prefix}..{child.id}",
                lease_token=child.id,
                feed_range=EpkRange(child.min_inclusive, child.max_exclusive),
            ).to_document()
        )
    leases.create_item({"id": f"{prefix}.info"})
    delivered = Delivered()
    with ChangeFeedProcessor(
        stale_monitored,
        leases,
        processor_name="p",
        instance_name="stale",
        handler=delivered.sync_handler,
        start_from="beginning",
        **FAST,
    ) as processor:
        processor.wait_until_listening(LOOPBACK)
        deadline = time.monotonic() + SHORT
        while len(delivered.ids) < 8:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert processor.owned_leases == sorted(children)
    assert sorted(lease.lease_token for lease in leases_of(leases)) == sorted(children)
    assert all(lease.version == 0 for lease in leases_of(leases))
