"""A lease's continuation as the trigger reads it: the ranges it names (several once the SDK
met a split) and its cut to a child lease's range. The continuations are written in the shape
azure-cosmos 4.17 writes (``ChangeFeedStateV2``); test_cosmos_lease_store reads the SDK's own
through a real split."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from funcstack.functions_host._cosmos_trigger.continuation import for_range, ranges


def rng(low: str, high: str) -> dict[str, Any]:
    return {"min": low, "max": high, "isMinInclusive": True, "isMaxInclusive": False}


def sdk_continuation(scope: dict[str, Any], *entries: tuple[str | None, dict[str, Any]]) -> str:
    state = {
        "v": "v2",
        "containerRid": "gAABAIAAAAE=",
        "mode": "LatestVersion",
        "startFrom": {"Type": "Beginning"},
        "continuation": {
            "v": "v2",
            "rid": "gAABAIAAAAE=",
            "Range": scope,
            "continuation": [{"token": token, "range": part} for token, part in entries],
        },
    }
    return base64.b64encode(json.dumps(state).encode()).decode()


def decoded(continuation: str) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(base64.b64decode(continuation))
    return state


def test_the_ranges_a_continuation_reads() -> None:
    parent = rng("", "20")
    assert ranges(sdk_continuation(parent, ('"20"', parent))) == [parent]
    after_split = sdk_continuation(parent, ('"20"', rng("12", "20")), ('"38"', rng("", "12")))
    assert ranges(after_split) == [rng("12", "20"), rng("", "12")]
    assert ranges(None) == [] and ranges('"123"') == [] and ranges("not base64!") == []


def test_a_continuation_cut_to_a_childs_range_keeps_its_part_and_etag() -> None:
    parent = rng("", "20")
    after_split = sdk_continuation(parent, ('"20"', rng("12", "20")), ('"38"', rng("", "12")))
    first, second = (
        decoded(for_range(after_split, {"Range": rng("", "12")})),
        decoded(for_range(after_split, rng("12", "20"))),
    )
    assert first["continuation"]["Range"] == rng("", "12")
    assert first["continuation"]["continuation"] == [{"token": '"38"', "range": rng("", "12")}]
    assert second["continuation"]["continuation"] == [{"token": '"20"', "range": rng("12", "20")}]
    assert {k: v for k, v in first.items() if k != "continuation"} == {
        k: v for k, v in decoded(after_split).items() if k != "continuation"
    }
    # before the SDK met the split: one entry, cut to each child with the parent's etag
    before = sdk_continuation(parent, ('"20"', parent))
    assert decoded(for_range(before, rng("", "12")))["continuation"]["continuation"] == [
        {"token": '"20"', "range": rng("", "12")}
    ]


@pytest.mark.parametrize(
    ("continuation", "error"),
    [
        ('"123"', "not an azure-cosmos change-feed continuation"),
        (sdk_continuation(rng("", "20"), ('"5"', rng("", "20"))), "names nothing of the range"),
        (sdk_continuation(rng("", "FF"), (None, rng("", "FF"))), "a range without a token"),
    ],
)
def test_a_continuation_that_cannot_be_cut_is_refused(continuation: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        for_range(continuation, rng("20", "FF") if "names nothing" in error else rng("", "10"))
