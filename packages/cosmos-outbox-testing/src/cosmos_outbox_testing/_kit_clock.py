"""The test kit's clock (`memory.clock`), so an event due in 15 minutes is delivered without
waiting for them: `memory.clock.advance(timedelta(minutes=15))`. Inside `with in_memory(...)` it
is the outbox's time (`cosmos_outbox.clock`): the due time of `deliver_after`, whether a release
has come, the time an aggregate's event is recorded at, the in-memory store's TTLs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["KitClock"]


class KitClock:
    """The wall clock plus what `advance` added (never less: time does not go back). What it
    runs when it moves on is its owner's (`on_advance`: the store's TTLs, the releases)."""

    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._moved: list[Callable[[timedelta], object]] = []

    def now(self) -> datetime:
        """The kit's time now (UTC, aware)."""
        return datetime.now(UTC) + self._offset

    def advance(self, by: timedelta | float) -> None:
        """Move the time on by `by` (a timedelta, or seconds); what comes due meanwhile happens
        (in the test kit's world: the releases of scheduled events due by then)."""
        step = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if step < timedelta(0):
            raise ValueError("the kit's clock moves on, never back")
        self._offset += step
        for moved in list(self._moved):
            moved(step)

    def to(self, at: datetime) -> None:
        """Move the time on until `at` (nothing when it is past already)."""
        ahead = at - self.now()
        if ahead > timedelta(0):
            self.advance(ahead)

    def on_advance(self, moved: Callable[[timedelta], object]) -> None:
        """Run `moved(step)` each time the clock moves on."""
        self._moved.append(moved)
