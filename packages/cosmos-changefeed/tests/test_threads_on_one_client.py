"""The sync processor's threads on one azure-cosmos client (README, "Threading").

azure-cosmos 4.x's sync client writes the throttle headers of each request into
``client_connection.last_response_headers``, the headers object of the request that ended last
on any thread; a query copying its own headers, or a hook reading them, meanwhile fails with
``RuntimeError: OrderedDict mutated during iteration`` (``cosmos_changefeed._shared_headers``).
The first test pins the SDK's behaviour (when a release stops sharing the object it fails, and
the workaround can go); the second drives the package's reads through one client from threads
with a tiny switch interval, where the raw SDK's queries fail, and none of the package's may.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from azure.cosmos import ContainerProxy
from deadlines import LONG, LOOPBACK, SHORT

from cosmos_changefeed._cosmos_store import CosmosLeaseStore
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._leases import Lease

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]
THROTTLE_COUNT = "x-ms-throttle-retry-count"


def test_azure_cosmos_writes_another_threads_request_into_a_querys_headers(
    make_container: MakeContainer,
) -> None:
    container = make_container(1)
    container.create_item({"id": "a", "pk": "p"})
    in_hook, other_done = threading.Event(), threading.Event()
    seen: list[Mapping[str, Any]] = []

    def hold(headers: Mapping[str, Any], _result: Any) -> None:
        if not seen:
            assert THROTTLE_COUNT not in headers  # a response's own headers do not have it
            seen.append(headers)
            in_hook.set()
            assert other_done.wait(LOOPBACK)

    def query() -> None:
        list(container.query_items("SELECT * FROM c", partition_key="p", response_hook=hold))

    querying = threading.Thread(target=query)
    querying.start()
    assert in_hook.wait(SHORT), "the query's response_hook was not called"
    container.read_item("a", partition_key="p")  # another thread's request ends meanwhile
    other_done.set()
    querying.join(SHORT)
    assert THROTTLE_COUNT in seen[0], (
        "azure-cosmos no longer writes another request's throttle headers into a query's own "
        "headers: cosmos_changefeed._shared_headers' workaround may go"
    )


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    """Threads switch as often as CPython can: the race's window, met in seconds, not hours."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_the_packages_reads_survive_threads_sharing_one_client(
    make_container: MakeContainer, tiny_switch_interval: None
) -> None:
    monitored, leases = make_container(1), make_container(1, path="/id")
    for i in range(5):
        monitored.create_item({"id": str(i), "pk": "p"})
        leases.create_item({"id": f"race..{i}", "LeaseToken": str(i)})
    source, store = CosmosFeedSource(monitored), CosmosLeaseStore(leases)
    (only,) = source.ranges()
    lease = Lease(id="race..0", lease_token=only.id, feed_range=only.range)
    errors: Counter[str] = Counter()
    rounds = 150

    def package_reads() -> None:
        for _ in range(rounds):
            try:
                assert len(source.read(lease, None, "Beginning").items) == 5
                assert len(store.list_documents("race..")) == 5
            except RuntimeError as exc:
                errors[f"the package: {exc}"] += 1

    def sdk_queries() -> None:  # beside them, what the package would meet without its guard
        for _ in range(rounds):
            try:
                list(leases.query_items("SELECT * FROM c", enable_cross_partition_query=True))
            except RuntimeError:
                errors["azure-cosmos alone"] += 1

    def point_reads() -> None:  # each request's end writes into the shared headers
        for _ in range(3 * rounds):
            monitored.read_item("1", partition_key="p")

    workers = [threading.Thread(target=w) for w in (package_reads, sdk_queries) * 3]
    workers += [threading.Thread(target=point_reads) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(LONG)
        assert not worker.is_alive(), f"{worker.name} not done within {LONG:g} s"
    print(f"errors met: {dict(errors) or 'none'}")
    assert not [e for e in errors if e.startswith("the package")], errors
