"""A failing batch's retries, decided once for both processors (the poison policy). Pure.

.NET gives a failing batch again for ever, each poll delay, and lets the error hook know
(``ChangeFeedProcessorUserException``); so did this package. Here, per lease:

* the handler's failures on one batch are counted: the same lease read again from the same
  continuation (``Attempts``, which also keeps when the batch first failed); a batch handled
  (or set aside) starts the count again;
* the batch is given again after a wait that doubles at each attempt from ``min_retry_delay``
  (default: the poll delay) up to ``max_retry_delay`` (``retry_delay``); it is read again each
  time, so changes written since join it;
* ``on_error`` is given the batch and its attempt (``_options.Failure``);
* only when the application asks for it (``set_aside``), a batch that failed ``set_aside_after``
  times in a row is **taken apart** (``apart``): its halves are given to the handler again, in
  order, and a half that fails is halved again, down to single changes.

**Outage or poison.** A change that fails alone is a poison only if the handler is seen to
work meanwhile: it succeeded on another change since the batch first failed -- a part of the
same batch, or a batch of another lease of the instance (``_health.HandlerHealth``). A lone
change (a batch of one, or every part failing) with no such success is given one more chance
to tell: the lease's next change after its batch is read and handed over alone (the
**probe**; once the lone change is set aside, the probe is not given again in its turn). A
change that failed alone before the handler was first seen to work (the success came after
it, or elsewhere) is given once more alone before the verdict (``confirm``): an outage may
have ended meanwhile. If nothing succeeds -- the handler fails on every change it is given --
it is an **outage**: nothing is set aside, the lease is
kept and the batch given again after the back-off (capped at ``max_retry_delay``), for as long
as it takes; the instance says it is stalled (``_health``). A handler may say so itself:
a ``TransientError`` (or a subclass) is never set aside and stops a batch being taken apart.
A change that cannot be told (a lone change on a quiet lease, on an instance whose other leases
are idle) waits so, stalled, until another change shows the handler works.

Once the verdict is poison, each change that failed alone is handed to ``set_aside`` -- the
application's own dead letter -- in order, after the parts that were handled (so one poison
change in a batch of 10 costs the handler about seven calls; the nine others are handled, the
one alone is set aside). Only once every part was handled or set aside (in aio: awaited)
without raising is the lease checkpointed past the batch; a ``set_aside`` that raises leaves the
batch where it was, to come again whole. Every change set aside is logged (WARNING) and counted
(``batches_set_aside``). A batch whose failure is the handler's kind
(``_checks.HandlerKindError``: the code's mistake, not the batch's) is never set aside. Without
``set_aside`` nothing is ever skipped: at least once. With ``still_set_aside`` the key of a change
set aside is held (``_order``): its later changes in the batch are not handed over but set aside
behind it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from cosmos_changefeed import _clock
from cosmos_changefeed._checks import HandlerKindError
from cosmos_changefeed._options import FailedBatch
from cosmos_changefeed._order import HeldBehindError, SetAsideChange, key_of, set_aside_change

#: A step of taking a failed batch apart, and what the shell sends back: ("handle", changes) --
#: give these to the handler: what it raised, or None; ("set_aside", FailedBatch) -- hand it to
#: ``set_aside``: whether it took it; ("probe", None) -- read the lease's changes after the
#: batch: them (None: the read failed).
Step: TypeAlias = tuple[Literal["handle", "set_aside", "probe"], Any]


class TransientError(Exception):
    """Raised by a handler (or a subclass of it, or raised ``from`` the error it met) to say
    that the batch failed for a reason outside it -- a downstream service away, throttled --
    and will succeed later: its batch is given again after the back-off and never set aside,
    however many times it fails (an outage, not a poison)."""


#: No position failed yet (None is a position: a lease's first read from its start).
_NOTHING = object()


@dataclass
class Attempts:
    """One lease's count of failures in a row at one position, and when the first was
    (``_clock.monotonic``)."""

    at: object = _NOTHING
    count: int = 0
    since: float = 0.0
    clock: Callable[[], float] = field(default=_clock.monotonic, repr=False)

    def failed(self, position: str | None) -> int:
        """Count a failure of the batch read from ``position``; its attempt (1, 2, ...)."""
        if self.at is not _NOTHING and self.at == position:
            self.count += 1
        else:
            self.at, self.count, self.since = position, 1, self.clock()
        return self.count

    def passed(self) -> None:
        """The batch was handled or set aside: the next failure is a first attempt."""
        self.at, self.count = _NOTHING, 0


def retry_delay(attempt: int, first: float, max_retry_delay: float) -> float:
    """How long a batch that failed at ``attempt`` waits before it is given again: ``first``
    (``min_retry_delay``, else the poll delay), doubled at each attempt, at most
    ``max_retry_delay``."""
    doubled: float = first * 2.0 ** min(max(attempt - 1, 0), 62)
    return min(max_retry_delay, doubled)


def to_set_aside(attempt: int, set_aside_after: int | None, error: BaseException) -> bool:
    """Whether a batch that failed at ``attempt`` with ``error`` is taken apart, to set aside
    what fails alone (never for a ``TransientError``, nor a ``HandlerKindError``)."""
    if set_aside_after is None or is_transient(error) or isinstance(error, HandlerKindError):
        return False
    return attempt >= set_aside_after


def is_transient(error: BaseException) -> bool:
    """Whether the handler said ``error`` is transient: a ``TransientError``, or raised from
    one (its ``__cause__``)."""
    return isinstance(error, TransientError) or isinstance(error.__cause__, TransientError)


@dataclass(frozen=True)
class Apart:
    """What taking a batch apart came to: whether all of it was handled or set aside
    (``settled``: the lease moves past it), the keys the lease holds from now on (``_order``),
    and whether it was an outage (nothing succeeded: nothing set aside)."""

    settled: bool
    held: dict[str, SetAsideChange] = field(default_factory=dict)
    outage: bool = False
    #: The lease's next change, handled as the probe: not to be given again in its turn.
    probed: dict[str, Any] | None = None


def apart(
    batch: FailedBatch,
    *,
    evidence: Callable[[], bool],
    paths: Sequence[str] | None = None,
) -> Generator[Step, Any, Apart]:
    """Settle ``batch``, which failed as a whole at its last attempt (see the module): its
    halves to the handler, a half that fails halved again; then the verdict -- ``evidence()``
    says whether the handler succeeded elsewhere since the batch first failed -- and, for a
    poison, each change that failed alone set aside. ``paths``: the partition key paths when
    a key's order is kept past a change set aside (``still_set_aside``)."""
    taking = _Taking(batch, paths)
    if len(batch.changes) == 1:
        taking.alone(batch.changes[0], batch.error)
    else:
        for half in _halves(batch.changes):
            if not (yield from taking.bisect(half)):
                return Apart(False, outage=True)  # the handler said the failure is transient
    if not taking.failed:
        return Apart(True)
    if not taking.succeeded and not evidence():
        yield from taking.probe()
    if not taking.succeeded and not evidence():
        return Apart(False, outage=True)
    if not (yield from taking.confirm()):
        return Apart(False, outage=True)  # the handler said the failure is transient
    if not taking.failed:
        return Apart(True)
    settled = yield from taking.set_aside()
    return dataclasses.replace(settled, probed=taking.probed) if settled.settled else settled


class _Taking:
    """The state of one batch taken apart (``apart``)."""

    def __init__(self, batch: FailedBatch, paths: Sequence[str] | None) -> None:
        self.batch, self.paths = batch, paths
        self.succeeded = False
        #: How many of ``failed`` failed before the handler's first success here (all of them
        #: when the success seen was elsewhere): each is given once more alone (``confirm``).
        self.unsure: int | None = None
        self.probed: dict[str, Any] | None = None
        #: The changes that failed alone, with what they raised, in order.
        self.failed: list[tuple[dict[str, Any], BaseException]] = []
        #: With ``paths``: the keys of those changes, and the later changes of those keys.
        self.blocked: set[str] = set()
        self.behind: list[tuple[dict[str, Any], str]] = []

    def bisect(self, changes: list[dict[str, Any]]) -> Generator[Step, Any, bool]:
        """Hand ``changes`` over, halved down to single changes while they fail (False: a
        ``TransientError`` stopped it)."""
        changes = self._not_blocked(changes)
        if not changes:
            return True
        error = yield ("handle", changes)
        if error is None:
            self._succeeded()
            return True
        if is_transient(error) or isinstance(error, HandlerKindError):
            return False
        if len(changes) == 1:
            self.alone(changes[0], error)
            return True
        for half in _halves(changes):
            if not (yield from self.bisect(half)):
                return False
        return True

    def alone(self, change: dict[str, Any], error: BaseException) -> None:
        self.failed.append((change, error))
        if self.paths is not None:
            self.blocked.add(key_of(change, self.paths))

    def probe(self) -> Generator[Step, Any, None]:
        """The lease's next change after the batch (not of a key blocked), handed over alone."""
        later = yield ("probe", None)
        candidates = self._not_blocked(list(later or []), keep=False)
        if candidates and (yield ("handle", candidates[:1])) is None:
            self._succeeded()
            self.probed = candidates[0]

    def _succeeded(self) -> None:
        if not self.succeeded:
            self.succeeded, self.unsure = True, len(self.failed)

    def confirm(self) -> Generator[Step, Any, bool]:
        """Each change that failed alone before the handler was seen to work (all of them when
        it was seen working elsewhere) given once more alone: one that fails again is a poison,
        one handled now failed in an outage that has ended (with ``paths``, the later changes of
        its key are then handed over alone, in order). False: a ``TransientError`` stopped it."""
        unsure = len(self.failed) if self.unsure is None else self.unsure
        order = {id(change): n for n, change in enumerate(self.batch.changes)}
        first, self.failed = self.failed[:unsure], self.failed[unsure:]
        for change, _ in first:
            again = yield ("handle", [change])
            if again is None:
                if not (yield from self._cleared(change)):
                    return False
            elif is_transient(again) or isinstance(again, HandlerKindError):
                return False
            else:
                self.failed.append((change, again))
        self.failed.sort(key=lambda failed: order.get(id(failed[0]), len(order)))
        return True

    def _cleared(self, change: dict[str, Any]) -> Generator[Step, Any, bool]:
        """``change``, which failed alone, handled now: its key free again, the changes held
        behind it handed over alone, in order, until one fails (it blocks the key again)."""
        if self.paths is None:
            return True
        key = key_of(change, self.paths)
        self.blocked.discard(key)
        mine = [held for held, of in self.behind if of == key]
        self.behind = [(held, of) for held, of in self.behind if of != key]
        for n, held in enumerate(mine):
            error = yield ("handle", [held])
            if error is None:
                continue
            if is_transient(error) or isinstance(error, HandlerKindError):
                return False
            self.alone(held, error)
            self.behind.extend((later, key) for later in mine[n + 1 :])
            break
        return True

    def set_aside(self) -> Generator[Step, Any, Apart]:
        """Each change that failed alone to ``set_aside``, in order, then those held behind."""
        batch = self.batch
        held: dict[str, SetAsideChange] = {}
        token = batch.context.lease_token
        for change, error in self.failed:
            alone = FailedBatch(batch.context, [change], batch.attempt, error)
            if not (yield ("set_aside", alone)):
                return Apart(False)
            if self.paths is not None:
                key = key_of(change, self.paths)
                held.setdefault(key, set_aside_change(token, change, key))
        for change, key in self.behind:
            holder = held[key]
            waiting = FailedBatch(
                batch.context, [change], batch.attempt, HeldBehindError(holder), behind=holder
            )
            if not (yield ("set_aside", waiting)):
                return Apart(False)
        return Apart(True, held)

    def _not_blocked(
        self, changes: list[dict[str, Any]], *, keep: bool = True
    ) -> list[dict[str, Any]]:
        """``changes`` without those of a blocked key (kept as ``behind`` when ``keep``)."""
        if self.paths is None or not self.blocked:
            return changes
        free: list[dict[str, Any]] = []
        for change in changes:
            key = key_of(change, self.paths)
            if key not in self.blocked:
                free.append(change)
            elif keep:
                self.behind.append((change, key))
        return free


def _halves(changes: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    middle = len(changes) // 2
    return changes[:middle], changes[middle:]
