"""``ChangeFeedEstimator.get_pending`` (sync and aio, the same answers): per lease, .NET's estimate
and the first pending changes themselves, read from the lease's checkpoint up to a number, with
whether that is all of them; a processor that never ran, read from where it would start; a lease
of another processor (or of the same name on another container) never read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import ContainerProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from deadlines import LOOPBACK, SHORT

from cosmos_changefeed import (
    ChangeFeedEstimator,
    ChangeFeedProcessor,
    LeaseContext,
    PendingChanges,
)
from cosmos_changefeed.aio import ChangeFeedEstimator as AsyncChangeFeedEstimator

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]


def write(monitored: ContainerProxy, prefix: str, n: int) -> set[str]:
    ids = {f"{prefix}{i}" for i in range(n)}
    for doc_id in sorted(ids):
        monitored.create_item({"id": doc_id, "pk": doc_id})
    return ids


def process_all(monitored: ContainerProxy, leases: ContainerProxy, ids: set[str]) -> None:
    """A processor named "relay" runs until it handled ``ids``, then stops (its leases keep
    their checkpoints, their owner cleared)."""
    seen: set[str] = set()

    def handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        seen.update(doc["id"] for doc in changes)

    with ChangeFeedProcessor(
        monitored,
        leases,
        processor_name="relay",
        instance_name="one",
        handler=handler,
        start_from="beginning",
        poll_delay=0.1,
        lease_acquire_interval=0.3,
    ) as processor:
        processor.wait_until_listening(LOOPBACK)
        deadline = time.monotonic() + SHORT
        while not seen >= ids:
            assert time.monotonic() < deadline, ids - seen
            time.sleep(0.05)


def both(
    cosmos: CosmosEndpoint,
    monitored: ContainerProxy,
    leases: ContainerProxy,
    max_changes: int,
    **options: Any,
) -> list[PendingChanges]:
    """The sync estimator's answer, checked equal to the aio one's (by lease)."""
    found = ChangeFeedEstimator(monitored, leases, **options).get_pending(max_changes)

    async def aio() -> list[PendingChanges]:
        async with AsyncCosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options()) as c:
            database = c.get_database_client(monitored.container_link.split("/")[1])
            return await AsyncChangeFeedEstimator(
                database.get_container_client(monitored.id),
                database.get_container_client(leases.id),
                **options,
            ).get_pending(max_changes)

    def key(p: PendingChanges) -> str:
        return p.lease_token

    def plain(items: list[PendingChanges]) -> list[tuple[Any, ...]]:
        return [
            (p.lease_token, p.estimated_lag, p.instance_name, [c["id"] for c in p.changes])
            for p in sorted(items, key=key)
        ]

    assert plain(asyncio.run(aio())) == plain(found)
    return sorted(found, key=key)


def test_the_first_pending_changes_of_each_lease_after_its_checkpoint(
    cosmos: CosmosEndpoint, make_container: MakeContainer
) -> None:
    monitored, leases = make_container(2), make_container(path="/id")
    process_all(monitored, leases, write(monitored, "early", 10))
    late = write(monitored, "late", 12)
    pending = both(cosmos, monitored, leases, 100, processor_name="relay")
    assert [p.lease_token for p in pending] == ["0", "1"]
    assert {c["id"] for p in pending for c in p.changes} == late  # none of the processed
    for p in pending:
        assert p.complete and p.lease is not None and p.lease.continuation
        # .NET's arithmetic: LSNs (funcstack numbers them per container, so a partition's
        # latest LSN may count another's changes too)
        assert p.estimated_lag >= len(p.changes) > 0
        assert p.instance_name is None  # released at the stop
    # .NET's estimate is the same figure
    estimates = ChangeFeedEstimator(monitored, leases, processor_name="relay").get_estimates()
    assert {s.lease_token: s.estimated_lag for s in estimates} == {
        p.lease_token: p.estimated_lag for p in pending
    }
    # at most `max_changes`, read page by page: then not all of them
    [fullest] = [p for p in pending if len(p.changes) == max(len(q.changes) for q in pending)][:1]
    cut = both(cosmos, monitored, leases, 2, processor_name="relay")
    again = next(p for p in cut if p.lease_token == fullest.lease_token)
    assert [c["id"] for c in again.changes] == [c["id"] for c in fullest.changes[:2]]
    assert not again.complete and again.estimated_lag == fullest.estimated_lag


def test_a_processor_that_never_ran_is_read_from_where_it_would_start(
    cosmos: CosmosEndpoint, make_container: MakeContainer
) -> None:
    monitored, leases = make_container(2), make_container(path="/id")
    ids = write(monitored, "d", 8)
    assert both(cosmos, monitored, leases, 100, processor_name="relay") == []  # .NET: nothing
    pending = both(
        cosmos, monitored, leases, 100, processor_name="relay", estimate_from="beginning"
    )
    assert [p.lease_token for p in pending] == ["0", "1"]  # the partition key ranges
    assert all(p.lease is None and p.complete for p in pending)
    assert {c["id"] for p in pending for c in p.changes} == ids
    assert sum(p.estimated_lag for p in pending) >= len(ids)


def test_only_this_processors_leases_on_this_container_are_read(
    cosmos: CosmosEndpoint, make_container: MakeContainer
) -> None:
    """The leases are found by the processor's whole prefix (.NET's: its name, the account's
    host, the database's and the container's resource ids): another container's leases under
    the same processor name, in the same lease container, are not this one's."""
    leases = make_container(path="/id")
    first, second = make_container(1), make_container(1)
    process_all(first, leases, write(first, "a", 3))
    process_all(second, leases, write(second, "b", 3))
    write(second, "c", 5)
    [only] = both(cosmos, first, leases, 100, processor_name="relay")
    assert only.changes == [] and only.estimated_lag == 0
    [other] = both(cosmos, second, leases, 100, processor_name="relay")
    assert len(other.changes) == 5
