"""What a start checks with a round trip, on funcstack's Cosmos DB endpoint through the
unmodified SDK (the adapters' part: the in-process tests hold the rest): a missing database,
monitored container or lease container named -- its role, its name, its database, the fix --
where the SDK says ``(NotFound) NotFound``, in both flavours, for the processor and the
estimator, before any lease is written; a lease container without TTL warned of; and a start
from the continuation azure-cosmos's own pull model leaves."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import pytest
from azure.cosmos import ContainerProxy, DatabaseProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from running import FAST, wait

from cosmos_changefeed import (
    ChangeFeedEstimator,
    ChangeFeedProcessor,
    Continuation,
    LeaseContext,
    MissingResourceError,
)
from cosmos_changefeed.aio import ChangeFeedEstimator as AsyncChangeFeedEstimator
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]


def nothing(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
    pass


async def nothing_async(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
    pass


def both_fail(
    cosmos: CosmosEndpoint, database: str, monitored: str, leases: str
) -> list[MissingResourceError]:
    """The processor and the estimator, sync and aio, started on those names: their errors."""
    from azure.cosmos import CosmosClient

    client = CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())
    db = client.get_database_client(database)
    errors: list[MissingResourceError] = []
    sync = ChangeFeedProcessor(
        db.get_container_client(monitored),
        db.get_container_client(leases),
        processor_name="p",
        instance_name="i",
        handler=nothing,
    )
    with pytest.raises(MissingResourceError) as raised:
        sync.start()
    errors.append(raised.value)
    estimator = ChangeFeedEstimator(
        db.get_container_client(monitored), db.get_container_client(leases), processor_name="p"
    )
    with pytest.raises(MissingResourceError) as raised:
        estimator.get_estimates()
    errors.append(raised.value)

    async def aio() -> None:
        async with AsyncCosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options()) as c:
            adb = c.get_database_client(database)
            processor = AsyncChangeFeedProcessor(
                adb.get_container_client(monitored),
                adb.get_container_client(leases),
                processor_name="p",
                instance_name="i",
                handler=nothing_async,
            )
            with pytest.raises(MissingResourceError) as raised:
                await processor.start()
            errors.append(raised.value)
            estimator = AsyncChangeFeedEstimator(
                adb.get_container_client(monitored),
                adb.get_container_client(leases),
                processor_name="p",
            )
            with pytest.raises(MissingResourceError) as raised:
                await estimator.get_pending()
            errors.append(raised.value)

    asyncio.run(aio())
    return errors


def test_a_missing_monitored_container_is_named(
    cosmos: CosmosEndpoint, database: DatabaseProxy, make_container: MakeContainer
) -> None:
    leases = make_container(path="/id")
    errors = both_fail(cosmos, database.id, "ordres", leases.id)
    for error in errors:
        assert error.role == "monitored container" and not error.database_missing
        assert str(error).startswith(
            f"the monitored container 'ordres' does not exist in database '{database.id}'"
        )
    assert list(leases.query_items("SELECT * FROM c", enable_cross_partition_query=True)) == []


def test_a_missing_lease_container_is_named_with_how_to_make_it(
    cosmos: CosmosEndpoint, database: DatabaseProxy, make_container: MakeContainer
) -> None:
    monitored = make_container()
    for error in both_fail(cosmos, database.id, monitored.id, "leaces"):
        assert error.role == "lease container" and error.container == "leaces"
        assert 'partition_key=PartitionKey("/id"), default_ttl=-1' in str(error)


def test_a_missing_database_is_named(cosmos: CosmosEndpoint) -> None:
    name = f"shop-{uuid.uuid4().hex[:6]}"
    for error in both_fail(cosmos, name, "orders", "leases"):
        assert error.database_missing and error.database == name
        assert str(error).startswith(f"the database '{name}' of the monitored container 'orders'")


def test_a_lease_container_without_ttl_is_warned_of_at_the_start(
    make_container: MakeContainer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "cosmos_changefeed")
    monitored = make_container()
    for leases, warned in (
        (make_container(path="/id"), True),
        (make_container(ttl=True, path="/id"), False),
    ):
        caplog.clear()
        with ChangeFeedProcessor(
            monitored, leases, processor_name="p", instance_name="i", handler=nothing, **FAST
        ) as processor:
            processor.wait_until_listening(10)
        found = [r.getMessage() for r in caplog.records if "TTL off" in r.getMessage()]
        assert bool(found) == warned


def test_a_processor_starts_from_the_continuation_azure_cosmos_pull_model_leaves(
    make_container: MakeContainer,
) -> None:
    monitored, leases = make_container(2), make_container(path="/id", ttl=True)
    for i in range(6):
        monitored.create_item({"id": f"pulled{i}", "pk": f"k{i}"})
    pager = monitored.query_items_change_feed(start_time="Beginning").by_page()
    pulled = [doc["id"] for page in pager for doc in page]
    assert sorted(pulled) == [f"pulled{i}" for i in range(6)]
    saved = Continuation(str(cast(Any, pager).continuation_token))
    for i in range(4):
        monitored.create_item({"id": f"later{i}", "pk": f"k{i}"})
    seen: list[str] = []

    def handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        seen.extend(doc["id"] for doc in changes)

    with ChangeFeedProcessor(
        monitored,
        leases,
        processor_name="p",
        instance_name="i",
        handler=handler,
        start_from=saved,
        **FAST,
    ) as processor:
        processor.wait_until_listening(10)
        wait(lambda: len(seen) >= 4)
    assert sorted(seen) == [f"later{i}" for i in range(4)]
