"""Equal-partitions balancing as .NET's ``EqualPartitionsBalancingStrategy`` (cases after its
tests, Microsoft.Azure.Cosmos.Tests/ChangeFeed/EqualPartitionsBalancingStrategyTests.cs)."""

from __future__ import annotations

import datetime as dt

from cosmos_changefeed import Lease
from cosmos_changefeed._balancing import select_leases_to_take

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
FRESH = "2026-01-01T11:59:50Z"
STALE = "2026-01-01T11:58:00Z"


def lease(token: str, owner: str | None, stamp: str = FRESH) -> Lease:
    return Lease(id=f"p..{token}", lease_token=token, owner=owner, timestamp=stamp)


def take(leases: list[Lease], me: str = "me") -> list[str]:
    return [x.lease_token for x in select_leases_to_take(leases, me, 60.0, NOW)]


def test_an_instance_alone_takes_every_available_lease() -> None:
    assert take([lease(str(i), None) for i in range(4)]) == ["0", "1", "2", "3"]


def test_expired_leases_are_available_and_fresh_ones_are_their_owners() -> None:
    leases = [lease("0", "a", STALE), lease("1", "a"), lease("2", None), lease("3", " ")]
    # two instances (a, me), four leases: target 2; a holds 1 fresh lease
    assert take(leases) == ["0", "2"]


def test_an_instance_at_its_target_takes_nothing() -> None:
    assert take([lease("0", "me"), lease("1", "a")]) == []


def test_one_lease_is_stolen_from_the_instance_with_the_most() -> None:
    leases = [lease("0", "a"), lease("1", "a"), lease("2", "a"), lease("3", "b")]
    # three instances, four leases: target 2; a has 3 > 2 - 1 (me needs 2)
    assert take(leases) == ["0"]


def test_the_last_of_equals_is_stolen_from_and_none_when_each_holds_its_target() -> None:
    leases = [lease("0", "a"), lease("1", "a"), lease("2", "b"), lease("3", "b")]
    # target 2 (3 instances), me needs 2: a steal needs more than 1 -> a has 2: steal
    assert take(leases) == ["2"]  # the last of equals in the order met: b
    assert take([lease("0", "a"), lease("1", "b")]) == []  # target 1, each holds 1


def test_the_owner_to_steal_from_is_matched_ignoring_case() -> None:
    leases = [lease("0", "A"), lease("1", "a"), lease("2", "a")]
    # counts are by exact name: a holds 2, A 1; the lease taken is a's first, met ignoring case
    assert take(leases) == ["0"]


def test_equal_partitions_balancing_case_by_case() -> None:
    """The cases funcstack's trigger held its own balancer to, on the package's."""

    def aged(token: str, owner: str | None, age: float = 0.0) -> Lease:
        stamp = (NOW - dt.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return lease(token, owner, stamp)

    # unowned and expired leases first, up to the target
    assert take([aged("a", None), aged("b", None), aged("c", None)]) == ["a", "b", "c"]
    assert take([aged("a", "x"), aged("b", "x", 61), aged("c", None), aged("d", "x")]) == ["b", "c"]
    # nothing to take when at the target: 4 leases, 2 instances, 2 each
    assert take([aged("a", "me"), aged("b", "me"), aged("c", "x"), aged("d", "x")]) == []
    # none free: steal one from the instance with the most, when it has more than the target
    assert take([aged("a", "x"), aged("b", "x"), aged("c", "x"), aged("d", "x")]) == ["a"]
    # 3 instances, 4 leases: target 2; a newcomer needing 2 steals from one holding 2 (the
    # last of those with the most, its first lease)
    assert take([aged("a", "x"), aged("b", "y"), aged("c", "x"), aged("d", "y")]) == ["b"]
    assert take([aged("a", "x"), aged("b", "x"), aged("c", "y"), aged("d", "y")]) == ["c"]
    # ... but once it has one, it does not steal from one holding the target
    assert take([aged("a", "x"), aged("b", "x"), aged("c", "y"), aged("d", "me")]) == []
    # an expired owner does not count as an instance
    assert take([aged("a", "gone", 61), aged("b", "me")]) == ["a"]
    assert take([]) == []
