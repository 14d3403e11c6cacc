"""What time it is for the outbox: when a scheduled event is due (`deliver_after`), whether a
release has come (`cosmos_outbox._relay.scheduled`), and the time an aggregate's event is
recorded at. The wall clock (UTC, aware), unless a test's clock stands in for it inside
`using(clock)` (the test kit's `in_memory`: `memory.clock.advance(...)` moves it on, so a test
delivers an event due in 15 minutes without waiting for them).

One clock for the process, not one per context: the test kit runs an app's functions on threads
and event loops of their own, and each must read the time the test set. Only the standard
library here: the domain (`cosmos_outbox._domain`) reads it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

__all__ = ["now", "using"]


def _wall() -> datetime:
    return datetime.now(UTC)


_source: Callable[[], datetime] = _wall


def now() -> datetime:
    """The time now, UTC (aware)."""
    return _source()


@contextmanager
def using(clock: Callable[[], datetime]) -> Iterator[None]:
    """`now()` is `clock()` inside the block (the test kit's clock), then what it was."""
    global _source
    before, _source = _source, clock
    try:
        yield
    finally:
        _source = before
