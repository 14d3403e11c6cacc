"""The backlog estimator on Cosmos DB: for each lease of the relay's trigger, read the changes
after the lease's continuation, like the change feed estimator of the Cosmos SDKs, and count the
transactions that carry events:

- up to SCAN documents: when the feed ends within them, `pending` is exact: the number of
  distinct LSNs among the event documents (`type: domainEvent`). Changes that carry no event
  (an idempotency record written alone for a write that raised no event, a quarantine record)
  are not counted;
- beyond that, estimated from the first pending event document:

      pending = latest LSN of the range - LSN of the first unprocessed event + 1

The latest LSN comes from the session token (`x-ms-session-token`, `<range>:<ver>#<lsn>`),
or the `lsn` header; the creation time from the first pending event (`data.createdAt`, else
`_ts`). Counting is in LSNs, i.e. transactions: an aggregate, its events and its idempotency
record written in one batch are one change. Reads: the lease documents, then at most two pages
per lease (the second only to learn that the feed ended).

Lease formats read: the local host's (the Python SDK's change-feed continuation token) and the
Functions host's (.NET change feed processor: an etag `"<lsn>"` with a partition key range id as
`LeaseToken`, or with an EPK `FeedRange`). A lease without continuation is read from the start
of its range. With no lease at all (the relay never started), each feed range of the monitored
container is estimated from its start, so a relay that never ran still shows its backlog.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from azure.cosmos import ContainerProxy

from cosmos_outbox._documents import EVENT_TYPE, document_created_at
from cosmos_outbox.cosmos._errors import cosmos_errors
from cosmos_outbox.ports import BacklogEstimator, LeaseBacklog

logger = logging.getLogger(__name__)
#: Changes read per lease for an exact count (beyond them, the backlog is estimated).
SCAN = 100


class CosmosBacklogEstimator(BacklogEstimator):
    """Estimates from the lease container of a Cosmos DB trigger on the monitored container."""

    def __init__(
        self, monitored: ContainerProxy, leases: ContainerProxy, *, lease_prefix: str = ""
    ) -> None:
        self._monitored = monitored
        self._leases = leases
        self._prefix = lease_prefix
        self._rid: str | None = None

    def estimate(self) -> list[LeaseBacklog]:
        """Raises StoreUnavailableError/ThrottledError (application errors) when the store
        fails or times out, as every adapter of the store does."""
        with cosmos_errors():
            leases = list(self._lease_documents())
            if not leases:
                leases = [
                    {"LeaseToken": _range_name(feed_range), "feedRange": feed_range}
                    for feed_range in self._monitored.read_feed_ranges()
                ]
            return [self._estimate(lease) for lease in leases]

    def _lease_documents(self) -> Iterator[dict[str, Any]]:
        for doc in self._leases.query_items("SELECT * FROM c", enable_cross_partition_query=True):
            doc_id = str(doc.get("id", ""))
            if "LeaseToken" not in doc or doc_id.endswith((".info", ".lock")):
                continue  # the processor's bookkeeping documents
            if doc_id.startswith(self._prefix):
                yield doc

    def _estimate(self, lease: Mapping[str, Any]) -> LeaseBacklog:
        name = str(lease.get("LeaseToken"))
        headers: dict[str, str] = {}

        def hook(response_headers: Mapping[str, Any], _result: object) -> None:
            headers.clear()
            headers.update({str(k).lower(): str(v) for k, v in response_headers.items()})

        pages = self._monitored.query_items_change_feed(
            max_item_count=SCAN, response_hook=hook, **self._start(lease)
        ).by_page()
        changes: list[dict[str, Any]] = []
        ended = True
        for page in pages:
            changes.extend(page)
            if len(changes) >= SCAN:
                ended = False
                break
        owner, checkpoint = _lease_owner(lease)
        events = [c for c in changes if c.get("type") == EVENT_TYPE]
        if ended and not events:
            return LeaseBacklog(name, 0, None, owner, checkpoint)
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
        return LeaseBacklog(name, pending, created, owner, checkpoint)

    def _start(self, lease: Mapping[str, Any]) -> dict[str, Any]:
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
            return {"feed_range": dict(feed_range), "start_time": "Beginning"}
        return {"continuation": self._etag_continuation(str(token), feed_range)}

    def _etag_continuation(self, etag: str, feed_range: Mapping[str, Any]) -> str:
        """The SDK's change-feed continuation for an etag on an EPK range (.NET EPK leases)."""
        if self._rid is None:
            self._rid = str(self._monitored.read()["_rid"])
        rng = dict(feed_range.get("Range", feed_range))
        rng.setdefault("isMinInclusive", True)
        rng.setdefault("isMaxInclusive", False)
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


def _lease_owner(lease: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The lease's `Owner` and its `timestamp` (both processors write them; the document's
    `_ts` when there is no timestamp). Neither for a range with no lease document."""
    owner = lease.get("Owner")
    stamp = lease.get("timestamp")
    if not isinstance(stamp, str) and isinstance(lease.get("_ts"), int | float):
        stamp = datetime.fromtimestamp(float(lease["_ts"]), UTC).isoformat()
    return (owner if isinstance(owner, str) and owner else None,
            stamp if isinstance(stamp, str) and stamp else None)


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
