"""How a lease's range is read through azure-cosmos: the request, what is kept of the response,
and when the range is gone. Pure; ``_feed`` (sync) and ``aio/_feed_async`` do the I/O.

* The request: ``query_items_change_feed`` with ``feed_range`` = the lease's EPK range and a
  start (no position yet), or with ``continuation`` = azure-cosmos's own state holding the
  lease's raw etag (``_continuation.sdk_continuation``); ``max_item_count``; ``mode`` for all
  versions and deletes. The SDK resolves the range to its physical partition (the
  ``x-ms-documentdb-partitionkeyrangeid`` header, with ``x-ms-start-epk`` / ``x-ms-end-epk`` for a
  range smaller than its partition) and sends the etag as ``If-None-Match``: the request .NET's
  ``ChangeFeedPartitionKeyResultSetIteratorCore`` sends for the lease.
* Starts (``ChangeFeedStartFromRequestOptionPopulator``): the beginning (no header), a time
  (``If-Modified-Since``, HTTP date: whole seconds), now (``If-None-Match: *``). As .NET 3.60+
  (``ChangeFeedProcessorCore.StartAsync``, ``shouldAnchorStartTime``), "now" in the latest-version
  mode is fixed once, when the processor starts: the time one second before its start, read as a
  time start; so every lease an instance ever takes without a checkpoint starts there, whichever
  instance takes it and whenever. In the all-versions-and-deletes mode, which takes no time start,
  "now" is ``If-None-Match: *`` at the lease's first read.
* The response: its ``etag`` is the position after it, the change feed's continuation, 304 or
  200 (the ``response_hook``: azure-cosmos's pager has no continuation for a 304); the session
  token and the request charge go to the handler's context and the estimator.
* Gone: a version-0 lease reads one partition key range by its id, as .NET does; when that id is
  no longer a live range (split or merged) the service would answer 410 / 1002, and
  ``HandlePartitionGoneAsync`` replaces the lease. An EPK lease is gone when its range spans
  several partitions (the SDK raises 410 / 1002 itself then, ``get_feed_range_gone_error``).
  Both are decided here from the SDK's routing map after each read: a read of a range that split
  (before it or under it) is answered by the SDK from the children (it handles the 410 itself
  and refreshes its map), and such a page is dropped, unseen, for the children to read again.
  (The map is not asked before the read too: once per page it cost about 2 % of the client's
  CPU, to spare one read per split.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeAlias, TypeVar
from urllib.parse import urlsplit

from azure.core.pipeline.policies import CustomHookPolicy

from cosmos_changefeed._continuation import (
    LATEST_VERSION,
    Continuation,
    raw_etag,
    sdk_continuation,
)
from cosmos_changefeed._leases import EPK_RANGE_BASED, Lease
from cosmos_changefeed._ranges import EpkRange, PartitionKeyRange, overlapping
from cosmos_changefeed._shared_headers import copy_headers

#: Where a read without a position starts: the beginning, a time, or now.
Start: TypeAlias = Literal["Beginning", "Now"] | dt.datetime
#: Where a processor starts a lease without a checkpoint, once resolved: a ``Start``, or its
#: range's position in a pull-model reader's continuation (``first_read``).
ProcessorStart: TypeAlias = Start | Continuation
#: The request header naming the physical partition a request reads (what the SDK resolved).
RANGE_ID_HEADER = "x-ms-documentdb-partitionkeyrangeid"
SESSION_TOKEN_HEADER = "x-ms-session-token"  # noqa: S105 - a header name
#: The request header that makes a read a change feed read (``A-IM: Incremental Feed``).
CHANGE_FEED_HEADER = "A-IM"
REQUEST_CHARGE_HEADER = "x-ms-request-charge"


def resolve_start(
    start_from: Literal["now", "beginning"] | dt.datetime | Continuation,
    mode: str,
    started: dt.datetime,
) -> ProcessorStart:
    """The start of a processor begun at ``started`` (.NET's anchoring of "now")."""
    if isinstance(start_from, Continuation):
        return start_from
    if isinstance(start_from, dt.datetime):
        if start_from.tzinfo is None:
            raise ValueError(
                "start_from: a time needs a time zone (.NET refuses an unspecified kind)"
            )
        return start_from.astimezone(dt.UTC)
    if start_from == "beginning":
        return "Beginning"
    if start_from != "now":
        raise ValueError(f"start_from: 'now', 'beginning' or a datetime, not {start_from!r}")
    if mode != LATEST_VERSION:
        return "Now"
    return started.astimezone(dt.UTC) - dt.timedelta(seconds=1)


def first_read(lease: Lease, start: ProcessorStart) -> tuple[str | None, Start]:
    """Where a lease's processing reads first: its checkpoint; without one, ``start`` -- or,
    for a start from a ``Continuation``, the position it holds for the lease's range."""
    if lease.continuation or not isinstance(start, Continuation):
        return lease.continuation, "Beginning" if isinstance(start, Continuation) else start
    return start.etag_for(range_of(lease)), "Beginning"


def change_feed_kwargs(
    container_rid: str,
    feed_range: EpkRange,
    position: str | None,
    start: Start,
    *,
    mode: str,
    max_items: int | None,
) -> dict[str, Any]:
    """The keywords of ``query_items_change_feed`` that read ``feed_range`` from ``position``
    (a raw etag), or from ``start`` when there is none."""
    kwargs: dict[str, Any] = {}
    if max_items is not None:
        kwargs["max_item_count"] = max_items
    etag = raw_etag(position)
    if etag is not None:
        kwargs["continuation"] = sdk_continuation(container_rid, feed_range, etag, mode)
        return kwargs
    kwargs["feed_range"] = feed_range.to_feed_range()
    kwargs["start_time"] = start
    if mode != LATEST_VERSION:
        kwargs["mode"] = mode
    return kwargs


@dataclass
class ResponseCapture:
    """A ``response_hook``: the headers of the last response (copied as they come: the SDK
    rewrites the ``etag`` of a page into its own continuation afterwards; copied whole while
    another thread's request writes into them: ``_shared_headers``)."""

    headers: dict[str, str] = field(default_factory=dict)
    responses: int = 0

    def __call__(self, headers: Mapping[str, Any], _result: Any) -> None:
        self.headers = copy_headers(headers)
        self.responses += 1

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")

    def page(self, items: list[dict[str, Any]], position: str | None) -> Page:
        """The page read (its position: the response's etag, else where it was read from)."""
        return Page(items, self.etag or position, self.headers)


RawHook: TypeAlias = Callable[[Any], None]


def is_change_feed_read(request: Any) -> bool:
    """Whether azure-core's ``HttpRequest`` reads a container's change feed (its documents with
    ``A-IM``; the SDK reads the partition key ranges with ``A-IM`` too)."""
    path = urlsplit(str(request.url)).path.rstrip("/")
    return path.endswith("/docs") and bool(request.headers.get(CHANGE_FEED_HEADER))


def client_hooks(container: Any) -> tuple[RawHook | None, RawHook | None] | None:
    """The raw request and response hooks ``container``'s client was made with (azure-core's
    ``CustomHookPolicy``), found in its pipeline. **Not a public API**: None when the pipeline
    is not as azure-core builds it, and then a read takes no hooks of its own (its answer is not
    told before it returns). A request's own hook replaces the client's (``CustomHookPolicy``),
    so a read that takes one calls these too: an application's hooks still see every read.
    ``tests/test_sdk_contract.py`` fails if azure-core stops keeping them there."""
    try:
        policies = container.client_connection.pipeline_client._pipeline._impl_policies
    except AttributeError:
        return None
    for runner in policies:
        policy = getattr(runner, "_policy", runner)
        if isinstance(policy, CustomHookPolicy):
            return policy._request_callback, policy._response_callback
    return None


def writes_at_once(container: Any) -> bool:
    """Whether ``container``'s aio client writes a request as soon as it is sent: its aiohttp
    session does not read proxy and netrc settings from the environment (azure-core's
    ``AioHttpTransport(use_env_settings=False)``, or a session of the application's made with
    ``trust_env=False``). One that does looks them up in a thread of the event loop's executor
    before each request first, so a request sent from a hook is written only once the page
    before is parsed, and sending it early costs the parse the GIL for nothing. **Not a public
    API** (the transport in the client's pipeline): False when not found;
    ``tests/test_sdk_contract.py`` fails if azure-core stops keeping it there."""
    try:
        transport = container.client_connection.pipeline_client._pipeline._transport
    except AttributeError:
        return False
    session = getattr(transport, "session", None)
    if session is not None:
        return getattr(session, "trust_env", True) is False
    return getattr(transport, "_use_env_settings", True) is False


@dataclass(frozen=True)
class ReadHooks:
    """A read's raw hooks: what the read's caller is told before the read returns -- ``sent``
    when a request is on its way (after the client's own request hook), ``answered`` with the
    etag of a change feed answer that holds changes, before azure-cosmos parses its body (and
    before the client's own response hook), so the caller can send the next read while this
    one's answer is parsed -- and the client's own hooks, called as ever."""

    client: tuple[RawHook | None, RawHook | None]
    sent: Callable[[], None] | None
    answered: Callable[[str], None] | None

    def request(self, request: Any) -> None:
        own = self.client[0]
        if own is not None:
            own(request)
        if self.sent is not None:
            self.sent()

    def response(self, response: Any) -> None:
        http = response.http_response
        etag = http.headers.get("etag") if http.status_code == 200 else None
        if self.answered is not None and etag and is_change_feed_read(response.http_request):
            self.answered(str(etag))
        own = self.client[1]
        if own is not None:
            own(response)

    def kwargs(self) -> dict[str, Any]:
        """The read's keywords (none when there is nothing to tell)."""
        if self.sent is None and self.answered is None:
            return {}
        return {"raw_request_hook": self.request, "raw_response_hook": self.response}


class Sent(Protocol):
    """A read sent from the answer of the one before, before that answer was parsed."""

    @property
    def position(self) -> str: ...

    def drop(self) -> None: ...


S = TypeVar("S", bound=Sent)


def read_on(early: S | None, page: Page | None) -> S | None:
    """``early``, sent from ``page``'s answer, if it reads on from where ``page`` ends: ``page``
    was read, holds changes, is not gone, and ends at ``early``'s position. Otherwise it is
    dropped (None)."""
    if early is None:
        return None
    if page is None or page.gone or not page.items or page.etag != early.position:
        early.drop()
        return None
    return early


@dataclass
class RangeIdCapture:
    """A ``raw_request_hook``: the partition key range id the SDK resolved for a read of one
    feed range (``RANGE_ID_HEADER``). ``kwargs``: such a read, from now (nothing is read)."""

    found: str | None = None

    def __call__(self, request: Any) -> None:
        value = request.http_request.headers.get(RANGE_ID_HEADER)
        if value is not None:
            self.found = str(value)

    def kwargs(self, rng: EpkRange) -> dict[str, Any]:
        """``query_items_change_feed``'s keywords."""
        return {
            "feed_range": rng.to_feed_range(),
            "start_time": "Now",
            "max_item_count": 1,
            "raw_request_hook": self,
        }

    def range_id(self, rng: EpkRange) -> str:
        if self.found is None:
            raise RuntimeError(f"azure-cosmos named no partition key range for {rng}")
        return self.found


@dataclass(frozen=True)
class Page:
    """One read of a lease's range."""

    items: list[dict[str, Any]]
    #: The position after this page (its ``etag``): a checkpoint's continuation.
    etag: str | None
    headers: Mapping[str, str]
    #: The range split (or, for a version-0 lease, merged) before or under the read: the page
    #: holds nothing and the lease is to be replaced.
    gone: bool = False

    @classmethod
    def gone_at(cls, position: str | None) -> Page:
        return cls([], position, {}, gone=True)


class _Container(Protocol):
    @property
    def client_connection(self) -> Any: ...


C = TypeVar("C", bound=_Container)


class Reader(Generic[C]):
    """What the sync and the aio Cosmos DB feed source keep of the monitored container ``C``:
    its resource id once read, and each partition key range's id once learnt (``_ids``)."""

    def __init__(self, container: C) -> None:
        self.container = container
        self._rid: str | None = None
        self._paths: list[str] | None = None
        self._ids: dict[EpkRange, str] = {}

    @property
    def account_endpoint(self) -> str:
        return str(self.container.client_connection.url_connection)

    def partition_key_paths(self) -> list[str] | None:
        """The container's partition key paths, read with its resource id."""
        return self._paths


def paths_of(properties: Mapping[str, Any]) -> list[str] | None:
    """A container's partition key paths, from its properties (``partitionKey.paths``)."""
    paths = (properties.get("partitionKey") or {}).get("paths")
    return [str(path) for path in paths] if paths else None


def is_gone(lease: Lease, ranges: Sequence[PartitionKeyRange]) -> bool:
    """Whether ``lease``'s range is gone given the live ``ranges`` (see the module)."""
    if lease.version != EPK_RANGE_BASED:
        return not any(r.id == lease.lease_token for r in ranges)
    if lease.feed_range is None:
        return False
    return len(overlapping(ranges, lease.feed_range)) > 1


def merge_ranges(
    feed_ranges: Sequence[EpkRange], known: Mapping[EpkRange, str]
) -> tuple[list[EpkRange], list[PartitionKeyRange]]:
    """The SDK's feed ranges split into those whose id is not known yet and the known ones."""
    unknown = [r for r in feed_ranges if r not in known]
    return unknown, [PartitionKeyRange(known[r], r) for r in feed_ranges if r in known]


def range_of(lease: Lease) -> EpkRange:
    """The range a feed reader reads for ``lease`` (ValueError: it has none)."""
    if lease.feed_range is None:
        raise ValueError(f"lease {lease.lease_token} has no FeedRange")
    return lease.feed_range
