"""What the package relies on in azure-cosmos beyond its documented API, pinned: if the SDK
changes any of it, a test here fails (docs/dotnet-compatibility.md, "What we rely on in
azure-cosmos").

* Its change feed continuation, which the package builds to read a range from a raw etag.
* The request it sends for a feed range: the range's id in ``x-ms-documentdb-partitionkeyrangeid``
  (how the package learns ids), the etag as ``If-None-Match``, the mode's ``A-IM``.
* The ``response_hook`` seeing each response's own ``etag`` (a 304's too).
* Where azure-core keeps the raw hooks a client was made with (``_reading.client_hooks``): a
  read that takes hooks of its own calls them, or the application's would not see it.
* That ``partition_key_range_id=`` does *not* scope a read to the range in 4.16-4.17 (why the
  package does not use it): when the SDK mends that, this test says so.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from azure.core.pipeline.transport import AioHttpTransport
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from cosmos_changefeed._continuation import etags, sdk_continuation
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._ranges import EpkRange
from cosmos_changefeed._reading import (
    RANGE_ID_HEADER,
    Page,
    ResponseCapture,
    change_feed_kwargs,
    client_hooks,
    writes_at_once,
)
from cosmos_changefeed.aio import CosmosFeedSource as AsyncCosmosFeedSource

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]


class Requests:
    """A ``raw_request_hook``: the headers of each request sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []

    def __call__(self, request: Any) -> None:
        self.sent.append({k.lower(): v for k, v in request.http_request.headers.items()})


def first_page(container: ContainerProxy, **kwargs: Any) -> tuple[list[dict[str, Any]], Any]:
    pager = container.query_items_change_feed(**kwargs).by_page()
    for page in pager:
        return list(page), pager
    return [], pager


def test_the_sdk_reads_a_range_from_the_continuation_the_package_builds(
    make_container: MakeContainer,
) -> None:
    container = make_container(2)
    reader = CosmosFeedSource(container)
    first, second = reader.ranges()
    for i in range(20):
        container.create_item({"id": str(i), "pk": f"k{i}"})
    capture = ResponseCapture()
    items, pager = first_page(
        container,
        feed_range=first.range.to_feed_range(),
        start_time="Beginning",
        max_item_count=3,
        response_hook=capture,
    )
    assert len(items) == 3 and capture.etag
    # the SDK's own continuation: one entry, the response's raw etag, our layout
    own = json.loads(base64.b64decode(pager.continuation_token))
    built = json.loads(
        base64.b64decode(
            sdk_continuation(reader.container_rid(), first.range, capture.etag, "LatestVersion")
        )
    )
    assert own["continuation"] == built["continuation"]
    assert {k: own[k] for k in ("v", "containerRid", "mode")} == {
        k: built[k] for k in ("v", "containerRid", "mode")
    }
    assert etags(pager.continuation_token) == [(first.range, capture.etag)]
    # and reading on from the built one gives the rest of that range, and only that range
    requests = Requests()
    rest, _ = first_page(
        container,
        **change_feed_kwargs(
            reader.container_rid(),
            first.range,
            capture.etag,
            "Beginning",
            mode="LatestVersion",
            max_items=None,
        ),
        raw_request_hook=requests,
    )
    assert requests.sent[0]["if-none-match"] == capture.etag
    assert requests.sent[0][RANGE_ID_HEADER] == first.id
    every, _ = first_page(container, feed_range=first.range.to_feed_range(), start_time="Beginning")
    assert [d["id"] for d in items + rest] == [d["id"] for d in every]
    assert not {d["id"] for d in every} & {
        d["id"]
        for d in first_page(
            container, feed_range=second.range.to_feed_range(), start_time="Beginning"
        )[0]
    }


def test_the_hooks_a_client_was_made_with_are_found_in_its_pipeline(
    cosmos: CosmosEndpoint,
) -> None:
    requests, responses = Requests(), Requests()
    hooked = CosmosClient(
        cosmos.endpoint,
        cosmos.key,
        raw_request_hook=requests,
        raw_response_hook=responses,
        **cosmos.client_options(),
    )
    plain = CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())
    for client, hooks in ((hooked, (requests, responses)), (plain, (None, None))):
        container = client.get_database_client("any").get_container_client("any")
        assert client_hooks(container) == hooks

    async def aio() -> None:
        async with AsyncCosmosClient(
            cosmos.endpoint,
            cosmos.key,
            raw_request_hook=requests,
            raw_response_hook=responses,
            **cosmos.client_options(),
        ) as client:
            container = client.get_database_client("any").get_container_client("any")
            assert client_hooks(container) == (requests, responses)

    asyncio.run(aio())


def test_whether_an_aio_client_reads_the_environment_is_found_in_its_pipeline(
    cosmos: CosmosEndpoint,
) -> None:
    """``writes_at_once``: azure-core keeps the transport in the pipeline, and whether it reads
    the environment (its ``use_env_settings`` until its session is made, then the session's
    ``trust_env``, as for a session the application gives it)."""

    async def found(**options: Any) -> list[bool]:
        client = AsyncCosmosClient(
            cosmos.endpoint, cosmos.key, **options, **cosmos.client_options()
        )
        container = client.get_database_client("any").get_container_client("any")
        before = writes_at_once(container)
        async with client:
            return [before, writes_at_once(container)]

    async def each() -> None:
        assert await found() == [False, False], "azure-core's default reads the environment"
        assert await found(transport=AioHttpTransport(use_env_settings=False)) == [True, True]
        async with aiohttp.ClientSession(trust_env=False) as own:
            given = AioHttpTransport(session=own, session_owner=False)
            assert await found(transport=given) == [True, True]
        async with aiohttp.ClientSession(trust_env=True) as own:
            given = AioHttpTransport(session=own, session_owner=False)
            assert await found(transport=given) == [False, False]

    asyncio.run(each())


def test_a_read_tells_where_its_page_ends_before_it_returns(
    cosmos: CosmosEndpoint, database: DatabaseProxy, make_container: MakeContainer
) -> None:
    """``CosmosFeedSource.read``'s ``answered``: once per page with changes, that page's own
    etag (from the raw response, before azure-cosmos parses it); nothing for a read that finds
    nothing. Sync and aio, through the same raw hooks."""
    container = make_container(1)
    for i in range(12):
        container.create_item({"id": str(i), "pk": f"k{i % 3}"})
    reader = CosmosFeedSource(container)
    (only,) = reader.ranges()
    lease = _lease(only.id, only.range)

    def pages(read: Callable[..., Page]) -> list[tuple[list[str], str | None]]:
        told, position = [], None
        for _ in range(10):
            answered: list[str] = []
            page = read(lease, position, "Beginning", max_items=5, answered=answered.append)
            told.append((answered, page.etag if page.items else None))
            if not page.items:
                return told
            position = page.etag
        raise AssertionError("the feed never ended")

    told = pages(reader.read)
    assert [answered for answered, _ in told] == [[etag] for _, etag in told[:-1]] + [[]]

    async def aio() -> list[tuple[list[str], str | None]]:
        async with AsyncCosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options()) as c:
            source = AsyncCosmosFeedSource(
                c.get_database_client(database.id).get_container_client(container.id)
            )
            results = []
            position: str | None = None
            for _ in range(10):
                answered: list[str] = []
                page = await source.read(
                    lease, position, "Beginning", max_items=5, answered=answered.append
                )
                results.append((answered, page.etag if page.items else None))
                if not page.items:
                    break
                position = page.etag
            return results

    assert asyncio.run(aio()) == told


def test_a_304_s_etag_reaches_the_response_hook(make_container: MakeContainer) -> None:
    container = make_container(1)
    reader = CosmosFeedSource(container)
    (only,) = reader.ranges()
    container.create_item({"id": "a", "pk": "a"})
    page = reader.read(_lease(only.id, only.range), None, "Beginning")
    assert page.items and page.etag
    empty = reader.read(_lease(only.id, only.range), page.etag, "Beginning")
    assert empty.items == [] and empty.etag == page.etag


def test_all_versions_and_deletes_is_asked_for_with_the_full_fidelity_headers(
    make_container: MakeContainer,
) -> None:
    container = make_container(1)
    reader = CosmosFeedSource(container)
    (only,) = reader.ranges()
    for position in (None, '"5"'):
        requests = Requests()
        kwargs = change_feed_kwargs(
            reader.container_rid(),
            only.range,
            position,
            "Now",
            mode="AllVersionsAndDeletes",
            max_items=None,
        )
        assert first_page(container, **kwargs, raw_request_hook=requests)[0] == []  # none yet
        sent = requests.sent[0]
        assert sent["a-im"] == "Full-Fidelity Feed"
        assert sent["x-ms-cosmos-changefeed-wire-format-version"] == "2021-09-15"
        assert sent["if-none-match"] == (position or "*")


def test_partition_key_range_id_does_not_scope_the_read_in_this_sdk(
    make_container: MakeContainer,
) -> None:
    container = make_container(2)
    for i in range(6):
        container.create_item({"id": str(i), "pk": f"k{i}"})
    requests = Requests()
    items, _ = first_page(
        container, partition_key_range_id="0", start_time="Beginning", raw_request_hook=requests
    )
    assert RANGE_ID_HEADER not in requests.sent[0], (
        "azure-cosmos now scopes partition_key_range_id reads: the legacy path could serve "
        "version-0 leases (docs/dotnet-compatibility.md)"
    )
    # answered as the service's gateway answers a read naming no range: the first partition's
    # changes only, whichever range was asked for (azure-sdk-for-python#34922)
    first, _ = CosmosFeedSource(container).ranges()
    firsts, _ = first_page(
        container, feed_range=first.range.to_feed_range(), start_time="Beginning"
    )
    assert sorted(i["id"] for i in items) == sorted(i["id"] for i in firsts) and len(items) < 6


def _lease(token: str, feed_range: EpkRange) -> Any:
    from cosmos_changefeed import Lease

    return Lease(id=f"x..{token}", lease_token=token, feed_range=feed_range)
