"""Pure parts: what replaces a gone lease (``PartitionSynchronizerCore``), which ranges lack a
lease, and the estimator's arithmetic (``ChangeFeedEstimatorIterator``)."""

from __future__ import annotations

import pytest

from cosmos_changefeed import Lease
from cosmos_changefeed._estimation import lsn_from_session_token, remaining_work
from cosmos_changefeed._ranges import EpkRange, PartitionKeyRange
from cosmos_changefeed._splits import ChildLease, NoRangeError, missing_ranges, plan_gone

A, B, C = "", "40", "80"
R0 = PartitionKeyRange("0", EpkRange(A, "FF"))
KIDS = [PartitionKeyRange("1", EpkRange(A, B)), PartitionKeyRange("2", EpkRange(B, "FF"))]


def test_a_version_0_lease_that_split_is_replaced_by_version_0_leases_of_its_children() -> None:
    parent = Lease(id="p..0", lease_token="0", feed_range=EpkRange(A, "FF"))
    plan = plan_gone(parent, KIDS)
    assert plan.children == (ChildLease(EpkRange(A, B), "1"), ChildLease(EpkRange(B, "FF"), "2"))
    assert plan.delete_parent


def test_a_version_0_lease_that_merged_becomes_an_epk_lease_over_its_own_range() -> None:
    parent = Lease(id="p..1", lease_token="1", feed_range=EpkRange(A, B))
    plan = plan_gone(parent, [R0])
    assert plan.children == (ChildLease(EpkRange(A, B)),) and plan.delete_parent


def test_an_epk_lease_that_split_is_tiled_by_epk_children_and_one_redirected_stays() -> None:
    epk = Lease(id="p..20-C0", lease_token="20-C0", version=1, feed_range=EpkRange("20", "C0"))
    ranges = [
        PartitionKeyRange("3", EpkRange(A, B)),
        PartitionKeyRange("4", EpkRange(B, C)),
        PartitionKeyRange("5", EpkRange(C, "FF")),
    ]
    plan = plan_gone(epk, ranges)
    assert [c.feed_range for c in plan.children] == [
        EpkRange("20", B),
        EpkRange(B, C),
        EpkRange(C, "C0"),
    ]
    assert all(c.range_id is None for c in plan.children) and plan.delete_parent
    redirect = plan_gone(epk, [R0])
    assert redirect.children == () and not redirect.delete_parent
    with pytest.raises(NoRangeError):
        plan_gone(epk, [])


def test_missing_ranges_skip_those_a_version_0_lease_names_or_an_epk_lease_borders() -> None:
    assert missing_ranges(KIDS, []) == KIDS
    named = [Lease(id="p..1", lease_token="1")]
    assert missing_ranges(KIDS, named) == [KIDS[1]]
    epk = [Lease(id="p..x", lease_token="x", version=1, feed_range=EpkRange("30", "FF"))]
    assert missing_ranges(KIDS, epk) == [KIDS[0]]  # shares range 2's max


@pytest.mark.parametrize(
    ("token", "lsn"),
    [
        ("0:-1#12345", 12345),  # pkrangeid:version#lsn
        ("0:12345", 12345),  # pkrangeid:lsn
        ("0:-1#12345#Region1=1#Region2=2", 12345),  # the global LSN of a multi-region token
        ("", 0),
        (None, 0),
        ("0:not-a-number", 0),
    ],
)
def test_the_latest_lsn_is_read_from_the_session_token_as_dotnet_reads_it(
    token: str | None, lsn: int
) -> None:
    assert lsn_from_session_token(token) == lsn


def test_remaining_work_as_dotnet_estimates_it() -> None:
    assert remaining_work("0:-1#100", [{"_lsn": 91}]) == 10  # 100 - (91 - 1)
    assert remaining_work("0:-1#100", []) == 0  # 304: caught up
    assert remaining_work("0:-1#100", [{"id": "no lsn"}]) == 1  # below 0: counts 1
    assert remaining_work("0:-1#5", [{"_lsn": 9}]) == 0  # never below 0


def test_a_continuation_an_older_writer_left_as_the_sdks_state_is_read_from_its_etag() -> None:
    from cosmos_changefeed._continuation import raw_etag, sdk_continuation

    one = sdk_continuation("rid", EpkRange(A, "FF"), '"17"', "LatestVersion")
    assert raw_etag(one) == '"17"'
    assert raw_etag('"17"') == '"17"' and raw_etag(None) is None
    import base64
    import json

    state = json.loads(base64.b64decode(one))
    state["continuation"]["continuation"] = [
        {"token": '"30"', "range": {"min": A, "max": B}},
        {"token": '"12"', "range": {"min": B, "max": "FF"}},
    ]
    several = base64.b64encode(json.dumps(state).encode()).decode()
    assert raw_etag(several) == '"12"'  # the earliest: again rather than never
