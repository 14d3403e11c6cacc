"""Physical partitions and live splits through the asynchronous client (azure.cosmos.aio, whose
routing map cache is its own): a container of 4 partition key ranges, split while it is written
and read. The same guarantees as test_cosmos_partitions.py; run with asyncio.run."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient

from funcstack.cosmos import CosmosEndpoint

from .conftest import PK_PATH, doc, unique

pytestmark = [
    pytest.mark.integration,
    pytest.mark.conformance,
]

KEYS = [f"key-{i}" for i in range(8)]
WHOLE = {"Range": {"min": "", "max": "FF", "isMinInclusive": True, "isMaxInclusive": False}}


@asynccontextmanager
async def four_ranges(local: CosmosEndpoint) -> AsyncIterator[tuple[str, ContainerProxy]]:
    """A database's name and its container of 4 physical partitions."""
    async with CosmosClient(local.endpoint, local.key, **local.client_options()) as client:
        name = unique("db")
        database = await client.create_database(name)
        try:
            yield (
                name,
                await database.create_container(
                    unique("c"),
                    partition_key=PartitionKey(path=PK_PATH),
                    headers={"x-funcstack-physical-partitions": "4"},
                ),
            )
        finally:
            await client.delete_database(name)


def run(
    local: CosmosEndpoint,
    body: Callable[[ContainerProxy, Callable[[str | None], Awaitable[list[str]]]], Awaitable[None]],
) -> None:
    """Run ``body`` with a container of 4 ranges and a way to split one of them."""

    async def main() -> None:
        async with four_ranges(local) as (database, container):

            async def split(range_id: str | None = None) -> list[str]:
                return await asyncio.to_thread(local.split, database, container.id, range_id)

            await body(container, split)

    asyncio.run(main())


def range_of(container: ContainerProxy) -> str:
    return str(
        container.client_connection.last_response_headers["x-ms-documentdb-partitionkeyrangeid"]
    )


async def write(container: ContainerProxy, key: str, seq: int) -> str:
    await container.create_item(doc(f"{key}-{seq:04d}", key, seq=seq))
    return range_of(container)


async def read_change_feed(
    container: ContainerProxy, token: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """Pages from ``token`` (None: the beginning) until nothing is new; items, continuation."""
    if token is None:
        pages = container.query_items_change_feed(
            start_time="Beginning", max_item_count=25
        ).by_page()
    else:
        pages = container.query_items_change_feed(continuation=token, max_item_count=25).by_page()
    items = [item async for page in pages async for item in page]
    # a read that found nothing at all hands out no continuation: go on from the same one
    handed = pages.continuation_token  # type: ignore[attr-defined]
    return items, str(handed) if handed is not None else token


async def ranges(container: ContainerProxy) -> list[tuple[str, str]]:
    found = [
        (str(fr["Range"]["min"]), str(fr["Range"]["max"]))
        async for fr in container.read_feed_ranges(force_refresh=True)
    ]
    return sorted(found)


def test_the_change_feed_resumed_from_before_a_split_loses_and_repeats_nothing(
    local: CosmosEndpoint,
) -> None:
    async def body(
        container: ContainerProxy, split: Callable[[str | None], Awaitable[list[str]]]
    ) -> None:
        for key in KEYS:
            await write(container, key, 0)
        items, before_split = await read_change_feed(container, None)
        assert len(items) == len(KEYS)
        written: list[str] = []
        seen: list[dict[str, Any]] = []
        token = before_split
        for seq in range(1, 21):  # writes and reads interleaved; the split halfway
            for key in KEYS:
                await container.create_item(doc(f"{key}-{seq:04d}", key, seq=seq))
                written.append(f"{key}-{seq:04d}")
            if seq == 10:
                assert len(await split(None)) == 2
            if seq % 3 == 0:
                more, token = await read_change_feed(container, token)
                seen.extend(more)
        more, token = await read_change_feed(container, token)
        seen.extend(more)
        ids = [str(i["id"]) for i in seen]
        assert len(ids) == len(set(ids)) and sorted(ids) == sorted(written)
        per_key: dict[str, list[int]] = {}
        for item in seen:
            per_key.setdefault(str(item["partitionKey"]), []).append(int(item["seq"]))
        assert all(seqs == sorted(seqs) for seqs in per_key.values())
        assert token is not None
        state = json.loads(base64.b64decode(token))
        assert len(state["continuation"]["continuation"]) == 5  # both children read
        again, _ = await read_change_feed(container, before_split)
        assert sorted(str(i["id"]) for i in again) == sorted(written)

    run(local, body)


def test_a_query_paged_across_a_split_returns_every_document_once(local: CosmosEndpoint) -> None:
    async def body(
        container: ContainerProxy, split: Callable[[str | None], Awaitable[list[str]]]
    ) -> None:
        for seq in range(10):
            for key in KEYS:
                await write(container, key, seq)
        total = 10 * len(KEYS)
        pages = container.query_items(
            "SELECT * FROM c", feed_range=WHOLE, max_item_count=5
        ).by_page()
        first = [str(i["id"]) async for i in await pages.__anext__()]
        token = pages.continuation_token  # type: ignore[attr-defined]
        await container.read_item(first[0], partition_key=first[0].rsplit("-", 1)[0])
        await split(range_of(container))
        rest = [
            str(i["id"])
            async for page in container.query_items(
                "SELECT * FROM c", feed_range=WHOLE, max_item_count=5
            ).by_page(token)
            async for i in page
        ]
        assert len(first + rest) == len({*first, *rest}) == total
        ordered = [
            int(i["seq"]) async for i in container.query_items("SELECT * FROM c ORDER BY c.seq")
        ]
        assert ordered == sorted(ordered) and len(ordered) == total
        counts: list[Any] = [n async for n in container.query_items("SELECT VALUE COUNT(1) FROM c")]
        assert counts == [total]

    run(local, body)


def test_point_reads_batches_and_feed_ranges_after_a_split(local: CosmosEndpoint) -> None:
    async def body(
        container: ContainerProxy, split: Callable[[str | None], Awaitable[list[str]]]
    ) -> None:
        holders = {key: await write(container, key, 0) for key in KEYS}
        before = await ranges(container)
        assert len(before) == 4
        busiest = max(set(holders.values()), key=list(holders.values()).count)
        children = await split(busiest)
        after = await ranges(container)
        assert len(after) == 5 and len(set(before) - set(after)) == 1
        for key in (k for k, held in holders.items() if held == busiest):
            assert (await container.read_item(f"{key}-0000", partition_key=key))["seq"] == 0
            assert range_of(container) in children
            result = await container.execute_item_batch(
                [("create", (doc(f"{key}-0001", key, seq=1),))], partition_key=key
            )
            assert [r["statusCode"] for r in result] == [201]
            headers = container.client_connection.last_response_headers
            assert headers["x-ms-documentdb-partitionkeyrangeid"] in children
            assert str(headers["x-ms-session-token"]).split(":")[0] in children

    run(local, body)
