"""The lease store on the local Cosmos DB endpoint, through the SDK: conditional updates (a
checkpoint or renewal after another instance took the lease is refused; a concurrent change by
the owner itself is retried on the server's copy), the store's ``.info``/``.lock``, and a lease
replaced by child leases carrying its continuation (what a partition split does)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient

from funcstack.functions_host._cosmos_lease_store import LeaseLostError, LeaseStore

from .test_cosmos_trigger import Cosmos, cosmos

pytestmark = pytest.mark.integration
__all__ = ["cosmos"]

FULL = {"Range": {"min": "", "max": "FF", "isMinInclusive": True, "isMaxInclusive": False}}


Scenario = Callable[[ContainerProxy], Awaitable[None]]


@pytest.fixture
def on_leases(cosmos: Cosmos) -> Callable[[Scenario], None]:
    """Run a scenario on a lease container of its own (partition key /id, TTL on)."""
    def run(scenario: Scenario) -> None:
        async def main() -> None:
            client = CosmosClient(cosmos.endpoint, credential=cosmos.key,
                                  connection_verify=cosmos.verify_tls)
            name = f"store-{uuid.uuid4().hex[:8]}"
            database = await client.create_database_if_not_exists(name)
            try:
                await scenario(await database.create_container_if_not_exists(
                    "leases", partition_key=PartitionKey(path="/id"), default_ttl=-1))
            finally:
                await client.delete_database(name)
                await client.close()

        asyncio.run(main())

    return run


def test_a_checkpoint_after_another_instance_took_the_lease_is_refused(
    on_leases: Callable[[Scenario], None],
) -> None:
    on_leases(checkpoint_after_a_takeover)


async def checkpoint_after_a_takeover(leases: ContainerProxy) -> None:
    one, two = LeaseStore(leases, "acct_db_coll", "one"), LeaseStore(leases, "acct_db_coll", "two")
    created = await one.create_if_missing(FULL)
    assert created is not None and await two.create_if_missing(FULL) is None  # 409: exists
    mine = await one.acquire(created)
    assert mine.owner == "one" and mine.doc["version"] == 1 and mine.doc["Mode"] == (
        "Incremental feed")
    mine = await one.checkpoint(mine, "c1")
    renewed = await one.renew(mine)  # the owner's own change meanwhile: retried on its copy
    mine = await one.checkpoint(mine, "c2")
    assert mine.continuation == "c2" and renewed.etag != mine.etag
    taken = await two.acquire(mine)  # stolen: the owner it saw is still the owner
    assert taken.owner == "two" and taken.continuation == "c2"
    with pytest.raises(LeaseLostError, match="taken over by owner 'two'"):
        await one.checkpoint(mine, "c3")
    with pytest.raises(LeaseLostError, match="taken over by owner 'two'"):
        await one.renew(mine)
    with pytest.raises(LeaseLostError, match="already taken by 'two'"):
        await one.release(mine)  # not its own to release: left alone
    [stored] = await two.all_leases()
    assert (stored.owner, stored.continuation) == ("two", "c2")
    with pytest.raises(LeaseLostError, match="taken over by owner 'two'"):
        await one.acquire(mine)  # it saw itself as the owner; the owner is now another
    await two.release(taken)
    [released] = await two.all_leases()
    assert released.owner is None and released.continuation == "c2"


def test_the_store_is_initialised_by_the_instance_holding_its_lock(
    on_leases: Callable[[Scenario], None],
) -> None:
    on_leases(initialised_under_the_lock)


async def initialised_under_the_lock(leases: ContainerProxy) -> None:
    one, two = LeaseStore(leases, "acct_db_coll", "one"), LeaseStore(leases, "acct_db_coll", "two")
    assert not await one.is_initialized()
    assert await one.acquire_initialization_lock(30)
    assert not await two.acquire_initialization_lock(30)
    await one.mark_initialized()
    assert await one.release_initialization_lock()
    assert await two.is_initialized()
    assert await two.acquire_initialization_lock(1)  # free again; the ttl ends a lost one
    ids = {item["id"] async for item in leases.query_items("SELECT c.id FROM c")}
    assert ids == {"acct_db_coll.info", "acct_db_coll.lock"}


def test_a_split_lease_is_replaced_by_children_carrying_its_continuation(
    on_leases: Callable[[Scenario], None],
) -> None:
    on_leases(split)


async def split(leases: ContainerProxy) -> None:
    store = LeaseStore(leases, "acct_db_coll", "one")
    parent = await store.create_if_missing(FULL, "parent-continuation")
    assert parent is not None
    children = await store.replace_with_children(parent, [
        {"Range": {"min": "", "max": "3F"}}, {"Range": {"min": "3F", "max": "FF"}}])
    assert [(c.token, c.continuation) for c in children] == [
        ("-3F", "parent-continuation"), ("3F-FF", "parent-continuation")]
    assert [lease.id for lease in await store.all_leases()] == [
        "acct_db_coll..-3F", "acct_db_coll..3F-FF"]
