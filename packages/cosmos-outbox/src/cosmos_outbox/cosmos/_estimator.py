"""The backlog estimator on Cosmos DB: for each lease of the relay's trigger, read the changes
after the lease's continuation, like the change feed estimator of the Cosmos SDKs, and count the
transactions that carry events:

- up to SCAN documents: when the feed ends within them, `pending` is exact: the number of
  distinct LSNs among the event documents (`type: domainEvent`). Changes that carry no event
  (an idempotency record written alone for a write that raised no event, a quarantine record)
  are not counted;
- beyond that, estimated from the first pending event document:

      pending = latest LSN of the range - LSN of the first unprocessed event + 1

The ids of the pending event documents read are kept (`pending_ids`; all of them when the feed
ended within the read: `pending_ids_complete`): the journey of an event tells from them whether
its lease's continuation is past it.

The latest LSN comes from the session token (`x-ms-session-token`, `<range>:<ver>#<lsn>`),
or the `lsn` header; the creation time from the first pending event (its `createdAt`, read by
`cosmos_outbox._mapper`, else `_ts`). Counting is in LSNs, i.e. transactions: an
aggregate, its events and its idempotency record written in one batch are one change. Reads:
the lease documents, then at most two pages per lease (the second only to learn that the feed
ended).

Lease formats read: the .NET change feed processor's (Azure's Functions host, and funcstack's since
it runs on cosmos-changefeed): an etag `"<lsn>"` with a partition key range id as `LeaseToken`, or
with an EPK `FeedRange`; and funcstack's before that (the Python SDK's change-feed continuation
token). A lease without continuation is read from the start
of its range. With no lease at all (the relay never started), each feed range of the monitored
container is estimated from its start, so a relay that never ran still shows its backlog.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from azure.cosmos import ContainerProxy
from azure.cosmos.aio import ContainerProxy as AsyncContainerProxy
from azure.cosmos.exceptions import CosmosHttpResponseError

from cosmos_outbox._mapper import EVENT_TYPE, document_created_at
from cosmos_outbox._sync_bridge import run_sync
from cosmos_outbox.cosmos._errors import cosmos_errors
from cosmos_outbox.errors import RelayNotReadyError
from cosmos_outbox.ports import AsyncBacklogEstimator, BacklogEstimator, LeaseBacklog

logger = logging.getLogger(__name__)
#: Changes read per lease for an exact count (beyond them, the backlog is estimated).
SCAN = 100


class _Feed(Protocol):
    """What the estimate reads: the lease documents, the monitored container's feed ranges and
    rid, and the changes after a position (sync and `aio` SDKs alike, awaited)."""

    #: the lease container's name (for the error that says it does not exist)
    lease_container: str

    async def leases(self) -> list[dict[str, Any]]: ...

    async def feed_ranges(self) -> list[dict[str, Any]]: ...

    async def rid(self) -> str: ...

    async def changes(
        self, start: dict[str, Any], limit: int
    ) -> tuple[list[dict[str, Any]], bool, dict[str, str]]:
        """Up to about `limit` changes from `start`, whether the feed ended within them, and
        the last response's headers."""
        ...


class _Estimate:
    """The estimate, written once over a feed (`_Feed`)."""

    def __init__(self, feed: _Feed, *, lease_prefix: str = "") -> None:
        self._feed = feed
        self._prefix = lease_prefix
        self._rid: str | None = None

    async def estimate(self) -> list[LeaseBacklog]:
        with cosmos_errors():
            leases = [doc for doc in await self._stored_leases() if _is_lease(doc, self._prefix)]
            if not leases:
                leases = [
                    {"LeaseToken": _range_name(feed_range), "feedRange": feed_range}
                    for feed_range in await self._feed.feed_ranges()
                ]
            return [await self._estimate(lease) for lease in leases]

    async def _stored_leases(self) -> list[dict[str, Any]]:
        try:
            return await self._feed.leases()
        except CosmosHttpResponseError as exc:
            if exc.status_code == 404:  # a query finds nothing with a 200: the container (or
                # its database) is missing, whether the SDK's read of its properties or the
                # query itself answered
                raise RelayNotReadyError(
                    f"the relay's lease container {self._feed.lease_container!r} does not "
                    "exist: its trigger cannot start. Create it (partition key /id; the "
                    "deploy templates create it), or let the trigger create it "
                    "(create_lease_container_if_not_exists, which needs the account's key: "
                    "an identity cannot create containers), and check COSMOS_LEASE_CONTAINER"
                ) from exc
            raise

    async def _estimate(self, lease: Mapping[str, Any]) -> LeaseBacklog:
        name = str(lease.get("LeaseToken"))
        changes, ended, headers = await self._feed.changes(await self._start(lease), SCAN)
        return backlog_of(name, lease, changes, ended, headers)

    async def _start(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        token = lease.get("ContinuationToken")
        feed_range = lease.get("feedRange") or lease.get("FeedRange")
        if isinstance(token, str) and token and not _is_etag(token):
            return {"continuation": token}  # the Python SDK's own token (local host)
        lease_token = str(lease.get("LeaseToken", ""))
        if feed_range is None and lease_token.isdigit():
            # .NET partition-key-range lease: etag continuation on that range
            start: dict[str, Any] = {"partition_key_range_id": lease_token}
            if token:
                start["continuation"] = token
            else:
                start["start_time"] = "Beginning"
            return start
        if not isinstance(feed_range, Mapping):
            raise ValueError(f"lease {lease.get('id')} has neither a feed range nor a range id")
        if not token:
            return {"feed_range": _sdk_feed_range(feed_range), "start_time": "Beginning"}
        return {"continuation": await self._etag_continuation(str(token), feed_range)}

    async def _etag_continuation(self, etag: str, feed_range: Mapping[str, Any]) -> str:
        """The SDK's change-feed continuation for an etag on an EPK range (.NET EPK leases)."""
        if self._rid is None:
            self._rid = await self._feed.rid()
        rng = _sdk_feed_range(feed_range)["Range"]
        state = {
            "v": "v2",
            "containerRid": self._rid,
            "mode": "LatestVersion",
            "startFrom": {"Type": "Beginning"},
            "continuation": {
                "v": "v2",
                "rid": self._rid,
                "continuation": [{"token": etag, "range": rng}],
                "Range": rng,
            },
        }
        return base64.b64encode(json.dumps(state).encode()).decode()


def _sdk_feed_range(feed_range: Mapping[str, Any]) -> dict[str, Any]:
    """A lease's ``FeedRange`` as azure-cosmos takes a feed range: .NET writes a lease's range
    without the inclusive flags (``{"Range": {"min", "max"}}``: min-inclusive, max-exclusive
    by default, ``RangeJsonConverter``), which the SDK requires."""
    rng = dict(feed_range.get("Range", feed_range))
    rng.setdefault("isMinInclusive", True)
    rng.setdefault("isMaxInclusive", False)
    return {"Range": rng}


def backlog_of(
    name: str,
    lease: Mapping[str, Any],
    changes: list[dict[str, Any]],
    ended: bool,
    headers: Mapping[str, str],
) -> LeaseBacklog:
    """A lease's backlog from the changes after its continuation (exact when the feed ended
    within them, else from the range's latest LSN)."""
    owner, checkpoint = _lease_owner(lease)
    events = [c for c in changes if c.get("type") == EVENT_TYPE]
    ids = tuple(str(c.get("id")) for c in events)
    if ended and not events:
        return LeaseBacklog(name, 0, None, owner, checkpoint, (), True)
    first = min(events or changes, key=lambda c: int(c.get("_lsn", 0)))
    if ended:
        pending = len({c.get("_lsn") for c in events})
    else:
        latest = latest_lsn(headers)
        first_lsn = int(first.get("_lsn", 0))
        pending = max(1, latest - first_lsn + 1) if latest is not None else len(changes)
    created = document_created_at(first)
    if created is None and isinstance(first.get("_ts"), int | float):
        created = float(first["_ts"])
    return LeaseBacklog(name, pending, created, owner, checkpoint, ids, ended)


def _is_lease(doc: Mapping[str, Any], prefix: str) -> bool:
    """A lease document of the trigger (not the processor's bookkeeping documents)."""
    doc_id = str(doc.get("id", ""))
    return (
        "LeaseToken" in doc
        and not doc_id.endswith((".info", ".lock"))
        and doc_id.startswith(prefix)
    )


class _HeaderHook:
    def __init__(self) -> None:
        self.headers: dict[str, str] = {}

    def __call__(self, response_headers: Mapping[str, Any], _result: object) -> None:
        self.headers = {str(k).lower(): str(v) for k, v in response_headers.items()}


class _SyncFeed:
    def __init__(self, monitored: ContainerProxy, leases: ContainerProxy) -> None:
        self._monitored, self._leases = monitored, leases
        self.lease_container = str(leases.id)

    async def leases(self) -> list[dict[str, Any]]:
        return [
            dict(d)
            for d in self._leases.query_items("SELECT * FROM c", enable_cross_partition_query=True)
        ]

    async def feed_ranges(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._monitored.read_feed_ranges()]

    async def rid(self) -> str:
        return str(self._monitored.read()["_rid"])

    async def changes(
        self, start: dict[str, Any], limit: int
    ) -> tuple[list[dict[str, Any]], bool, dict[str, str]]:
        hook = _HeaderHook()
        changes: list[dict[str, Any]] = []
        for page in self._monitored.query_items_change_feed(
            max_item_count=limit, response_hook=hook, **start
        ).by_page():
            changes.extend(page)
            if len(changes) >= limit:
                return changes, False, hook.headers
        return changes, True, hook.headers


class _AsyncFeed:
    def __init__(self, monitored: AsyncContainerProxy, leases: AsyncContainerProxy) -> None:
        self._monitored, self._leases = monitored, leases
        self.lease_container = str(leases.id)

    async def leases(self) -> list[dict[str, Any]]:
        return [dict(d) async for d in self._leases.query_items("SELECT * FROM c")]

    async def feed_ranges(self) -> list[dict[str, Any]]:
        return [dict(r) async for r in self._monitored.read_feed_ranges()]

    async def rid(self) -> str:
        return str((await self._monitored.read())["_rid"])

    async def changes(
        self, start: dict[str, Any], limit: int
    ) -> tuple[list[dict[str, Any]], bool, dict[str, str]]:
        hook = _HeaderHook()
        changes: list[dict[str, Any]] = []
        async for page in self._monitored.query_items_change_feed(
            max_item_count=limit, response_hook=hook, **start
        ).by_page():
            changes.extend([c async for c in page])
            if len(changes) >= limit:
                return changes, False, hook.headers
        return changes, True, hook.headers


class CosmosBacklogEstimator(BacklogEstimator):
    """Estimates from the lease container of a Cosmos DB trigger on the monitored container
    (sync SDK). Raises StoreUnavailableError/ThrottledError when the store fails."""

    def __init__(
        self, monitored: ContainerProxy, leases: ContainerProxy, *, lease_prefix: str = ""
    ) -> None:
        self._estimate = _Estimate(_SyncFeed(monitored, leases), lease_prefix=lease_prefix)

    def estimate(self) -> list[LeaseBacklog]:
        return run_sync(self._estimate.estimate())


class AsyncCosmosBacklogEstimator(AsyncBacklogEstimator):
    """`CosmosBacklogEstimator` on the SDK's `aio` client."""

    def __init__(
        self, monitored: AsyncContainerProxy, leases: AsyncContainerProxy, *, lease_prefix: str = ""
    ) -> None:
        self._estimate = _Estimate(_AsyncFeed(monitored, leases), lease_prefix=lease_prefix)

    async def estimate(self) -> list[LeaseBacklog]:
        return await self._estimate.estimate()


def _lease_owner(lease: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The lease's `Owner` and its `timestamp` (both processors write them; the document's
    `_ts` when there is no timestamp). Neither for a range with no lease document."""
    owner = lease.get("Owner")
    stamp = lease.get("timestamp")
    if not isinstance(stamp, str) and isinstance(lease.get("_ts"), int | float):
        stamp = datetime.fromtimestamp(float(lease["_ts"]), UTC).isoformat()
    return (
        owner if isinstance(owner, str) and owner else None,
        stamp if isinstance(stamp, str) and stamp else None,
    )


def _range_name(feed_range: Mapping[str, Any]) -> str:
    rng = feed_range.get("Range", feed_range)
    return f"{rng.get('min', '')}-{rng.get('max', '')}" if isinstance(rng, Mapping) else "range"


def _is_etag(token: str) -> bool:
    return token.startswith('"') or token.isdigit()


def latest_lsn(headers: Mapping[str, str]) -> int | None:
    """The range's latest LSN from `x-ms-session-token` (`<range>:<version>#<lsn>[#...]`, comma
    separated when several ranges answered), else from the `lsn` header."""
    session = headers.get("x-ms-session-token")
    if session:
        found = []
        for part in session.split(","):
            vector = part.split(":", 1)[-1].split("#")
            if len(vector) > 1 and vector[1].isdigit():
                found.append(int(vector[1]))
        if found:
            return max(found)
    lsn = headers.get("lsn")
    return int(lsn) if lsn and lsn.isdigit() else None
