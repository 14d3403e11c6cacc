"""The time a processor reads: the wall clock (a lease's ``timestamp``, when a lease expired,
where "now" starts) and a monotonic one (what a store's ``ttl`` and a checkpoint policy's
seconds count). Both are the system's -- ``datetime.now(UTC)`` and ``time.monotonic()`` -- unless
the code runs under ``cosmos_changefeed.testing.VirtualClock.run``, which sets them, for the
tasks it runs, to its virtual time: lease intervals of seconds pass in microseconds there, and
the aio processor's leases expire, renew and move as they would in real time.

A context variable: an asyncio task inherits the value its creator had, so every task of an aio
processor started under the virtual clock reads it; a thread does not (the sync processor's
threads read the system's clocks, always).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Clocks:
    """A wall clock (timezone-aware UTC) and a monotonic one (seconds)."""

    wall: Callable[[], dt.datetime]
    monotonic: Callable[[], float]


#: The clocks set for the running context (None: the system's).
CLOCKS: ContextVar[Clocks | None] = ContextVar("cosmos_changefeed_clocks", default=None)


def now() -> dt.datetime:
    """The wall clock's time, UTC."""
    clocks = CLOCKS.get()
    return clocks.wall() if clocks is not None else dt.datetime.now(dt.UTC)


def monotonic() -> float:
    """The monotonic clock's seconds."""
    clocks = CLOCKS.get()
    return clocks.monotonic() if clocks is not None else time.monotonic()
