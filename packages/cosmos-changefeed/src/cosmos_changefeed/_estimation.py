"""The estimator's arithmetic, as the .NET change feed estimator computes a lease's remaining
work. Pure; the sync and the aio estimator read the feed and hand the figures here.

Follows Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/ChangeFeedEstimatorIterator.cs``
(``GetRemainingWorkAsync``): a lease without a continuation counts 1; otherwise one change is
read from its continuation (``maxItemCount: 1``); a read answered 410 / 1002 (the range split
and the lease is not yet replaced) counts 1; the latest LSN is read from the response's session
token (``ExtractLsnFromSessionToken``: after the first ``:``, the segment after ``#`` when there
is one); the last LSN processed is the first change's ``_lsn`` - 1, or that latest LSN when
nothing is new (304); below 0 it counts 1; else the estimate is latest - last processed, never
below 0. KEDA's scaler reads the same way (``estimatePartitionLag``: latest - first + 1).

The reads are written once, as flows of ``_protocol`` operations (``estimate_flow``,
``targets_flow``, ``pending_flow``) that the sync and the aio estimator drive as the processors
drive the lease protocol.

Beyond .NET (``ChangeFeedEstimator.get_pending``): the first pending changes themselves, read
from the checkpoint page by page up to a number, and whether the feed ended within them; and,
given where the processor starts a lease (``estimate_from``), a lease never checkpointed read
from there instead of counted 1 -- and, before the processor ever ran (no lease at all), each
live partition key range read from there.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from cosmos_changefeed import _names
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import ChangeFeedProcessorState, EstimateFrom, PendingChanges
from cosmos_changefeed._protocol import (
    ListDocuments,
    Op,
    ReadContainerRid,
    ReadPage,
    ReadRanges,
    StoreFacts,
)
from cosmos_changefeed._ranges import PartitionKeyRange
from cosmos_changefeed._reading import SESSION_TOKEN_HEADER, Start


def lsn_from_session_token(session_token: str | None) -> int:
    """``ExtractLsnFromSessionToken`` then ``TryConvertToNumber`` (0 when it is not a number)."""
    if not session_token:
        return 0
    parsed = session_token[session_token.find(":") + 1 :]
    segments = parsed.split("#")
    text = segments[1] if len(segments) >= 2 else segments[0]
    try:
        return int(text)
    except ValueError:
        return 0


def remaining_work(session_token: str | None, items: Sequence[Mapping[str, Any]]) -> int:
    """A checkpointed lease's estimate from one read of its continuation."""
    latest = lsn_from_session_token(session_token)
    if items:
        try:
            last_processed = int(items[0].get("_lsn")) - 1  # type: ignore[arg-type]
        except (TypeError, ValueError):
            last_processed = -1
    else:
        last_processed = latest
    if last_processed < 0:
        return 1
    return max(latest - last_processed, 0)


def estimate_start(lease: Lease, estimate_from: EstimateFrom) -> Start | None:
    """Where an estimator reads ``lease`` from: its checkpoint (the etag it holds), else
    ``estimate_from`` (a time as the processor anchors one, in UTC); None when it reads nothing
    (no checkpoint and no ``estimate_from``: .NET's estimator counts it 1)."""
    if lease.continuation:
        return "Beginning"  # unused: the read starts at the continuation
    if estimate_from is None:
        return None
    if isinstance(estimate_from, dt.datetime):
        if estimate_from.tzinfo is None:
            raise ValueError("estimate_from: a time needs a time zone")
        return estimate_from.astimezone(dt.UTC)
    if estimate_from != "beginning":
        raise ValueError(f"estimate_from: 'beginning' or a datetime, not {estimate_from!r}")
    return "Beginning"


def lease_of_range(found: PartitionKeyRange) -> Lease:
    """A range without a lease, as a lease of no checkpoint over it (what an estimator reads
    for a processor that never started)."""
    return Lease(id="", lease_token=found.id, feed_range=found.range, continuation=None)


def pending(
    lease: Lease,
    *,
    stored: bool,
    headers: Mapping[str, str] | None,
    changes: list[dict[str, Any]],
    complete: bool,
    read: bool,
) -> PendingChanges:
    """A lease's ``PendingChanges`` from what was read of it: nothing (``read`` False: counts 1,
    as .NET's estimator counts a lease never checkpointed or whose range is gone), or its first
    changes and the first response's headers (the estimate ``remaining_work``'s)."""
    owner = lease.owner or None
    if not read:
        return PendingChanges(lease.lease_token, 1, owner, lease if stored else None)
    session = (headers or {}).get(SESSION_TOKEN_HEADER)
    return PendingChanges(
        lease.lease_token,
        remaining_work(session, changes[:1]),
        owner,
        lease if stored else None,
        changes,
        complete,
    )


# -- the estimator's reads, as flows (``_protocol``'s operations, driven by ``_drive``) -------


def prefix_flow(processor_name: str, endpoint: str) -> Generator[Op, Any, str]:
    """The processor's prefix (``_names.store_prefix``), once both containers are known to
    exist (``MissingResourceError`` names the one that does not)."""
    rid = yield ReadContainerRid()
    yield StoreFacts()
    return _names.store_prefix(processor_name, endpoint, rid)


def estimate(found: PendingChanges) -> ChangeFeedProcessorState:
    """A lease's state from what ``pending_flow`` read of it (``get_estimates``)."""
    return ChangeFeedProcessorState(
        found.lease_token, found.estimated_lag, found.instance_name, found.stalled_since
    )


def targets_flow(
    processor_name: str, endpoint: str, estimate_from: EstimateFrom
) -> Generator[Op, Any, list[tuple[Lease, bool]]]:
    """What an estimator reads, each with whether it is a stored lease: the processor's
    leases (the documents under its prefix), or, with ``estimate_from`` and no lease at all
    (the processor never ran), each partition key range as a lease of no checkpoint."""
    prefix = yield from prefix_flow(processor_name, endpoint)
    listed = yield ListDocuments(f"{prefix}{_names.LEASE_SEPARATOR}")
    stored = [Lease.from_document(doc) for doc in listed]
    if not stored and estimate_from is not None:
        return [(lease_of_range(r), False) for r in (yield ReadRanges())]
    return [(lease, True) for lease in stored]


def pending_flow(
    lease: Lease, stored: bool, max_changes: int, estimate_from: EstimateFrom
) -> Generator[Op, Any, PendingChanges]:
    """A lease's ``PendingChanges`` (``ChangeFeedEstimator.get_pending``): its first changes,
    page by page from its checkpoint (or ``estimate_from``), at most ``max_changes``."""
    start = estimate_start(lease, estimate_from)
    if start is not None:
        ranged = yield from _ranged(lease)
        start = None if ranged is None else start
        lease = ranged or lease
    if start is None:
        return pending(lease, stored=stored, headers=None, changes=[], complete=False, read=False)
    position, headers, complete = lease.continuation, None, False
    changes: list[dict[str, Any]] = []
    while len(changes) < max_changes:
        page = yield ReadPage(lease, position, start, max_changes - len(changes))
        if page.gone:
            return pending(
                lease, stored=stored, headers=None, changes=[], complete=False, read=False
            )
        headers = page.headers if headers is None else headers
        if not page.items:
            complete = True
            break
        changes.extend(page.items)
        position = page.etag
    return pending(
        lease, stored=stored, headers=headers, changes=changes, complete=complete, read=True
    )


def _ranged(lease: Lease) -> Generator[Op, Any, Lease | None]:
    """``lease`` with its range: as it is, or (a version-0 lease written without one) with its
    partition key range's; None when no live range has its token."""
    if lease.feed_range is not None:
        return lease
    ranges = yield ReadRanges()
    found = next((r for r in ranges if r.id == lease.lease_token), None)
    return None if found is None else lease.evolve(feed_range=found.range)
