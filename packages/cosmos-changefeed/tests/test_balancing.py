"""Equal-partitions balancing as .NET's ``EqualPartitionsBalancingStrategy`` (cases after its
tests, Microsoft.Azure.Cosmos.Tests/ChangeFeed/EqualPartitionsBalancingStrategyTests.cs)."""

from __future__ import annotations

import datetime as dt

from cosmos_changefeed import Lease
from cosmos_changefeed._balancing import Round, plan_round, select_leases_to_take
from cosmos_changefeed._leases import HandOver

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


# -- the fair share beside hand-overs and .NET instances (``plan_round``) ---------------------


def ours(token: str, owner: str | None, stamp: str = FRESH, **more: object) -> Lease:
    """A lease last written by this package (``handOver`` a member: its owner hands over)."""
    return lease(token, owner, stamp).evolve(hands_over=True, **more)


def plan(leases: list[Lease], me: str = "me", **options: bool) -> Round:
    return plan_round(leases, me, 60.0, NOW, **options)


def done(round_: Round) -> tuple[list[Lease], list[Lease]]:
    """The round as a processor runs it, every attempt a success: (taken, asked for)."""
    taken, asked = [], []
    for lease_ in round_.to_try():
        round_.tried(lease_, "acquired")
        taken.append(lease_)
    for lease_ in round_.to_ask():
        round_.asked(lease_, "acquired")
        asked.append(lease_)
    return taken, asked


def test_an_instance_with_none_asks_for_one_lease_of_an_owner_that_hands_over() -> None:
    """Four leases on a, none available: a newcomer's target is 2, and it asks for one of a's
    surplus (a hands it over after its batch in flight) -- it takes nothing from under a."""
    round_ = plan([ours(str(i), "a") for i in range(4)])
    assert round_.target == 2
    taken, asked = done(round_)
    assert taken == []
    assert len(asked) == 1 and asked[0].owner == "a"  # one request, to be counted


def test_a_live_request_counts_its_instance_and_the_owner_hands_the_lease_over() -> None:
    """a holds four; b asked for lease 0 a second ago: a counts b (targets 2 and 2), hands
    lease 0 over and gives one more back."""
    requested = HandOver("b", "2026-01-01T11:59:59Z")
    leases = [ours("0", "a", hand_over=requested)] + [ours(str(i), "a") for i in range(1, 4)]
    round_ = plan(leases, me="a")
    assert round_.target == 2 and round_.leaving == 1
    assert next(x.lease_token for x in round_.release) == "0"
    assert len(round_.release) == 2
    theirs = plan(leases, me="b")
    assert theirs.coming == 1 and theirs.wanted == 1  # one more, as a gives it back


def test_a_request_older_than_the_expiration_interval_counts_for_nothing() -> None:
    stale = HandOver("b", "2026-01-01T11:58:00Z")
    round_ = plan([ours("0", "a", hand_over=stale), ours("1", "a")], me="a")
    assert round_.target == 2 and round_.release == []


def test_from_an_owner_that_does_not_hand_over_what_is_missed_is_taken() -> None:
    """.NET's leases (no ``handOver``): never given back, so taken as .NET takes them from
    under their owner -- what this instance misses of its share, in one round (.NET: one)."""
    round_ = plan([lease(str(i), "dotnet") for i in range(4)])
    assert round_.target == 2
    taken, asked = done(round_)
    assert asked == [] and len(taken) == 2 and {x.owner for x in taken} == {"dotnet"}


def test_the_one_lease_more_goes_to_the_instances_that_do_not_hand_over() -> None:
    """Five leases, two instances: .NET's balancing wants ceil(5/2) = 3; the fair share gives
    the third to the .NET instance, whatever the holdings."""
    leases = [ours("0", "me"), ours("1", "me"), ours("2", "me"), lease("3", "x"), lease("4", "x")]
    assert plan(leases).target == 2
    assert [x.lease_token for x in plan(leases).release] != []


def test_available_leases_first_in_the_stores_order_are_left_to_dotnet_instances() -> None:
    """.NET takes available leases in the store's order: as many as its instances miss are
    left to them (here x misses 2 of its 3), the others are this instance's to take."""
    leases = [lease("0", None), lease("1", None), lease("2", None), lease("3", "x")]
    leases += [ours("4", "me")]
    round_ = plan(leases)
    assert sorted(x.lease_token for x in round_.candidates) == ["2"]


def test_at_its_share_an_instance_relays_a_lease_from_dotnet_beyond_dotnets_target() -> None:
    """x (.NET) holds 5 of 8, y (.NET) none available to take and 1; me holds 2: .NET's own
    target is ceil(8/3) = 3, y misses 2. me, at its share, takes from x beyond 3 and gives as
    many of its own back, for y to take (y takes only what is available)."""
    leases = [lease(str(i), "x") for i in range(5)] + [lease("5", "y")]
    leases += [ours("6", "me"), ours("7", "me")]
    round_ = plan(leases)
    taken, _ = done(round_)
    assert taken and all(x.owner == "x" for x in taken)
    assert len([x for x in round_.release if x.owner == "me"]) == len(taken)


def test_a_relay_takes_from_dotnet_beyond_its_fair_share_even_at_dotnets_own_target() -> None:
    """11 leases, 5 instances (fair share 2, one more for one .NET instance; .NET's own target
    ceil(11/5) = 3): x and y (.NET) hold 3, z (.NET) 1, me and o 2. y is at .NET's target but
    beyond its fair share, z short of its: me, at its share, takes y's third lease and gives one
    of its own back for z. (Relaying only from beyond .NET's target, none moved: a .NET
    instance out of sight or behind a peer in the store's order stayed short.)"""
    leases = [lease(str(i), "x") for i in range(3)] + [lease(str(i), "y") for i in range(3, 6)]
    leases += [lease("6", "z"), ours("7", "me"), ours("8", "me"), ours("9", "o"), ours("10", "o")]
    round_ = plan(leases)
    taken, _ = done(round_)
    assert [x.owner for x in taken] == ["y"]
    assert [x.owner for x in round_.release] == ["me"]


def test_no_relay_while_every_dotnet_instance_holds_its_fair_share() -> None:
    """11 leases, 5 instances (fair share 2, one more for x; .NET's own target 3): x and y
    (.NET) hold 3, z (.NET) 2 -- below .NET's target, at its share --, me 2, o 1. y's surplus
    is o's to take; me, at its share, relays nothing (z would take the lease given back, then
    be over its share, taken from, and take again, round after round)."""
    leases = [lease(str(i), "x") for i in range(3)] + [lease(str(i), "y") for i in range(3, 6)]
    leases += [lease("6", "z"), lease("7", "z"), ours("8", "me"), ours("9", "me")]
    leases += [ours("10", "o")]
    round_ = plan(leases)
    assert done(round_) == ([], []) and round_.release == []
    taken, _ = done(plan(leases, me="o"))
    assert [x.owner for x in taken] == ["y"]


def test_under_429s_an_instance_asks_for_all_it_misses() -> None:
    leases = [ours(str(i), "a") for i in range(6)]
    assert len(done(plan(leases))[1]) == 1
    assert len(done(plan(leases, pressed=True))[1]) == 3


def test_at_a_first_start_an_instance_far_under_its_share_asks_for_one_lease_at_a_time() -> None:
    """15 leases, three instances (5 each): x (.NET) holds 3, and the 2 available are left to
    it; a holds 8, me 2. At the fleet's first start (a lease available was never taken: no
    ``timestamp``), me, under half its share, asks for one of a's surplus though it holds some
    -- one a round, not all it misses. Later (the leases available were written before: given
    back) it waits for a to give its surplus back, as an instance that joins a fleet does."""
    leases = [lease(str(i), "x") for i in range(3)] + [ours(str(i), "a") for i in range(3, 11)]
    leases += [ours("11", "me"), ours("12", "me")]
    first = plan(leases + [lease(str(i), None).evolve(timestamp=None) for i in (13, 14)])
    assert first.target == 5 and first.candidates == []
    taken, asked = done(first)
    assert taken == [] and [x.owner for x in asked] == ["a"]
    assert done(plan(leases + [lease(str(i), None) for i in (13, 14)])) == ([], [])
