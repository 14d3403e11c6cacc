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
from dataclasses import dataclass, field
from typing import Any

from cosmos_changefeed._ranges import MAX_EPK, MIN_EPK, EpkRange

LATEST_VERSION = "LatestVersion"
ALL_VERSIONS_AND_DELETES = "AllVersionsAndDeletes"


def sdk_continuation(container_rid: str, feed_range: EpkRange, etag: str, mode: str) -> str:
    """azure-cosmos's continuation that reads ``feed_range`` from ``etag``."""
    return sdk_token(container_rid, [(feed_range, etag)], feed_range, mode)


def sdk_token(
    container_rid: str, entries: list[tuple[EpkRange, str]], scope: EpkRange, mode: str
) -> str:
    """azure-cosmos's continuation of a read of ``scope`` that is at ``entries`` (per range,
    its etag): one entry for a lease's range, one per physical partition for the whole
    container (what its pull model leaves)."""

    def bounds(rng: EpkRange) -> dict[str, object]:
        return {"min": rng.min, "max": rng.max, "isMinInclusive": True, "isMaxInclusive": False}

    state = {
        "v": "v2",
        "containerRid": container_rid,
        "mode": mode,
        "startFrom": {"Type": "Beginning"},
        "continuation": {
            "v": "v2",
            "rid": container_rid,
            "continuation": [{"token": etag, "range": bounds(rng)} for rng, etag in entries],
            "Range": bounds(scope),
        },
    }
    return base64.b64encode(json.dumps(state).encode("utf-8")).decode("ascii")


@dataclass(frozen=True)
class SdkState:
    """What an azure-cosmos continuation says: the container, the mode, and per range of the
    container its etag (the position after the last page read of it)."""

    container_rid: str
    mode: str
    entries: list[tuple[EpkRange, str]]

    def covers_everything(self) -> bool:
        """Whether the entries tile the whole EPK space, as a whole container's read does."""
        edge = MIN_EPK
        for rng, _ in sorted(self.entries, key=lambda entry: entry[0]):
            if rng.min > edge:
                return False
            edge = max(edge, rng.max)
        return edge >= MAX_EPK

    def etag_for(self, feed_range: EpkRange) -> str | None:
        """Where ``feed_range`` resumes: the earliest etag of the entries overlapping it (the
        service's etags are LSNs: some changes come again, none is skipped); None when none
        does."""
        return earliest([token for rng, token in self.entries if rng.overlaps(feed_range)])


def sdk_state(continuation: str) -> SdkState | None:
    """An azure-cosmos continuation read; None when ``continuation`` is not one (a raw etag is
    not)."""
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
    return SdkState(str(state.get("containerRid") or ""), str(state.get("mode") or ""), found)


def etags(continuation: str) -> list[tuple[EpkRange, str]] | None:
    """The (range, etag) entries of an azure-cosmos continuation, in its order; None when
    ``continuation`` is not one (a raw etag is not)."""
    state = sdk_state(continuation)
    return None if state is None else state.entries


def earliest(tokens: list[str]) -> str | None:
    """The earliest of etags (the lowest LSN; the first when they are not numbers)."""
    if not tokens:
        return None
    try:
        return min(tokens, key=lambda token: int(token.strip('"')))
    except ValueError:
        return tokens[0]


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
    return earliest([token for _, token in entries])


@dataclass(frozen=True)
class Continuation:
    """``start_from=Continuation(token)``: each lease without a checkpoint starts where a reader
    of the pull model stopped. ``token`` is azure-cosmos's change feed continuation of the whole
    monitored container (a ``query_items_change_feed`` pager's ``continuation_token``, or the
    ``etag`` of its last response), as .NET's ``ChangeFeedStartFrom.ContinuationToken``: a lease
    starts at the earliest position the token holds for its range (some changes may come
    again, none is skipped). Refused when made unless it is such a token over every range; at
    the processor's start, unless it is the monitored container's."""

    token: str
    container_rid: str = field(init=False)
    mode: str = field(init=False)
    state: SdkState = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.token is None:
            raise ValueError(
                "Continuation(None): the token is None -- azure-cosmos's pager leaves its "
                "continuation_token None when its read found no change (a read from 'now', or "
                "of an empty container): there is no position to start from. Start from the "
                "time of that read instead (start_from=<a timezone-aware datetime>: nothing "
                "written after it is skipped), or from 'now' (the processor's start)"
            )
        state = sdk_state(self.token) if isinstance(self.token, str) else None
        if state is None or not state.entries:
            raise ValueError(
                "Continuation: not an azure-cosmos change feed continuation (the "
                "continuation_token of a query_items_change_feed pager); a lease's own "
                "ContinuationToken is restored with restore_leases instead"
            )
        if not state.covers_everything():
            raise ValueError(
                "Continuation: the token covers only part of the container (a read of one "
                "feed range or partition key); the processor reads the whole container: start "
                "from a continuation of a read of the whole container"
            )
        object.__setattr__(self, "container_rid", state.container_rid)
        object.__setattr__(self, "mode", state.mode or LATEST_VERSION)
        object.__setattr__(self, "state", state)

    def check_container(self, container_rid: str) -> None:
        """Refuse a continuation of another container than ``container_rid``."""
        if self.container_rid and self.container_rid != container_rid:
            raise ValueError(
                f"start_from: the Continuation is of container {self.container_rid}, the "
                f"monitored container is {container_rid}: a continuation is a position in "
                "its own container's feed only"
            )

    def etag_for(self, feed_range: EpkRange) -> str:
        """Where a lease over ``feed_range`` starts."""
        found = self.state.etag_for(feed_range)
        if found is None:  # covers_everything: each range overlaps an entry
            raise ValueError(f"start_from: the Continuation holds no position for {feed_range}")
        return found
