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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


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
