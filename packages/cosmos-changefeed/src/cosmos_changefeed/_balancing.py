"""Which leases an instance takes and gives back in one balancing round. Pure; the sync and the
aio processor run a round every lease acquire interval, from one listing of the leases.

**The fair share** (``plan_round``). The instances are the owners of the leases that are not
expired, the instances that asked for one (a live hand-over request, ``_handover``), and this
one; a lease without an owner (null or blank) or not updated within the expiration interval is
available. With N leases and W instances each instance's target is N // W, and N % W of them
target one more -- first the instances that do not hand over (.NET's: they aim at
``ceil(N / W)`` themselves and never give a lease back), then those holding the most now, then
by name: the fewest moves --, so that the targets add up to N and every instance computes the
same ones. A lease its owner was asked for counts as leaving it, and as coming to the instance
that asked. In a round an instance:

* takes the leases the store says are its own but that it does not process (a restart under
  the same name; a lease handed over to it; a lease whose processing ended without its release);
* under its target: takes available leases up to its target, in one round, in an order of its
  own (a hash of its name and the token), so that instances taking at once seldom try the same
  lease. An instance that holds none, has none coming and finds none available **asks** for
  one of an instance over its target (``_handover``: the owner hands it over once its batch in
  flight is handled and checkpointed) -- from its **surplus**, the same leases for everyone (its
  leases ranked by a hash of their token) -- to be counted by the others: the rest comes as they
  give their surplus back (while the lease container throttles, it asks for all it misses:
  the owners see a request at their next write, and list the leases seldom). When three leases
  in a row were taken by others since the listing (``LeaseLostError``), the listing is out of
  date: the round stops taking (at a cold start, where no instance sees the others, every
  instance would otherwise try every lease); so does a lease the store refused to write
  (throttled: the next round comes after a back-off);
* hands over the leases another instance asked for, and, over its target, gives back its
  surplus (each released as a stop releases a lease: the batch in flight finished and
  checkpointed -- to the instance that asked, or for the instances under theirs to take): an
  owner sees a request at its next write of the lease or its next round, whichever comes first,
  so the lease reaches the instance that asked at that instance's next round.

**Beside instances that do not hand over** (.NET's processor; a lease it wrote last has no
``handOver``), which take only available leases or steal one a round from the instance with the
most, and never give back:

* an instance under its target takes what it misses from such an owner's surplus in one round,
  as it would take available leases (.NET would take one a round); its batch in flight may be
  given again, as in a fleet of .NET instances;
* the first available leases in the store's order -- the order .NET takes them in -- are left to
  them, as many as they miss of their targets;
* at the fleet's first start (some lease available was never taken: its ``timestamp`` is
  null), an instance under half its target with none coming asks for one lease at a time (not
  only while it holds none): of another's surplus, else of the instance that hands over and
  holds the most, at its target or over. The leases available may all be left to them, and
  owners at their targets have no surplus, so it could otherwise hold two leases for most of a
  minute while its peers hold their share. Not later (a scale-out, a restart): there the
  instances that join ask as they would, and asking one more at a time slowed the +50 %;
* an instance at its target **relays** while one of them is short of its share: it takes from
  such an owner's surplus (beyond its fair share) as many leases as those instances miss of
  .NET's own target (``ceil(N / owners)``, what they take of the leases available), and gives
  as many of its own back, for them to take. .NET's target, not the fair share, and the leases
  already available not subtracted: .NET instances short of their target all take the
  available leases in the store's order at once (the one a moment earlier wins them), and
  while a .NET instance that holds none is in no listing every .NET instance aims at one lease
  more than its share; relayed so, some reach the one short of its share, and the one out of
  sight. Bounded by the surplus, it stops once no .NET instance holds more than its share.

An instance that joins holds nothing, so the others do not count it until it holds a lease or
asked for one; it counts itself, which lowers the others' targets below what they hold: their
surplus is there for it to ask one lease of at its first round. At their next round they count
it, give their surplus back, and it takes it at its next. A change of membership so comes to an
even spread (within one lease) in one to three acquire intervals, moving about the leases that
must move; a fleet half of .NET instances in one to four (docs/benchmarks.md), where .NET's
alone needs five to twenty -- but a cold start of 500 x 50 up to 6.3 under some seeds (over five
under 4 of 20): .NET instances short of their share all take the available leases in the
store's order at once, so one of them gets its share a round, and a .NET instance whose rounds
took nothing is in no listing (the targets count it out) and loses the steals to a .NET peer a
moment earlier.

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

from cosmos_changefeed import _handover
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
    #: This instance's leases another asked for (handed over), then its own surplus (given
    #: back): each released once its batch in flight is handled and checkpointed.
    release: list[Lease] = field(default_factory=list)
    #: Leases to ask for, in order (one is asked for: ``to_ask``).
    requests: list[Lease] = field(default_factory=list)
    #: Leases coming to this instance (asked for), and this instance's leaving it (asked for
    #: by others): they count as theirs.
    coming: int = 0
    leaving: int = 0
    #: A lease of this instance's to give back once it took one from an owner that does not
    #: hand over, for an instance under its share that does not take from this one (a relay).
    relay: list[Lease] = field(default_factory=list)
    #: Ask for as many leases as it misses (else one, while it holds none).
    ask_all: bool = False
    #: Ask for one lease while none is coming, even holding some (beside instances that do
    #: not hand over, at the fleet's first start, under half its target).
    ask_one: bool = False
    #: Stop after ``LOSSES_IN_A_ROW`` leases found taken since the listing (.NET: go on).
    stop_when_outdated: bool = True
    _taken: int = 0
    _stolen: int = 0
    _losses: int = 0
    _asked: int = 0

    @property
    def idle(self) -> bool:
        """Whether the round had nothing to do: at its target, nothing taken, asked for or
        given back."""
        return self.wanted <= 0 and not (self.release or self._taken or self._asked)

    @property
    def wanted(self) -> int:
        """How many more leases this instance takes in this round."""
        held = len(self.mine) - self.leaving + self.coming + self._taken + self._asked
        return self.target - held

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
                self.release += self.relay[:1]
                self.relay = self.relay[1:]
        elif outcome == "lost" and self.stop_when_outdated:
            self._losses += 1
        elif outcome == "failed" and self.stop_when_outdated:
            self._losses = LOSSES_IN_A_ROW  # the store refused (throttled): no more this round

    def to_ask(self) -> Iterator[Lease]:
        """The leases to ask for, until one is asked for -- while this instance still holds
        none and has none coming (``ask_one``: has none coming; ``ask_all``: as long as they
        are wanted)."""
        for lease in self.requests:
            if self._losses >= LOSSES_IN_A_ROW or self.wanted <= 0:
                return
            if self.ask_one and not (self.coming or self._asked):
                yield lease
                continue
            if not self.ask_all and (self.mine or self.coming or self._taken or self._asked):
                return
            yield lease

    def asked(self, lease: Lease, outcome: Outcome) -> None:
        """The outcome of a request for ``lease`` ("acquired": asked)."""
        if outcome == "acquired":
            self._asked += 1
        else:
            self.tried(lease, outcome)


def plan_round(
    leases: Sequence[Lease],
    instance_name: str,
    expiration: float,
    now: dt.datetime,
    *,
    pressed: bool = False,
) -> Round:
    """The fair-share round of ``instance_name`` (see the module); ``pressed``: the lease
    container throttles, and the others list the leases seldom (``_keeping``): an instance
    under its share asks for all it misses, as the owners see a request at their next write."""
    view = _View.of(leases, instance_name, expiration, now)
    mine, target = view.owners[instance_name], view.targets[instance_name]
    leaving = view.leaving.get(instance_name, 0)
    asked: list[Lease] = []
    steal: list[Lease] = []
    for name in view.owners:
        if name != instance_name:
            for lease in view.surplus(name):
                (asked if lease.hands_over else steal).append(lease)

    def order(lease: Lease) -> bytes:
        return _rank(instance_name, lease.lease_token)

    # beside instances that do not hand over (.NET's), which take only available leases or
    # steal: the first available leases in the store's order are left to them (.NET takes them
    # in that order), as many as they miss of their targets
    candidates = sorted(view.available[view.missing() :], key=order)
    held = len(mine) - leaving + view.coming
    surplus = view.surplus(instance_name)
    relay: list[Lease] = []
    relays = view.relays() if held >= target else 0
    if relays:
        # at its share: takes leases from owners that do not hand over, and gives as many of
        # its own back, for instances under their share that take only what is available
        target, candidates = held + relays, []
        relay = view.surplus(instance_name, len(surplus) + relays)[len(surplus) :]
        steal = view.dotnet_surplus()
    requests = sorted(asked, key=order)
    # beside instances that do not hand over, at the fleet's first start, the leases left to
    # them may be all there is available, and owners at their targets have no surplus: far
    # under its target, an instance asks for one lease at a time, of a surplus or else of the
    # fullest that hands over
    starving = (
        2 * held < target
        and not relays
        and not pressed
        and view.beside_dotnet()
        and view.first_start()
    )
    if starving and not view.coming:
        requests += view.fullest_lease()
    return Round(
        target=target,
        mine=mine,
        candidates=candidates + sorted(steal, key=order),
        steals=len(steal),
        steal_limit=max(target - held, 1),
        release=[lease for lease in mine if view.asked(lease)] + surplus,
        requests=requests,
        coming=view.coming,
        leaving=leaving,
        relay=relay,
        ask_all=pressed,
        ask_one=starving,
    )


@dataclass
class _View:
    """What one listing says of the fleet, from one instance: the instances and their leases,
    the available leases, the requests, the targets."""

    me: str
    expiration: float
    now: dt.datetime
    owners: dict[str, list[Lease]]
    available: list[Lease]
    #: Per owner, its leases another instance asked for; the leases asked for by ``me``.
    leaving: dict[str, int]
    coming: int
    targets: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls, leases: Sequence[Lease], instance_name: str, expiration: float, now: dt.datetime
    ) -> _View:
        me = instance_name.lower()
        view = cls(instance_name, expiration, now, {instance_name: []}, [], {}, 0)
        for lease in leases:
            owner = lease.owner or ""
            if not owner.strip() or lease.is_expired(expiration, now):
                view.available.append(lease)
                continue
            name = instance_name if owner.lower() == me else owner
            view.owners.setdefault(name, []).append(lease)
            request = _handover.live(lease, now, expiration)
            if request is None or request.to.lower() == owner.lower():
                continue
            view.leaving[name] = view.leaving.get(name, 0) + 1
            if request.to.lower() == me:
                view.coming += 1
            else:
                view.owners.setdefault(request.to, [])
        lo, extra = divmod(len(leases), len(view.owners))
        ranked = sorted(
            view.owners,
            key=lambda name: (view.hands_over(name), -len(view.owners[name]), name),
        )
        view.targets = {name: lo + (1 if place < extra else 0) for place, name in enumerate(ranked)}
        return view

    def asked(self, lease: Lease) -> bool:
        return _handover.live(lease, self.now, self.expiration) is not None

    def surplus(self, name: str, count: int | None = None) -> list[Lease]:
        """``name``'s leases beyond its target (or ``count`` of them) that nobody asked for:
        the same ones whoever asks."""
        held = self.owners[name]
        if count is None:
            count = len(held) - self.leaving.get(name, 0) - self.targets[name]
        return _surplus(held, count, self.asked)

    def beside_dotnet(self) -> bool:
        """Whether an instance that does not hand over owns a lease."""
        return any(not self.hands_over(name) for name in self.owners)

    def first_start(self) -> bool:
        """Whether a lease available was never taken (no ``timestamp``: the fleet's first
        start, where instances short of their share may still be in no listing)."""
        return any(lease.timestamp is None for lease in self.available)

    def fullest_lease(self) -> list[Lease]:
        """One lease (nobody asked for) of the other instance that hands over and holds the
        most, what it is asked for not counted (the last name of equals): the same whoever
        asks."""
        others = [
            name
            for name, held in self.owners.items()
            if name != self.me and held and self.hands_over(name)
        ]
        if not others:
            return []
        name = max(
            others, key=lambda name: (len(self.owners[name]) - self.leaving.get(name, 0), name)
        )
        return _surplus(self.owners[name], 1, self.asked)

    def hands_over(self, name: str) -> bool:
        """Whether ``name`` hands its leases over (its leases say so; one that holds none asked
        for one, or is this instance)."""
        held = self.owners[name]
        return not held or name == self.me or any(lease.hands_over for lease in held)

    def uncooperative_short(self) -> list[int]:
        """What each instance that does not hand over misses of its target (those under it)."""
        return [
            self.targets[name] - len(held)
            for name, held in self.owners.items()
            if not self.hands_over(name) and len(held) < self.targets[name]
        ]

    def missing(self) -> int:
        """The leases the instances that do not hand over miss of their targets."""
        return sum(self.uncooperative_short())

    def dotnet_hungry(self) -> int:
        """The leases the instances that do not hand over miss of .NET's own target: what
        they take of the leases available. Above their fair share while a .NET instance that
        holds none is in no listing (every .NET instance then aims at one more): relayed
        leases go to them too, not only to the instances short of their share."""
        ceiling = self.dotnet_target()
        return sum(
            max(ceiling - len(held), 0)
            for name, held in self.owners.items()
            if not self.hands_over(name)
        )

    def dotnet_target(self) -> int:
        """The target .NET's balancing computes (``ceil(leases / owners)``, at least 1)."""
        count = sum(1 for held in self.owners.values() if held) or 1
        total = sum(len(held) for held in self.owners.values()) + len(self.available)
        return math.ceil(total / count) if total > count else 1

    def dotnet_surplus(self) -> list[Lease]:
        """The leases of owners that do not hand over beyond their fair share (the same ones
        whoever asks). One at its fair share may take a lease back while .NET's target is
        above it (``dotnet_hungry`` counts it)."""
        return [
            lease
            for name in self.owners
            if not self.hands_over(name)
            for lease in self.surplus(name)
        ]

    def relays(self) -> int:
        """How many leases this instance, at its share, relays from owners that do not hand
        over, beyond their share, to such instances under .NET's target (which take only what
        is available), while one of them is short of its share: what they miss of .NET's
        target (the leases available are raced for; see the module)."""
        if not self.owners[self.me] or self.missing() <= 0:
            return 0
        need = min(self.dotnet_hungry(), len(self.dotnet_surplus()))
        return min(max(need, 0), len(self.owners[self.me]))


def _surplus(held: list[Lease], count: int, asked: Callable[[Lease], bool]) -> list[Lease]:
    """An owner's ``count`` leases to give up, of those nobody ``asked`` for: the same ones
    whoever asks."""
    if count <= 0:
        return []
    staying = [lease for lease in held if not asked(lease)]
    return sorted(staying, key=lambda lease: _rank(lease.lease_token), reverse=True)[:count]


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
