"""What the Cosmos DB trigger reads in a lease's continuation: the Python SDK's change-feed
continuation (azure-cosmos 4.x, ``_change_feed/change_feed_state.py`` ``ChangeFeedStateV2`` and
``feed_range_composite_continuation_token.py``), base64 of a JSON state naming the lease's
feed range and one ``{"token": <etag>, "range": <EPK range>}`` entry per physical partition it
reads.

A split as the trigger meets it: the .NET change feed processor's read of a lease whose
partition split is answered 410 / sub-status 1002 and the processor replaces the lease by its
children (``FeedProcessorCore.HandleFailedRequest`` -> ``FeedRangeGoneException``). The Python
SDK answers that 410 itself: it re-reads the partition key ranges and replaces the parent's
entry in its continuation by one entry per child, each from the parent's etag (``ChangeFeed
FetcherV2.fetch_next_block``, ``FeedRangeCompositeContinuation.handle_feed_range_gone``), and
reads on. So a lease's range spans several physical partitions exactly when the continuation
the SDK hands back names several ranges (``ranges``); each child lease then gets the parent's
continuation cut to its own range (``for_range``), the equivalent of the .NET processor giving
each child the parent's etag: it reads its part from where the parent was, nothing lost, and
nothing of the other children's parts.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

#: The keys of an EPK range in the SDK's JSON (``Range.to_dict``).
_MIN, _MAX = "min", "max"


def ranges(continuation: str | None) -> list[dict[str, Any]]:
    """The EPK ranges the continuation's entries name (one per physical partition it reads),
    in its order; [] for None or a continuation that is not the SDK's change-feed state."""
    state = _decode(continuation)
    if state is None:
        return []
    entries = (state.get("continuation") or {}).get("continuation") or []
    return [
        dict(entry["range"])
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("range"), dict)
    ]


def for_range(continuation: str, feed_range: dict[str, Any]) -> str:
    """``continuation`` cut to ``feed_range`` (a child lease's range, within the parent's):
    the same state (container, mode, start) scoped to ``feed_range``, with the entries that
    overlap it, each clipped to it and keeping its etag. ValueError when the continuation
    cannot be read or names nothing of ``feed_range``."""
    state = _decode(continuation)
    if state is None:
        raise ValueError("not an azure-cosmos change-feed continuation")
    scope = _bounds(feed_range)
    composite = dict(state.get("continuation") or {})
    kept = []
    for entry in composite.get("continuation") or []:
        low, high = _bounds(entry["range"])
        low, high = max(low, scope[0]), min(high, scope[1])
        if low < high:
            kept.append({**entry, "range": _range(low, high)})
    if not kept:
        raise ValueError(f"the continuation names nothing of the range {scope[0]!r}-{scope[1]!r}")
    if any(entry.get("token") is None for entry in kept):
        raise ValueError("the continuation has a range without a token")
    composite.update({"continuation": kept, "Range": _range(*scope)})
    cut = {**state, "continuation": composite}
    return base64.b64encode(json.dumps(cut).encode("utf-8")).decode("ascii")


def _decode(continuation: str | None) -> dict[str, Any] | None:
    if not continuation:
        return None
    try:
        state = json.loads(base64.b64decode(continuation, validate=True))
    except (binascii.Error, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("v") == "v2" else None


def _bounds(feed_range: dict[str, Any]) -> tuple[str, str]:
    """(min, max) of an EPK range (min inclusive, max exclusive, as every range the SDK and the
    processor write); EPKs compare as strings, as the SDKs compare them."""
    rng = feed_range.get("Range", feed_range)
    return str(rng[_MIN]), str(rng[_MAX])


def _range(low: str, high: str) -> dict[str, Any]:
    return {_MIN: low, _MAX: high, "isMinInclusive": True, "isMaxInclusive": False}
