"""A stranger's mistakes, refused when the processor (or the estimator) is made, in both
flavours, each with a message that names what is wrong and the fix -- never met at run time,
never a change checkpointed unhandled (DESIGN §18). No server: a processor makes no request
when it is made, so the containers here are the SDK's own handles, never connected (the sync
client connects when it is made; its ``ContainerProxy`` is made here without one)."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
from collections.abc import Iterator
from typing import Any

import pytest
from azure.cosmos import ContainerProxy
from azure.cosmos.aio import ContainerProxy as AsyncContainerProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from cosmos_changefeed import (
    ChangeFeedEstimator,
    ChangeFeedProcessor,
    FailedBatch,
    Failure,
    InMemoryLeaseStore,
    LeaseContext,
)
from cosmos_changefeed.aio import ChangeFeedEstimator as AsyncChangeFeedEstimator
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor
from cosmos_changefeed.aio import InMemoryLeaseStore as AsyncInMemoryLeaseStore

ENDPOINT = "https://shop-account.documents.azure.com:443/"
#: The emulator's well-known key (a key, not a secret).
KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


@pytest.fixture
def orders() -> ContainerProxy:
    """A sync container handle that never connected (the constructor makes no request)."""
    return ContainerProxy(None, "dbs/shop", "orders")  # type: ignore[arg-type]


@pytest.fixture
def leases() -> ContainerProxy:
    return ContainerProxy(None, "dbs/shop", "leases")  # type: ignore[arg-type]


@pytest.fixture
def aio_client() -> Iterator[AsyncCosmosClient]:
    client = AsyncCosmosClient(ENDPOINT, KEY)  # makes no request until one is sent
    yield client
    asyncio.run(client.close())


@pytest.fixture
def aio_orders(aio_client: AsyncCosmosClient) -> AsyncContainerProxy:
    return aio_client.get_database_client("shop").get_container_client("orders")


@pytest.fixture
def aio_leases(aio_client: AsyncCosmosClient) -> AsyncContainerProxy:
    return aio_client.get_database_client("shop").get_container_client("leases")


def sync_handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
    pass


async def async_handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
    pass


class AsyncCallable:
    async def __call__(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        pass


class Handlers:
    async def handle(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        pass


def sync_processor(monitored: Any, leases: Any, **options: Any) -> ChangeFeedProcessor:
    given: dict[str, Any] = {"processor_name": "mailer", "instance_name": "host-1"}
    return ChangeFeedProcessor(monitored, leases, **given | {"handler": sync_handler} | options)


def aio_processor(monitored: Any, leases: Any, **options: Any) -> AsyncChangeFeedProcessor:
    given: dict[str, Any] = {"processor_name": "mailer", "instance_name": "host-1"}
    return AsyncChangeFeedProcessor(
        monitored, leases, **given | {"handler": async_handler} | options
    )


# -- the handler's kind -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "handler",
    [
        async_handler,
        functools.partial(async_handler),
        AsyncCallable(),
        Handlers().handle,
        functools.partial(functools.partial(AsyncCallable())),
    ],
    ids=["async-def", "partial", "async-call-object", "async-method", "partial-of-object"],
)
def test_the_sync_processor_refuses_a_handler_that_returns_a_coroutine(
    orders: ContainerProxy, leases: ContainerProxy, handler: Any
) -> None:
    with pytest.raises(TypeError, match=r"coroutine function.*cosmos_changefeed\.aio"):
        sync_processor(orders, leases, handler=handler)


@pytest.mark.parametrize(
    "handler",
    [sync_handler, functools.partial(sync_handler), lambda context, changes: None],
    ids=["def", "partial", "lambda"],
)
def test_the_aio_processor_refuses_a_plain_function_handler(
    aio_orders: AsyncContainerProxy, aio_leases: AsyncContainerProxy, handler: Any
) -> None:
    with pytest.raises(TypeError, match=r"not a coroutine function.*async def"):
        aio_processor(aio_orders, aio_leases, handler=handler)


def test_each_flavour_takes_its_own_kind_of_handler(
    orders: ContainerProxy,
    leases: ContainerProxy,
    aio_orders: AsyncContainerProxy,
    aio_leases: AsyncContainerProxy,
) -> None:
    sync_processor(orders, leases, handler=functools.partial(sync_handler))
    aio_processor(aio_orders, aio_leases, handler=AsyncCallable())
    aio_processor(aio_orders, aio_leases, handler=Handlers().handle)


def test_a_handler_that_cannot_take_a_context_and_the_changes_is_refused(
    orders: ContainerProxy, leases: ContainerProxy
) -> None:
    def changes_only(changes: list[dict[str, Any]]) -> None:  # .NET's handler shape
        pass

    with pytest.raises(TypeError, match=r"cannot be called with \(context, changes\)"):
        sync_processor(orders, leases, handler=changes_only)
    with pytest.raises(TypeError, match="must be a callable"):
        sync_processor(orders, leases, handler="handle")


def test_hooks_of_the_wrong_kind_or_shape_are_refused(
    orders: ContainerProxy,
    leases: ContainerProxy,
    aio_orders: AsyncContainerProxy,
    aio_leases: AsyncContainerProxy,
) -> None:
    async def acquired(token: str) -> None:
        pass

    with pytest.raises(TypeError, match=r"on_lease_acquired.*coroutine function"):
        sync_processor(orders, leases, on_lease_acquired=acquired)
    with pytest.raises(TypeError, match=r"on_lease_acquired.*without awaiting"):
        aio_processor(aio_orders, aio_leases, on_lease_acquired=acquired)
    # on_error takes one Failure since 1.0 (it took the token and the error)
    with pytest.raises(TypeError, match=r"on_error.*\(failure\)"):
        sync_processor(orders, leases, on_error=lambda token, error: None)
    sync_processor(orders, leases, on_error=lambda failure: None)


def test_set_aside_is_of_the_flavours_kind_and_its_count_needs_it(
    orders: ContainerProxy,
    leases: ContainerProxy,
    aio_orders: AsyncContainerProxy,
    aio_leases: AsyncContainerProxy,
) -> None:
    async def park(batch: FailedBatch) -> None:
        pass

    def park_now(batch: FailedBatch) -> None:
        pass

    with pytest.raises(TypeError, match=r"set_aside.*coroutine function"):
        sync_processor(orders, leases, set_aside=park)
    with pytest.raises(TypeError, match=r"set_aside.*not a coroutine function"):
        aio_processor(aio_orders, aio_leases, set_aside=park_now)
    with pytest.raises(ValueError, match="set_aside_after is given without set_aside"):
        sync_processor(orders, leases, set_aside_after=3)
    with pytest.raises(ValueError, match="set_aside_after"):
        sync_processor(orders, leases, set_aside=park_now, set_aside_after=0)
    assert sync_processor(orders, leases, set_aside=park_now).options.set_aside_after == 5


# -- the options, alone and together ----------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"lease_renew_interval": 60.0, "lease_expiration_interval": 60.0},
            "lease_renew_interval .* must be shorter than lease_expiration_interval",
        ),
        (
            {"lease_renew_interval": 30.0, "lease_expiration_interval": 20.0},
            "must be shorter than lease_expiration_interval",
        ),
        ({"lease_acquire_interval": 0}, "lease_acquire_interval must be more than 0"),
        ({"lease_acquire_interval": -1.0}, "lease_acquire_interval must be a finite"),
        ({"lease_acquire_interval": float("inf")}, "lease_acquire_interval must be a finite"),
        ({"lease_renew_interval": float("nan")}, "lease_renew_interval must be a finite"),
        ({"lease_expiration_interval": 0}, "lease_expiration_interval must be more than 0"),
        ({"poll_delay": -0.5}, "poll_delay must be a finite"),
        ({"max_items": 0}, "max_items must be positive"),
        ({"max_items": 2**31}, "at most 2147483647"),
        ({"processor_name": "orders/mailer"}, "which a Cosmos DB id cannot"),
        ({"instance_name": " "}, "instance_name is required"),
        ({"mode": "Incremental"}, "mode: 'LatestVersion' or 'AllVersionsAndDeletes'"),
        (
            {"max_retry_delay": 1.0, "poll_delay": 5.0},
            "max_retry_delay .* at least min_retry_delay",
        ),
        ({"max_retry_delay": 1.0, "min_retry_delay": 2.0}, "at least min_retry_delay"),
        ({"min_retry_delay": -1}, "min_retry_delay must be a finite"),
        (
            {"start_from": "beginning", "mode": "AllVersionsAndDeletes"},
            "only 'now'",
        ),
        ({"start_from": "latest"}, "'now', 'beginning', a datetime or a Continuation"),
        ({"start_from": dt.datetime(2026, 1, 1)}, "a time needs a time zone"),
    ],
)
def test_an_impossible_option_is_refused_naming_it(
    orders: ContainerProxy,
    leases: ContainerProxy,
    aio_orders: AsyncContainerProxy,
    aio_leases: AsyncContainerProxy,
    options: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        sync_processor(orders, leases, **options)
    with pytest.raises(ValueError, match=message):
        aio_processor(aio_orders, aio_leases, **options)


def test_an_empty_processor_name_is_the_functions_triggers_without_a_prefix(
    orders: ContainerProxy, leases: ContainerProxy
) -> None:
    """.NET refuses only a null name; the Functions trigger's processor without a
    leaseContainerPrefix is named "" -- its leases are this processor's."""
    assert sync_processor(orders, leases, processor_name="").processor_name == ""


@pytest.mark.parametrize(
    "options",
    [
        {"max_items": True},
        {"max_items": "100"},
        {"poll_delay": "5"},
        {"lease_expiration_interval": None},
        {"processor_name": None},
    ],
)
def test_an_option_of_the_wrong_type_is_refused(
    orders: ContainerProxy, leases: ContainerProxy, options: dict[str, Any]
) -> None:
    with pytest.raises(TypeError, match=next(iter(options))):
        sync_processor(orders, leases, **options)


def test_a_start_in_the_future_is_refused(
    orders: ContainerProxy, aio_orders: AsyncContainerProxy, aio_leases: AsyncContainerProxy
) -> None:
    tomorrow = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    with pytest.raises(ValueError, match="is in the future"):
        sync_processor(orders, InMemoryLeaseStore(), start_from=tomorrow)
    with pytest.raises(ValueError, match="is in the future"):
        aio_processor(aio_orders, aio_leases, start_from=tomorrow)
    # a time zone other than UTC is a time like another
    an_hour_ago = dt.datetime.now(dt.timezone(dt.timedelta(hours=5))) - dt.timedelta(hours=1)
    sync_processor(orders, InMemoryLeaseStore(), start_from=an_hour_ago)


# -- the containers and the lease store -------------------------------------------------------


def test_a_container_of_the_other_flavour_is_refused(
    orders: ContainerProxy,
    leases: ContainerProxy,
    aio_orders: AsyncContainerProxy,
    aio_leases: AsyncContainerProxy,
) -> None:
    with pytest.raises(TypeError, match=r"monitored container is azure\.cosmos\.aio"):
        sync_processor(aio_orders, leases)
    with pytest.raises(TypeError, match=r"lease container is azure\.cosmos\.aio"):
        sync_processor(orders, aio_leases)
    with pytest.raises(TypeError, match=r"monitored container is azure\.cosmos \(sync\)"):
        aio_processor(orders, aio_leases)
    with pytest.raises(TypeError, match=r"monitored container must be a ContainerProxy"):
        sync_processor("orders", leases)


def test_a_lease_store_of_the_other_flavour_is_refused(
    orders: ContainerProxy, aio_orders: AsyncContainerProxy
) -> None:
    with pytest.raises(TypeError, match=r"a sync lease store .*cosmos_changefeed\b"):
        aio_processor(aio_orders, InMemoryLeaseStore())
    with pytest.raises(TypeError, match=r"an? aio lease store .*cosmos_changefeed\.aio"):
        sync_processor(orders, AsyncInMemoryLeaseStore())
    aio_processor(aio_orders, AsyncInMemoryLeaseStore())


def test_the_monitored_container_cannot_hold_the_leases(
    orders: ContainerProxy, aio_orders: AsyncContainerProxy
) -> None:
    with pytest.raises(ValueError, match="lease container is the monitored container"):
        sync_processor(orders, orders)
    with pytest.raises(ValueError, match="lease container is the monitored container"):
        aio_processor(aio_orders, aio_orders)


# -- the estimator ----------------------------------------------------------------------------


def test_the_estimator_refuses_what_the_processor_refuses(
    orders: ContainerProxy,
    leases: ContainerProxy,
    aio_orders: AsyncContainerProxy,
    aio_leases: AsyncContainerProxy,
) -> None:
    with pytest.raises(ValueError, match="which a Cosmos DB id cannot"):
        ChangeFeedEstimator(orders, leases, processor_name="a#b")
    with pytest.raises(TypeError, match=r"monitored container is azure\.cosmos\.aio"):
        ChangeFeedEstimator(aio_orders, leases, processor_name="mailer")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"monitored container is azure\.cosmos \(sync\)"):
        AsyncChangeFeedEstimator(orders, aio_leases, processor_name="mailer")  # type: ignore[arg-type]
    tomorrow = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    with pytest.raises(ValueError, match=r"estimate_from: .* is in the future"):
        ChangeFeedEstimator(orders, leases, processor_name="mailer", estimate_from=tomorrow)
    with pytest.raises(ValueError, match="estimate_from: 'beginning', a datetime or None"):
        ChangeFeedEstimator(orders, leases, processor_name="mailer", estimate_from="now")  # type: ignore[arg-type]


# -- what the hooks are given -----------------------------------------------------------------


def test_a_failure_carries_the_batch_and_its_attempt() -> None:
    context = LeaseContext("0", {}, "mailer", "host-1", '"7"')
    batch = FailedBatch(context, [{"id": "a"}], 3, RuntimeError("boom"))
    assert Failure("0", batch.error, "handler", batch).attempt == 3
    assert Failure("0", RuntimeError("read"), "read").attempt == 0


def test_event_loop_is_not_needed_to_make_an_aio_processor(
    aio_orders: AsyncContainerProxy, aio_leases: AsyncContainerProxy
) -> None:
    """Made outside a loop (a module-level processor), it starts in the loop that starts it."""
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
    aio_processor(aio_orders, aio_leases)


def test_keep_start_that_is_not_a_bool_is_refused_naming_it() -> None:
    from cosmos_changefeed._options import ProcessorOptions

    with pytest.raises(TypeError, match=r"keep_start is True or False, not 'no'"):
        ProcessorOptions(processor_name="p", instance_name="i", keep_start="no")  # type: ignore[arg-type]
