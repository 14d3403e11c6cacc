"""The lease store on the local Cosmos DB endpoint, through the SDK: conditional updates (a
checkpoint or renewal after another instance took the lease is refused; a concurrent change by
the owner itself is retried on the server's copy), the store's ``.info``/``.lock``, and a lease
replaced by child leases when its physical partition splits: in the processor's schema, each
reading on from where the parent was, only its own part; only the lease's owner splits it."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient, DatabaseProxy

from funcstack.functions_host._cosmos_trigger import continuation as continuations
from funcstack.functions_host._cosmos_trigger.lease_split import PartitionSynchronizer
from funcstack.functions_host._cosmos_trigger.lease_store import LeaseLostError, LeaseStore

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
            client = CosmosClient(
                cosmos.endpoint, credential=cosmos.key, connection_verify=cosmos.verify_tls
            )
            name = f"store-{uuid.uuid4().hex[:8]}"
            database = await client.create_database_if_not_exists(name)
            try:
                await scenario(
                    await database.create_container_if_not_exists(
                        "leases", partition_key=PartitionKey(path="/id"), default_ttl=-1
                    )
                )
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
    assert (
        mine.owner == "one"
        and mine.doc["version"] == 1
        and mine.doc["Mode"] == ("Incremental feed")
    )
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


#: The keys of a lease document (``DocumentServiceLeaseCoreEpk``) besides the service's own.
LEASE_KEYS = {
    "id",
    "version",
    "LeaseToken",
    "FeedRange",
    "Owner",
    "ContinuationToken",
    "timestamp",
    "properties",
    "Mode",
}


async def page_ids(
    monitored: ContainerProxy, continuation: str | None, feed_range: dict[str, Any] | None = None
) -> tuple[list[str], str]:
    """Read the change feed to its end from ``continuation`` (None: ``feed_range`` from the
    beginning) as the trigger reads a lease: the ids, and the continuation to go on from."""
    ids: list[str] = []
    while True:
        kwargs: dict[str, Any] = {"max_item_count": 5}
        if continuation:
            kwargs["continuation"] = continuation
        else:
            kwargs.update(feed_range=feed_range, start_time="Beginning")
        pages = monitored.query_items_change_feed(**kwargs).by_page()
        try:
            page = [item async for item in await pages.__anext__()]
        except StopAsyncIteration:  # nothing new: the continuation is in the etag
            page = []
        if not page:
            token = monitored.client_connection.last_response_headers["etag"]
            return ids, str(token)
        ids += [str(item["id"]) for item in page]
        continuation = str(pages.continuation_token)  # type: ignore[attr-defined]


def test_a_lease_whose_partition_split_is_replaced_by_children_that_read_on_from_it(
    cosmos: Cosmos,
) -> None:
    """A lease of the container's one physical partition has read every change; the
    partition splits and more changes come; the lease's next read goes on in the children
    (the SDK met the 410) and its continuation names both. The lease is replaced by two child
    leases in the processor's schema, with the parent's properties, each reading its own part
    from where the parent was: together, every later change once, none of the earlier ones."""

    async def main() -> None:
        name = f"split-{uuid.uuid4().hex[:8]}"
        async with CosmosClient(
            cosmos.endpoint, credential=cosmos.key, connection_verify=cosmos.verify_tls
        ) as client:
            database = await client.create_database(name)
            try:
                await split_and_read_on(cosmos, name, database)
            finally:
                await client.delete_database(name)

    asyncio.run(main())


async def split_and_read_on(cosmos: Cosmos, name: str, database: DatabaseProxy) -> None:
    monitored = await database.create_container("contacts", partition_key=PartitionKey("/pk"))
    leases = await database.create_container(
        "leases", partition_key=PartitionKey("/id"), default_ttl=-1
    )
    store = LeaseStore(leases, "acct_db_coll", "one")
    [whole] = [feed_range async for feed_range in monitored.read_feed_ranges()]
    created = await store.create_if_missing(whole)
    assert created is not None
    created.doc["properties"] = {"note": "kept by the children"}
    lease = await store.acquire(created)
    keys = [f"k{i:02d}" for i in range(24)]
    for key in keys:
        await monitored.create_item({"id": f"{key}-0", "pk": key})
    earlier, position = await page_ids(monitored, None, whole)
    assert sorted(earlier) == sorted(f"{key}-0" for key in keys)
    lease = await store.checkpoint(lease, position)

    assert len(await asyncio.to_thread(cosmos.split, name, "contacts")) == 2
    for key in keys:
        await monitored.create_item({"id": f"{key}-1", "pk": key})
    pages = monitored.query_items_change_feed(continuation=position, max_item_count=5).by_page()
    read_by_parent = [str(item["id"]) async for item in await pages.__anext__()]
    last = str(pages.continuation_token)  # type: ignore[attr-defined]
    assert read_by_parent and len(continuations.ranges(last)) == 2  # the SDK went on in both

    async def feed_ranges() -> list[dict[str, Any]]:
        return [rng async for rng in monitored.read_feed_ranges(force_refresh=True)]

    children = await PartitionSynchronizer(store, feed_ranges, name="t").handle_partition_gone(
        lease, last
    )
    assert children is not None and len(children) == 2
    stored = await store.all_leases()
    assert [c.id for c in stored] == sorted(c.id for c in children)  # the parent is gone
    ranges = [rng["Range"] async for rng in monitored.read_feed_ranges()]
    assert [
        (c.doc["FeedRange"]["Range"]["min"], c.doc["FeedRange"]["Range"]["max"]) for c in stored
    ] == [(r["min"], r["max"]) for r in ranges]
    for child in stored:
        rng = child.doc["FeedRange"]["Range"]
        assert {k for k in child.doc if not k.startswith("_")} == LEASE_KEYS
        assert child.id == f"acct_db_coll..{rng['min']}-{rng['max']}"
        assert child.doc["LeaseToken"] == f"{rng['min']}-{rng['max']}"
        assert child.doc["version"] == 1 and child.doc["Mode"] == "Incremental feed"
        assert (rng["isMinInclusive"], rng["isMaxInclusive"]) == (True, False)
        assert child.owner is None and child.doc["properties"] == {"note": "kept by the children"}
        state = json.loads(base64.b64decode(str(child.continuation)))
        assert state["continuation"]["Range"] == rng  # cut to its own range
        assert [entry["range"] for entry in state["continuation"]["continuation"]] == [rng]

    read_by_children = [await page_ids(monitored, child.continuation) for child in stored]
    later = [*read_by_parent, *(i for ids, _ in read_by_children for i in ids)]
    assert sorted(later) == sorted(f"{key}-1" for key in keys)  # each once, nothing earlier
    first, second = ({i.split("-")[0] for i in ids} for ids, _ in read_by_children)
    assert not first & second  # each child its own keys


def test_only_the_leases_owner_splits_it_and_a_race_is_settled_by_if_match(
    on_leases: Callable[[Scenario], None],
) -> None:
    on_leases(split_races)


async def split_races(leases: ContainerProxy) -> None:
    """An instance paused past the expiry wakes up and meets the split: the lease is
    another's now, so its split is refused before anything is created. The new owner's split
    whose parent another instance wrote meanwhile does not delete it (412); its children stay,
    and the next split of the parent finds them and deletes it."""
    one, two = LeaseStore(leases, "acct_db_coll", "one"), LeaseStore(leases, "acct_db_coll", "two")
    halves = [
        {"Range": {"min": "", "max": "20", "isMinInclusive": True, "isMaxInclusive": False}},
        {"Range": {"min": "20", "max": "FF", "isMinInclusive": True, "isMaxInclusive": False}},
    ]

    async def two_ranges() -> list[dict[str, Any]]:
        return halves

    created = await one.create_if_missing(FULL)
    assert created is not None
    as_one_saw_it = await one.acquire(created)
    taken = await two.acquire(as_one_saw_it)  # expired, say: taken by two
    with pytest.raises(LeaseLostError, match="taken over by owner 'two'"):
        await PartitionSynchronizer(one, two_ranges, name="t").handle_partition_gone(
            as_one_saw_it, None
        )
    assert [(lease.token, lease.owner) for lease in await one.all_leases()] == [("-FF", "two")]

    renewed = await two.renew(taken)  # the parent written after the split read it
    with pytest.raises(LeaseLostError, match="written by another instance while it was split"):
        await two.replace_with_children(taken, halves)
    assert [lease.token for lease in await two.all_leases()] == ["-20", "-FF", "20-FF"]
    children = await PartitionSynchronizer(two, two_ranges, name="t").handle_partition_gone(
        renewed, None
    )
    assert children == []  # created by the first try
    assert [lease.token for lease in await two.all_leases()] == ["-20", "20-FF"]
