"""Conformance through the asynchronous client (azure.cosmos.aio); run with asyncio.run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from azure.cosmos import PartitionKey, ThroughputProperties, exceptions
from azure.cosmos.aio import ContainerProxy, CosmosClient

from .conftest import PK_PATH, UNCHANGED, Target, doc, unique

pytestmark = [
    pytest.mark.integration,
    pytest.mark.conformance,
]


@asynccontextmanager
async def fresh_container(cosmos: Target) -> AsyncIterator[ContainerProxy]:
    client = CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())
    async with client:
        name = unique("db")
        db = await client.create_database_if_not_exists(name)
        try:
            yield await db.create_container_if_not_exists(
                unique("c"), partition_key=PartitionKey(path=PK_PATH), default_ttl=-1
            )
        finally:
            await client.delete_database(name)


def run(cosmos: Target, body: Callable[[ContainerProxy], Awaitable[None]]) -> None:
    async def main() -> None:
        async with fresh_container(cosmos) as container:
            await body(container)

    asyncio.run(main())


async def collect(items: AsyncIterator[dict[str, Any]]) -> list[str]:
    return [str(i["id"]) async for i in items]


def test_point_operations(cosmos: Target) -> None:
    async def body(container: ContainerProxy) -> None:
        created = await container.create_item(doc("a", "p1", v=1))
        assert (await container.read_item("a", partition_key="p1"))["v"] == 1
        with pytest.raises(exceptions.CosmosResourceExistsError):
            await container.create_item(doc("a", "p1"))
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            await container.read_item("missing", partition_key="p1")
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            await container.delete_item("missing", partition_key="p1")
        await container.replace_item(
            "a", doc("a", "p1", v=2), etag=created["_etag"], match_condition=UNCHANGED
        )
        with pytest.raises(exceptions.CosmosAccessConditionFailedError):
            await container.replace_item(
                "a",
                doc("a", "p1", v=3),
                etag=created["_etag"],
                match_condition=UNCHANGED,
            )
        await container.upsert_item(doc("b", "p2"))
        assert sorted(await collect(container.read_all_items())) == ["a", "b"]
        assert await collect(container.query_items("SELECT * FROM c", partition_key="p2")) == ["b"]

    run(cosmos, body)


def test_batch_success_and_atomic_failure(cosmos: Target) -> None:
    async def body(container: ContainerProxy) -> None:
        results = await container.execute_item_batch(
            batch_operations=[
                ("create", (doc("c1", "p1"),)),
                ("create", (doc("e1", "p1", ttl=600),)),
            ],
            partition_key="p1",
        )
        assert [r["statusCode"] for r in results] == [201, 201]
        with pytest.raises(exceptions.CosmosBatchOperationError) as err:
            await container.execute_item_batch(
                batch_operations=[
                    ("upsert", (doc("c1", "p1", v=2),)),
                    ("create", (doc("e1", "p1"),)),
                ],
                partition_key="p1",
            )
        assert err.value.error_index == 1
        assert [int(r["statusCode"]) for r in err.value.operation_responses] == [424, 409]
        assert "v" not in await container.read_item("c1", partition_key="p1")

    run(cosmos, body)


def test_change_feed(cosmos: Target) -> None:
    async def body(container: ContainerProxy) -> None:
        await container.create_item(doc("a", "p1"))
        await container.create_item(doc("b", "p2"))
        beginning = container.query_items_change_feed(start_time="Beginning")
        assert sorted(await collect(beginning)) == ["a", "b"]
        token = str(container.client_connection.last_response_headers["etag"])
        assert await collect(container.query_items_change_feed(continuation=token)) == []
        await container.upsert_item(doc("a", "p1", v=2))
        assert await collect(container.query_items_change_feed(continuation=token)) == ["a"]
        scoped = container.query_items_change_feed(partition_key="p2", start_time="Beginning")
        assert await collect(scoped) == ["b"]
        ranges = [r async for r in container.read_feed_ranges()]
        seen: list[str] = []
        for feed_range in ranges:
            seen += await collect(
                container.query_items_change_feed(feed_range=feed_range, start_time="Beginning")
            )
        assert sorted(seen) == ["a", "b"]

    run(cosmos, body)


def test_change_feed_pages_resume_from_page_continuation(cosmos: Target) -> None:
    async def read_range(container: ContainerProxy, feed_range: dict[str, Any]) -> list[str]:
        seen: list[str] = []
        kwargs: dict[str, Any] = {"feed_range": feed_range, "start_time": "Beginning"}
        for _ in range(10):
            pages = container.query_items_change_feed(max_item_count=2, **kwargs).by_page()
            try:
                page = [item async for item in await pages.__anext__()]
            except StopAsyncIteration:  # no more changes
                break
            assert len(page) <= 2
            seen += [str(i["id"]) for i in page]
            kwargs = {"continuation": pages.continuation_token}  # type: ignore[attr-defined]
        return seen

    async def body(container: ContainerProxy) -> None:
        for i in range(5):
            await container.create_item(doc(f"d{i}", "p1"))
        seen: list[str] = []
        async for feed_range in container.read_feed_ranges():
            seen += await read_range(container, feed_range)
        assert seen == [f"d{i}" for i in range(5)]

    run(cosmos, body)


def test_container_and_database_throughput_manual_and_autoscale(cosmos: Target) -> None:
    """Read and replace throughput through the asynchronous client: a container and a database,
    each with manual and with autoscale throughput."""

    async def main() -> None:
        client = CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())
        async with client:
            manual_db = await client.create_database(unique("db"), offer_throughput=400)
            auto_db = await client.create_database(
                unique("db"), offer_throughput=ThroughputProperties(auto_scale_max_throughput=4000)
            )
            try:
                assert (await manual_db.get_throughput()).offer_throughput == 400
                assert (await manual_db.replace_throughput(600)).offer_throughput == 600
                assert (await manual_db.get_throughput()).offer_throughput == 600
                assert (await auto_db.get_throughput()).auto_scale_max_throughput == 4000
                await auto_db.replace_throughput(
                    ThroughputProperties(auto_scale_max_throughput=5000)
                )
                assert (await auto_db.get_throughput()).auto_scale_max_throughput == 5000

                # containers of their own (in a database without shared throughput)
                plain = await client.create_database(unique("db"))
                try:
                    manual = await plain.create_container(
                        unique("c"), PartitionKey(PK_PATH), offer_throughput=500
                    )
                    assert (await manual.get_throughput()).offer_throughput == 500
                    assert (await manual.replace_throughput(900)).offer_throughput == 900
                    assert (await manual.get_throughput()).offer_throughput == 900
                    auto = await plain.create_container(
                        unique("c"),
                        PartitionKey(PK_PATH),
                        offer_throughput=ThroughputProperties(
                            auto_scale_max_throughput=1000, auto_scale_increment_percent=0
                        ),
                    )
                    assert (await auto.get_throughput()).auto_scale_max_throughput == 1000
                    await auto.replace_throughput(
                        ThroughputProperties(auto_scale_max_throughput=3000)
                    )
                    assert (await auto.get_throughput()).auto_scale_max_throughput == 3000
                finally:
                    await client.delete_database(plain)
            finally:
                await client.delete_database(manual_db)
                await client.delete_database(auto_db)

    asyncio.run(main())
