"""The backlog estimators on Cosmos DB (`CosmosBacklogEstimator`, `AsyncCosmosBacklogEstimator`)
through the SDK against the local endpoint, held to the same answers: a relay that has not run
shows its backlog (pending N, an oldest age that grows with the clock), which drains to 0 once
the relay runs in a Functions host (relay_app, hosted by funcstack's `funcstack_app`) and reads
from the lease it wrote; the Functions host's own leases (.NET etag continuations) are read; a
change that raised no event is not pending; a store that hangs is unavailable within the
client's timeouts."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason=(
        "funcstack in this interpreter (Python 3.13+) runs these tests: "
        "they host an app on funcstack's Functions host"
    ),
)

from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from azure_stack import DATABASE, TOPIC, CosmosWorld, verified
from deadlines import SHORT, DeadlineError, wait_for
from tickets import Ticket

from cosmos_changefeed import lease_prefix
from cosmos_outbox._relay.backlog import Backlog, report_backlog
from cosmos_outbox._sync_over_async import as_async, run_sync
from cosmos_outbox._write.idempotency import Answer, IdempotencyKey
from cosmos_outbox.cosmos import CosmosBacklogEstimator
from cosmos_outbox.cosmos._client import client_options
from cosmos_outbox.cosmos.aio import CosmosBacklogEstimator as AsyncCosmosBacklogEstimator
from cosmos_outbox.errors import StoreUnavailableError
from cosmos_outbox.ports import LeaseBacklog
from cosmos_outbox.telemetry import RelayTelemetry
from cosmos_outbox_testing.contracts import EventLoop
from funcstack import LocalStack
from funcstack.pytest_plugin import HostedApp

pytestmark = pytest.mark.integration
RELAY_APP = Path(__file__).parents[1] / "relay_app"
TTL = 864000
N = 5


def cosmos(stack: LocalStack, **options: Any) -> CosmosClient:
    return CosmosClient.from_connection_string(
        stack.cosmos_connection_string, **verified(stack), **options
    )


class Estimators:
    """The sync estimator and the `aio` one on the same containers (the `aio` one on the
    module's event loop)."""

    def __init__(
        self,
        stack: LocalStack,
        loop: EventLoop,
        monitored: str,
        leases: str,
        *,
        processor_name: str = "",
        **options: Any,
    ) -> None:
        self.loop = loop
        database = cosmos(stack, **options).get_database_client(DATABASE)
        self.sync = CosmosBacklogEstimator(
            database.get_container_client(monitored),
            database.get_container_client(leases),
            processor_name=processor_name,
        )

        async def connect() -> AsyncCosmosBacklogEstimator:
            client = loop.closing(
                AsyncCosmosClient.from_connection_string(
                    stack.cosmos_connection_string, **verified(stack), **options
                )
            )
            aio = client.get_database_client(DATABASE)
            return AsyncCosmosBacklogEstimator(
                aio.get_container_client(monitored),
                aio.get_container_client(leases),
                processor_name=processor_name,
            )

        self.aio = loop.run(connect())

    def estimate(self) -> list[LeaseBacklog]:
        """Both estimates, checked to be the same: the sync one."""
        found = self.sync.estimate()
        assert self.loop.run(self.aio.estimate()) == found
        return found

    def tick(self, **options: Any) -> Backlog:
        """One tick of the backlog timer (`report_backlog`), over each estimator, checked to
        report the same (at one time: now, unless `clock` says another): the sync API's. For
        a backlog that holds still (no relay running)."""
        now = time.time()
        options.setdefault("clock", lambda: now)
        backlog = self.sync_tick(**options)
        assert self.aio_tick(**options) == backlog
        return backlog

    def sync_tick(self, **options: Any) -> Backlog:
        return run_sync(
            report_backlog(
                as_async(self.sync),
                RelayTelemetry(destination=TOPIC),
                event_ttl_seconds=TTL,
                **options,
            )
        )

    def aio_tick(self, **options: Any) -> Backlog:
        backlog: Backlog = self.loop.run(
            report_backlog(
                self.aio, RelayTelemetry(destination=TOPIC), event_ttl_seconds=TTL, **options
            )
        )
        return backlog


def relay_lease_prefix(stack: LocalStack, monitored: ContainerProxy, name: str) -> str:
    """The lease ids' prefix of the processor `name` over `monitored` (.NET's: the name, the
    account's host, the database's and the container's resource ids)."""
    return lease_prefix(name, stack.cosmos_endpoint, str(monitored.read()["_rid"]))


def open_tickets(container: ContainerProxy, n: int) -> None:
    """`n` tickets opened, each in a transaction of its own (its event with it)."""
    service = CosmosWorld(container, ttl=TTL).service(Ticket)
    for i in range(n):
        service.create(Ticket.open(f"Printer {i} on fire"))


def test_the_backlog_while_the_relay_is_off_then_zero_once_it_runs(
    funcstack_services: LocalStack,
    funcstack_app: Callable[..., HostedApp],
    loop: EventLoop,
    fresh: str,
    leases: str,
) -> None:
    before = time.time()
    open_tickets(funcstack_services.container_client(DATABASE, fresh), N)
    estimators = Estimators(funcstack_services, loop, fresh, leases, processor_name="outbox.")

    # no lease yet (the relay never ran): estimated from the start of each feed range
    first = estimators.tick()
    assert first.pending == N  # one change (transaction) per opened ticket
    [lease] = first.leases
    assert lease.oldest_created_at is not None and lease.oldest_created_at >= before - 1
    t = lease.oldest_created_at
    later = estimators.tick(clock=lambda: t + 120)
    sooner = estimators.tick(clock=lambda: t + 60)
    assert later.pending == sooner.pending == N
    assert later.oldest_age_seconds == pytest.approx(sooner.oldest_age_seconds + 60)

    funcstack_app(RELAY_APP, settings={"COSMOS_CONTAINER": fresh, "COSMOS_LEASE_CONTAINER": leases})

    def caught_up() -> Backlog | None:
        ticked = estimators.sync_tick()
        return ticked if ticked.pending == 0 else None

    backlog = wait_for(caught_up, "the relay caught up: no backlog", every=0.2)
    for drained in (backlog, estimators.aio_tick()):  # the relay has caught up: both agree
        assert drained.pending == 0
        assert drained.oldest_age_seconds == 0
        [relayed] = drained.leases
        # now from the relay's lease: the same range, named by the .NET processor's token for
        # it, its partition key range id (before any lease, the estimate names the range so)
        assert (lease.lease, relayed.lease) == ("0", "0")
        assert relayed.owner is not None and relayed.checkpoint_at is not None


def test_functions_host_leases_with_etag_continuations_are_read(
    funcstack_services: LocalStack, loop: EventLoop, fresh: str, leases: str
) -> None:
    """The leases the Functions host (.NET change feed processor) writes in Azure: an etag
    continuation, on an EPK feed range (with a range id as its token)."""
    monitored = funcstack_services.container_client(DATABASE, fresh)
    open_tickets(monitored, 1)
    checkpoint = max(
        int(d["_lsn"]) for d in monitored.query_items_change_feed(start_time="Beginning")
    )
    lease_container = funcstack_services.container_client(DATABASE, leases)
    prefix = relay_lease_prefix(funcstack_services, monitored, "account_")
    lease_container.upsert_item({"id": f"{prefix}.info"})  # the store's, not a lease
    lease_container.upsert_item({"id": f"{prefix}.lock"})
    # another container's relay under the same prefix, in the same lease container: not this one's
    lease_container.upsert_item(
        {"id": "account_other.host_AAAAAA==_AAAAAAAAAAA=..0", "version": 1, "LeaseToken": "0"}
    )
    lease_container.upsert_item(
        {
            "id": f"{prefix}..0",
            "version": 1,
            "LeaseToken": "0",
            "ContinuationToken": f'"{checkpoint}"',
            "Owner": None,
            "timestamp": "2024-01-01T00:00:00Z",
            "FeedRange": {"Range": {"min": "", "max": "FF"}},
        }
    )
    open_tickets(monitored, 3)
    estimators = Estimators(funcstack_services, loop, fresh, leases, processor_name="account_")
    [backlog] = estimators.estimate()
    assert backlog.pending == 3
    assert backlog.lease == "0"
    assert (backlog.owner, backlog.checkpoint_at) == (None, "2024-01-01T00:00:00Z")


def test_a_change_that_raised_no_event_is_not_pending(
    funcstack_services: LocalStack, loop: EventLoop, fresh: str, leases: str
) -> None:
    """A write with an Idempotency-Key whose change raised no event records its answer in a
    transaction of its own: it is no event to relay, and the backlog does not count it."""
    monitored = funcstack_services.container_client(DATABASE, fresh)
    service = CosmosWorld(monitored, ttl=TTL).service(Ticket)
    key = IdempotencyKey[Ticket](
        scope="PATCH tickets/{id}",
        value="no-op",
        fingerprint="f",
        answer=lambda t: Answer(200, {"version": t.version}),
    )
    created = service.create(Ticket.open("Printer on fire"))
    service.change_idempotent(created.aggregate.id, lambda t: None, key=key)
    changes = list(monitored.query_items_change_feed(start_time="Beginning"))
    assert sorted(c["type"] for c in changes) == ["domainEvent", "idempotencyRecord", "ticket"]
    assert len({c["_lsn"] for c in changes}) == 2  # two transactions, one with an event
    [backlog] = Estimators(funcstack_services, loop, fresh, leases).estimate()
    assert backlog.pending == 1


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP) for the block, then resumed: an endpoint that hangs (the
    kernel still accepts connections on its socket; nothing answers)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_store_that_hangs_is_a_store_unavailable_error(
    funcstack_services: LocalStack, loop: EventLoop, fresh: str, leases: str
) -> None:
    """Translated at the adapter like every other read of the store (the status route answers
    503, not 500), within the client's timeouts (the library's `client_options`: 5 s, 2 s to
    connect and 3 to read): the sync estimate and the `aio` one, at once, while the endpoint
    hangs, each within SHORT (without those timeouts the SDK waits 65 s a read, and retries);
    no duration is asserted."""
    assert funcstack_services.cosmos is not None
    estimators = Estimators(funcstack_services, loop, fresh, leases, **client_options())
    estimators.estimate()

    async def aio_estimate() -> BaseException | None:
        try:
            await estimators.aio.estimate()
        except StoreUnavailableError as error:
            return error
        return None

    def sync_estimate() -> BaseException | None:
        try:
            estimators.sync.estimate()
        except StoreUnavailableError as error:
            return error
        return None

    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        with frozen(funcstack_services.cosmos.started().pid):
            aio = asyncio.run_coroutine_threadsafe(aio_estimate(), loop.loop)
            sync = pool.submit(sync_estimate)
            try:
                errors = (sync.result(SHORT), aio.result(SHORT))
            except concurrent.futures.TimeoutError:
                raise DeadlineError(
                    f"the estimates of a hung store not ended within {SHORT:g} s"
                ) from None
    finally:
        pool.shutdown(wait=False)
    assert [isinstance(error, StoreUnavailableError) for error in errors] == [True, True]
