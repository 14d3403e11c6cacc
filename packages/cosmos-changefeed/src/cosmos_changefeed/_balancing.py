"""Which leases an instance takes and gives back in one balancing round. Pure; the sync and the
aio processor run a round every lease acquire interval, from one listing of the leases.

**The fair share** (``plan_round``). The instances are the owners of the leases that are not
expired, and this one; a lease without an owner (null or blank) or not updated within the
expiration interval is available. With N leases and W instances each instance's target is
N // W, and N % W of them -- those holding the most now, then by name: the fewest moves --
target one more, so that the targets add up to N and every instance computes the same ones. In
a round an instance:

* takes the leases the store says are its own but that it does not process (a restart under
  the same name; a lease whose processing ended without its release);
* under its target: takes available leases up to its target, in one round, in an order of its
  own (a hash of its name and the token), so that instances taking at once seldom try the same
  lease; an instance that holds none and finds none available steals **one** from an instance
  over its target -- from its **surplus**, the same leases for everyone (its leases ranked by a
  hash of their token), so that instances stealing from it at once contend for the same leases
  rather than take it below its target -- to be counted by the others (the rest comes as they
  give their surplus back: a lease given back has its batch in flight finished and checkpointed,
  where a stolen one's is given again by its new owner). When three leases in a row were taken
  by others since the listing (``LeaseLostError``), the listing is out of date: the round
  stops taking (at a cold start, where no instance sees the others, every instance would
  otherwise try every lease); so does a lease the store refused to write (throttled: the next
  round comes after a back-off);
* over its target: gives back its surplus (released as a stop releases a lease: the batch in
  flight finished and checkpointed), for the instances under theirs.

An instance that joins holds nothing, so the others do not count it until it holds a lease; it
counts itself, which lowers the others' targets below what they hold: their surplus is there
for it to steal one lease of at its first round. At their next round they count it, give their
surplus back, and it takes it at its next. A change of membership so comes to an even spread
(within one lease) in one to three acquire intervals, moving about the leases that must move
(docs/benchmarks.md).

**.NET's** ``EqualPartitionsBalancingStrategy`` (``select_leases_to_take``), kept for
comparison (the simulation's figures, docs/benchmarks.md): Azure/azure-cosmos-dotnet-v3,
``src/ChangeFeedProcessor/FeedManagement/EqualPartitionsBalancingStrategy.cs``
(``SelectLeasesToTake``): the target is ``ceil(leases / instances)``, at least 1; an instance
under its target takes available leases up to what it needs, in the order the store listed them,
else steals **one** lease from the instance with the most (the last of equals in the order met,
``FindWorkerWithMostPartitions``; its first lease in the store's order) when that instance holds
more than the target (more than the target - 1 while this one needs more than one). Owners are
compared as .NET compares them: the counts by the exact name, the lease to steal ignoring case.
It never gives a lease back: an instance over its target loses leases only to steals, one per
instance per round.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from cosmos_changefeed._leases import Lease

#: What came of an attempt to acquire a lease: taken; already this instance's (or it stops);
#: taken by another instance since the listing; refused by the store (throttled, unreachable).
Outcome: TypeAlias = Literal["acquired", "skipped", "lost", "failed"]
#: Leases found taken since the listing, one after the other, after which a round stops taking:
#: the listing is out of date (others take at the same time), the next round's is not.
LOSSES_IN_A_ROW = 3


def _rank(*parts: str) -> bytes:
    """A stable pseudo-random order (the same in every process: not ``hash()``)."""
    return hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=8).digest()


@dataclass
class Round:
    """One round's plan, and what came of it (``acquired``)."""

    #: This instance's target.
    target: int
    #: The leases the store says are this instance's.
    mine: list[Lease]
    #: Leases to take, in the order to try them: available ones, then others' surplus.
    candidates: list[Lease]
    #: How many of ``candidates`` are others' (at the end), and how many of those to take.
    steals: int = 0
    steal_limit: int = 0
    #: This instance's own surplus, to give back.
    release: list[Lease] = field(default_factory=list)
    #: Stop after ``LOSSES_IN_A_ROW`` leases found taken since the listing (.NET: go on).
    stop_when_outdated: bool = True
    _taken: int = 0
    _stolen: int = 0
    _losses: int = 0

    @property
    def wanted(self) -> int:
        """How many more leases this instance takes in this round."""
        return self.target - len(self.mine) - self._taken

    def to_try(self) -> Iterator[Lease]:
        """The candidates, as long as they are wanted."""
        first_steal = len(self.candidates) - self.steals
        for place, lease in enumerate(self.candidates):
            if self.wanted <= 0 or self._losses >= LOSSES_IN_A_ROW:
                return
            if place >= first_steal and self._stolen >= self.steal_limit:
                return
            yield lease

    def tried(self, lease: Lease, outcome: Outcome) -> None:
        """The outcome of an attempt to acquire ``lease``."""
        if outcome == "acquired":
            self._taken += 1
            self._losses = 0
            if lease.owner and lease in self.candidates[len(self.candidates) - self.steals :]:
                self._stolen += 1
        elif outcome == "lost" and self.stop_when_outdated:
            self._losses += 1
        elif outcome == "failed" and self.stop_when_outdated:
            self._losses = LOSSES_IN_A_ROW  # the store refused (throttled): no more this round


def plan_round(
    leases: Sequence[Lease], instance_name: str, expiration: float, now: dt.datetime
) -> Round:
    """The fair-share round of ``instance_name`` (see the module)."""
    me = instance_name.lower()
    owners: dict[str, list[Lease]] = {instance_name: []}
    available: list[Lease] = []
    for lease in leases:
        owner = lease.owner or ""
        if not owner.strip() or lease.is_expired(expiration, now):
            available.append(lease)
        else:
            owners.setdefault(instance_name if owner.lower() == me else owner, []).append(lease)
    lo, extra = divmod(len(leases), len(owners))
    ranked = sorted(owners, key=lambda name: (-len(owners[name]), name))
    targets = {name: lo + (1 if place < extra else 0) for place, name in enumerate(ranked)}
    mine, target = owners[instance_name], targets[instance_name]
    surplus = [
        lease
        for name, held in owners.items()
        if name != instance_name
        for lease in _surplus(held, len(held) - targets[name])
    ]

    def order(lease: Lease) -> bytes:
        return _rank(instance_name, lease.lease_token)

    return Round(
        target=target,
        mine=mine,
        candidates=sorted(available, key=order) + sorted(surplus, key=order),
        steals=len(surplus),
        steal_limit=0 if mine else 1,
        release=_surplus(mine, len(mine) - target),
    )


def _surplus(held: list[Lease], count: int) -> list[Lease]:
    """An owner's ``count`` leases to give up: the same ones whoever asks."""
    if count <= 0:
        return []
    return sorted(held, key=lambda lease: _rank(lease.lease_token), reverse=True)[:count]


def dotnet_round(
    leases: Sequence[Lease], instance_name: str, expiration: float, now: dt.datetime
) -> Round:
    """.NET's round (``select_leases_to_take``) as a ``Round``: nothing given back, every
    candidate tried."""
    me = instance_name.lower()
    mine = [lease for lease in leases if (lease.owner or "").lower() == me]
    chosen = select_leases_to_take(leases, instance_name, expiration, now)
    return Round(
        target=len(mine) + len(chosen),
        mine=mine,
        candidates=chosen,
        stop_when_outdated=False,
    )


#: What a processor's balancing runs each round.
Planner = Callable[[Sequence[Lease], str, float, dt.datetime], Round]


def select_leases_to_take(
    leases: Sequence[Lease], instance_name: str, expiration: float, now: dt.datetime
) -> list[Lease]:
    """The leases ``instance_name`` should try to acquire now, as .NET chooses them."""
    counts: dict[str, int] = {}
    available: list[Lease] = []
    by_token: dict[str, Lease] = {}
    for lease in leases:
        by_token[lease.lease_token] = lease
        if not (lease.owner or "").strip() or lease.is_expired(expiration, now):
            available.append(lease)
        else:
            assert lease.owner is not None
            counts[lease.owner] = counts.get(lease.owner, 0) + 1
    counts.setdefault(instance_name, 0)
    if not by_token:
        return []
    partitions, workers = len(by_token), len(counts)
    target = math.ceil(partitions / workers) if partitions > workers else 1
    needed = target - counts[instance_name]
    if needed <= 0:
        return []
    if available:
        return available[:needed]
    most_owner, most = "", 0
    for name, count in counts.items():
        if most <= count:
            most_owner, most = name, count
    if most > target - (1 if needed > 1 else 0):
        victim = most_owner.lower()
        return [next(lease for lease in by_token.values() if (lease.owner or "").lower() == victim)]
    return []
