"""Reading a lease's range from its raw etag through azure-cosmos. Pure.

A lease keeps the service's own continuation, the ``etag`` of the last change feed response
(.NET's ``ContinuationToken``). azure-cosmos 4.16+ reads a feed range from a position only
through its own continuation, base64 of a JSON state (``_change_feed/change_feed_state.py``
``ChangeFeedStateV2.to_dict`` with ``feed_range_composite_continuation_token.py`` and
``composite_continuation_token.py``)::

    {"v": "v2", "containerRid": <rid>, "mode": "LatestVersion" | "AllVersionsAndDeletes",
     "startFrom": {"Type": "Beginning"},
     "continuation": {"v": "v2", "rid": <rid>,
                      "continuation": [{"token": <etag>, "range": <range>}],
                      "Range": <range>}}

with ``<range>`` ``{"min", "max", "isMinInclusive": true, "isMaxInclusive": false}``. So
``sdk_continuation`` builds that state for one range and one etag -- **an SDK format, not a
public API**: ``tests/test_sdk_contract.py`` reads through the SDK with it and fails if the
SDK stops taking it. ``startFrom`` is ``Beginning``, which adds no header: the etag alone
(``If-None-Match``) says where to read from.

The legacy path (``partition_key_range_id=`` with a raw etag as ``continuation``) is not used:
in azure-cosmos 4.17.1 it does not send the range's id (``QueryItemsChangeFeed`` reads the
id from the options before the change feed state puts it there), so the read is the whole
container's (docs/dotnet-compatibility.md).

``etags`` reads the state back (a ``ContinuationToken`` the processor wrote before it kept raw
etags -- funcstack's trigger did -- is such a state: its single etag is the lease's position).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from cosmos_changefeed._ranges import EpkRange

LATEST_VERSION = "LatestVersion"
ALL_VERSIONS_AND_DELETES = "AllVersionsAndDeletes"


def sdk_continuation(container_rid: str, feed_range: EpkRange, etag: str, mode: str) -> str:
    """azure-cosmos's continuation that reads ``feed_range`` from ``etag``."""
    rng = {
        "min": feed_range.min,
        "max": feed_range.max,
        "isMinInclusive": True,
        "isMaxInclusive": False,
    }
    state = {
        "v": "v2",
        "containerRid": container_rid,
        "mode": mode,
        "startFrom": {"Type": "Beginning"},
        "continuation": {
            "v": "v2",
            "rid": container_rid,
            "continuation": [{"token": etag, "range": rng}],
            "Range": rng,
        },
    }
    return base64.b64encode(json.dumps(state).encode("utf-8")).decode("ascii")


def etags(continuation: str) -> list[tuple[EpkRange, str]] | None:
    """The (range, etag) entries of an azure-cosmos continuation, in its order; None when
    ``continuation`` is not one (a raw etag is not)."""
    try:
        state: Any = json.loads(base64.b64decode(continuation, validate=True))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(state, dict) or state.get("v") != "v2":
        return None
    entries = (state.get("continuation") or {}).get("continuation") or []
    found: list[tuple[EpkRange, str]] = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("range"), dict) and entry.get("token"):
            found.append((EpkRange.from_json(entry["range"]), str(entry["token"])))
    return found


def raw_etag(continuation: str | None) -> str | None:
    """A lease's position as a raw etag: ``continuation`` itself, or the etag of an azure-cosmos
    continuation written there by an older writer -- its single one, or, when it holds several
    (a split such a writer met), the earliest (the service's etags are LSNs: reading the whole
    range from the earliest delivers some changes again and skips none)."""
    if not continuation:
        return None
    entries = etags(continuation)
    if entries is None:
        return continuation
    tokens = [token for _, token in entries]
    if not tokens:
        return None
    try:
        return min(tokens, key=lambda token: int(token.strip('"')))
    except ValueError:
        return tokens[0]
