"""Virtual time for asyncio: ``VirtualClock.run(main)`` runs ``main`` on an event loop whose
clock moves only when every task waits -- then straight to the next timer -- so ``await
asyncio.sleep(60)`` returns at once, 60 virtual seconds later. The aio processor's lease
intervals (acquire 13 s, renew 17 s, expiry 60 s), poll delays and back-offs pass in
microseconds of real time, in the order real time would give them.

An aio processor started under the clock reads it for the wall time too (``_clock``): its
leases' ``timestamp``, their expiry, its anchored "now" and its checkpoint policy's seconds are
virtual. Give an ``InMemoryFeed`` the clock's ``now`` (``InMemoryFeed(clock=clock.now)``) so that
its writes carry virtual times; the in-memory lease store reads the clock by itself.

What it cannot do: wait for work outside the loop. A thread (``asyncio.to_thread``, an
executor, a sync processor) runs in real time while the virtual clock races ahead of it; a
timeout around it (``asyncio.wait_for``) would expire at once. Everything the loop waits on must
be a task or a timer -- the aio processor on the in-memory feed and an in-memory (or simulated)
lease store are.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import selectors
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from cosmos_changefeed import _clock

T = TypeVar("T")


class VirtualClock:
    """A clock for ``run``: virtual seconds since it was made, from ``start`` (default: the
    real time now, UTC)."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        if start is not None and start.tzinfo is None:
            raise ValueError("start: a timezone-aware datetime (datetime.now(timezone.utc))")
        self._start = (start or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
        self._elapsed = 0.0

    @property
    def elapsed(self) -> float:
        """Virtual seconds since the clock was made."""
        return self._elapsed

    def now(self) -> dt.datetime:
        """The virtual time, UTC (what ``InMemoryFeed(clock=...)`` takes)."""
        return self._start + dt.timedelta(seconds=self._elapsed)

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run ``main`` to its end on a loop in this clock's time (as ``asyncio.run``); its
        result. Every task it starts reads the virtual time (see the module)."""
        context = contextvars.copy_context()
        context.run(_clock.CLOCKS.set, _clock.Clocks(self.now, lambda: self._elapsed))
        with asyncio.Runner(loop_factory=lambda: _VirtualLoop(self)) as runner:
            return runner.run(main, context=context)

    def _advance(self, seconds: float) -> None:
        self._elapsed += seconds


class _VirtualSelector(selectors.BaseSelector):
    """The loop's selector: what is ready now is returned at once; when nothing is and the
    loop would wait ``timeout`` for its next timer, the clock moves on by ``timeout`` instead.
    With no timer at all (``timeout`` None) it waits for real (a thread may wake the loop)."""

    def __init__(self, clock: VirtualClock) -> None:
        self._real = selectors.DefaultSelector()
        self._clock = clock

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            return self._real.select(None)
        self._clock._advance(max(timeout, 0.0))
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class _VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is the clock's."""

    def __init__(self, clock: VirtualClock) -> None:
        self._virtual = clock
        super().__init__(_VirtualSelector(clock))

    def time(self) -> float:
        return self._virtual.elapsed
