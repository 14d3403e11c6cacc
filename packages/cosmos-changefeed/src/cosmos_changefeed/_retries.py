"""A failing batch's retries, decided once for both processors (the poison policy). Pure.

.NET gives a failing batch again for ever, each poll delay, and lets the error hook know
(``ChangeFeedProcessorUserException``); so did this package. Here, per lease:

* the handler's failures on one batch are counted: the same lease read again from the same
  continuation (``Attempts``); a batch handled (or set aside) starts the count again;
* the batch is given again after a wait that doubles at each attempt from ``min_retry_delay``
  (default: the poll delay, what 0.1 waited every time) up to ``max_retry_delay`` (``retry_delay``);
* ``on_error`` is given the batch and its attempt (``_options.Failure``);
* only when the application asks for it (``set_aside``), a batch that failed ``set_aside_after``
  times in a row is **taken apart** (``apart``): its halves are given to the handler again, in
  order, and a half that fails is halved again, down to single changes; only a single change
  that fails is handed to ``set_aside`` -- the application's own dead letter. So one poison
  change in a batch of 10 costs the handler about seven calls, the nine others are handled,
  and the one alone is set aside (1.0 set the whole batch aside). Only once every part was
  handled or set aside (in aio: awaited) without raising is the lease checkpointed past the
  batch; a ``set_aside`` that raises leaves the batch where it was, to come again whole. Every
  change set aside is logged (WARNING) and counted (``batches_set_aside``). A batch whose
  failure is the handler's kind (``_checks.HandlerKindError``: the code's mistake, not the
  batch's) is never set aside. Without ``set_aside`` nothing is ever skipped: at least once.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from cosmos_changefeed._checks import HandlerKindError

#: A step of taking a failed batch apart: ("handle", changes) -- give these to the handler --
#: or ("set_aside", [change]) -- hand this one to ``set_aside``; sent whether it went well.
Step: TypeAlias = tuple[Literal["handle", "set_aside"], list[dict[str, Any]]]

#: No position failed yet (None is a position: a lease's first read from its start).
_NOTHING = object()


@dataclass
class Attempts:
    """One lease's count of failures in a row at one position."""

    at: object = _NOTHING
    count: int = 0

    def failed(self, position: str | None) -> int:
        """Count a failure of the batch read from ``position``; its attempt (1, 2, ...)."""
        if self.at is not _NOTHING and self.at == position:
            self.count += 1
        else:
            self.at, self.count = position, 1
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
    """Whether a batch that failed at ``attempt`` with ``error`` goes to ``set_aside``."""
    if set_aside_after is None or isinstance(error, HandlerKindError):
        return False
    return attempt >= set_aside_after


def apart(changes: list[dict[str, Any]]) -> Generator[Step, bool, bool]:
    """Settle ``changes``, a batch that failed as a whole: each half given to the handler in
    turn, a half that fails taken apart in its turn, a single change that fails set aside.
    Returns whether all of it was handled or set aside (False: a ``set_aside`` failed, and
    nothing after it was tried)."""
    if len(changes) <= 1:
        return (yield ("set_aside", changes))
    middle = len(changes) // 2
    for half in (changes[:middle], changes[middle:]):
        if not (yield ("handle", half)) and not (yield from apart(half)):
            return False
    return True
