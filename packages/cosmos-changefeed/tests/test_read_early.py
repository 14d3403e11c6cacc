"""The processor sends a lease's next read while the page before is parsed, on funcstack's
endpoint and the unmodified SDK: the read's raw response hook knows the page's etag before
azure-cosmos parses the body (``_reading.ReadHooks``), so the next request is on its way while
the page is parsed and handed over -- in the sync processor from a thread of its reading pool,
in the aio one as an eager task, written at once by a client that does not read the
environment. The application's own raw hooks, given to its client, still see every read (a
request's hook replaces the client's in azure-core: the read calls both). A feed source of the
application's own is read as the port says, without what only ``CosmosFeedSource.read`` takes."""

from __future__ import annotations

import asyncio
import ssl
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from azure.core.pipeline.transport import AioHttpTransport
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from deadlines import LOOPBACK, SHORT

from cosmos_changefeed import (
    ChangeFeedProcessor,
    FeedSource,
    InMemoryLeaseStore,
    Lease,
    LeaseContext,
    PartitionKeyRange,
)
from cosmos_changefeed._reading import Page, Start, is_change_feed_read
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor
from cosmos_changefeed.testing import InMemoryFeed, InMemoryFeedSource

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

MakeContainer = Callable[..., ContainerProxy]


#: The processors' options: one instance, pages of 5 changes.
EARLY: dict[str, Any] = {
    "processor_name": "early",
    "instance_name": "one",
    "start_from": "beginning",
    "max_items": 5,
    "poll_delay": 0.05,
}


def handled(seen: list[str], ids: list[str], deadline: float) -> bool:
    """Whether every change was handled (failing once ``deadline`` passed without)."""
    assert time.monotonic() < deadline or len(seen) >= len(ids), (
        f"{len(seen)} of {len(ids)} changes handled"
    )
    return len(seen) >= len(ids)


class Hooks:
    """An application's raw hooks on its client: each change feed request numbered; for each
    answer that holds changes, whether the request after the one it answers came before it was
    parsed (the first answer waits for it, ``LOOPBACK`` at most)."""

    def __init__(self) -> None:
        self.requests = 0
        self.answers: list[bool] = []
        self._lock = threading.Lock()
        self._sent = threading.Condition(self._lock)

    def request(self, request: Any) -> None:
        if is_change_feed_read(request.http_request):
            with self._sent:
                self.requests += 1
                request.context["change feed request"] = self.requests
                self._sent.notify_all()

    def response(self, response: Any) -> None:
        http = response.http_response
        if not is_change_feed_read(response.http_request) or http.status_code != 200:
            return
        number = response.context["change feed request"]
        with self._sent:
            # the first answer waits for the next request; a later one only says if it came
            within = 0 if self.answers else LOOPBACK
            self.answers.append(self._sent.wait_for(lambda: self.requests > number, within))


@pytest.mark.integration
def test_the_next_read_is_sent_before_the_page_before_is_parsed(
    cosmos: CosmosEndpoint, database: DatabaseProxy, make_container: MakeContainer
) -> None:
    hooks = Hooks()
    client = CosmosClient(
        cosmos.endpoint,
        cosmos.key,
        raw_request_hook=hooks.request,
        raw_response_hook=hooks.response,
        **cosmos.client_options(),
    )
    made, leases = make_container(1), make_container(path="/id")
    container = client.get_database_client(database.id).get_container_client(made.id)
    ids = [f"d{n}" for n in range(40)]
    for n, item_id in enumerate(ids):
        made.create_item({"id": item_id, "pk": f"k{n % 4}"})
    seen: list[str] = []

    def handler(_context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        seen.extend(change["id"] for change in changes)

    with ChangeFeedProcessor(
        container,
        leases,
        handler=handler,
        **EARLY,
    ) as processor:
        processor.wait_until_listening(LOOPBACK)
        deadline = time.monotonic() + SHORT
        while not handled(seen, ids, deadline):
            time.sleep(0.05)
    assert seen == ids, "each change handled once, in the feed's order"
    # the first page is read by the lease's own thread, which waits for it: its answer always
    # sends the next read; later answers do when the lease's thread already waits for them
    assert hooks.answers, "the application's response hook saw no change feed answer"
    assert hooks.answers[0], (
        "the first page's answer was parsed before the next read was sent: "
        f"{hooks.answers.count(True)} of {len(hooks.answers)} answers saw it sent"
    )
    assert hooks.requests > len(ids) // 5, "the application's request hook saw every read"


class Written:
    """An application's aio client whose requests are counted as aiohttp writes them (its
    ``on_request_headers_sent`` trace; a change feed read is a GET: its headers are all of it),
    and whose response hook says, for each answer that holds changes, how many requests had
    been written by then -- before azure-cosmos parses that answer."""

    def __init__(self) -> None:
        self.written = 0
        self.answers: list[int] = []
        self.trace = aiohttp.TraceConfig()
        self.trace.on_request_headers_sent.append(self._sent)

    async def _sent(self, _session: Any, _context: Any, params: Any) -> None:
        if params.url.path.rstrip("/").endswith("/docs") and params.headers.get("A-IM"):
            self.written += 1

    def request(self, request: Any) -> None:
        if is_change_feed_read(request.http_request):
            request.context["written before"] = self.written

    def response(self, response: Any) -> None:
        http = response.http_response
        if is_change_feed_read(response.http_request) and http.status_code == 200:
            # this answer's own request was written after "written before": one more than that
            # is this one; two more, the next read's
            self.answers.append(self.written - response.context["written before"])


@pytest.mark.integration
@pytest.mark.asyncio
@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks came with Python 3.12")
async def test_the_aio_processor_writes_the_next_read_before_the_page_before_is_parsed(
    cosmos: CosmosEndpoint, database: DatabaseProxy, make_container: MakeContainer
) -> None:
    made, made_leases = make_container(1), make_container(path="/id")
    ids = [f"d{n}" for n in range(40)]
    for n, item_id in enumerate(ids):
        made.create_item({"id": item_id, "pk": f"k{n % 4}"})
    written = Written()
    # the client as an application makes it for Azure: a connection pool whose connections it
    # reuses, trusting the endpoint's authority (the SDK builds an SSL context, and so opens a
    # connection, per request when it is given a certificate file: ``client_options``)
    assert cosmos.tls is not None, "funcstack's endpoint serves its authority's certificate"
    trusted = ssl.create_default_context(cafile=str(cosmos.tls.ca_file))
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=trusted), trace_configs=[written.trace], trust_env=False
    )
    seen: list[str] = []

    done = asyncio.Event()

    async def handler(_context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        seen.extend(change["id"] for change in changes)
        if len(seen) >= len(ids):
            done.set()

    async with (
        session,
        AsyncCosmosClient(
            cosmos.endpoint,
            cosmos.key,
            transport=AioHttpTransport(session=session, session_owner=False),
            raw_request_hook=written.request,
            raw_response_hook=written.response,
        ) as client,
    ):
        database_client = client.get_database_client(database.id)
        processor = AsyncChangeFeedProcessor(
            database_client.get_container_client(made.id),
            database_client.get_container_client(made_leases.id),
            handler=handler,
            **EARLY,
        )
        await processor.start()
        try:
            await processor.wait_until_listening(LOOPBACK)
            try:
                await asyncio.wait_for(done.wait(), SHORT)
            except TimeoutError:
                pytest.fail(f"{len(seen)} of {len(ids)} changes handled")
        finally:
            await processor.stop()
    assert seen == ids, "each change handled once, in the feed's order"
    assert written.answers, "the application's response hook saw no change feed answer"
    # the first page is read by the lease's own task, which waits for it: its answer always
    # sends the next read; later answers do when the lease's task already waits for them
    assert written.answers[0] == 2, (
        "the first page's answer was parsed before the next read was written: "
        f"{sum(1 for a in written.answers if a == 2)} of {len(written.answers)} answers saw it"
    )


class OwnSource(FeedSource):
    """An application's feed source, its ``read`` as the port declares it."""

    def __init__(self, feed: InMemoryFeed) -> None:
        self.inner = InMemoryFeedSource(feed)

    @property
    def account_endpoint(self) -> str:
        return self.inner.account_endpoint

    def container_rid(self) -> str:
        return self.inner.container_rid()

    def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        return self.inner.ranges(force_refresh=force_refresh)

    def partition_key_paths(self) -> list[str]:
        return self.inner.partition_key_paths()

    def read(
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = "LatestVersion",
        max_items: int | None = None,
    ) -> Page:
        return self.inner.read(lease, position, start, mode=mode, max_items=max_items)


def test_a_feed_source_of_the_application_s_own_is_read_as_the_port_declares() -> None:
    feed = InMemoryFeed(2)
    ids = [f"d{n}" for n in range(30)]
    for n, item_id in enumerate(ids):
        feed.upsert({"id": item_id, "pk": f"k{n % 6}"})
    seen: list[str] = []

    def handler(_context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        seen.extend(change["id"] for change in changes)

    with ChangeFeedProcessor(
        OwnSource(feed),
        InMemoryLeaseStore(),
        processor_name="own",
        instance_name="one",
        handler=handler,
        start_from="beginning",
        max_items=4,
        poll_delay=0.01,
    ) as processor:
        processor.wait_until_listening(LOOPBACK)
        deadline = time.monotonic() + SHORT
        while not handled(seen, ids, deadline):
            time.sleep(0.01)
    assert sorted(seen) == sorted(ids), "each change handled once"
