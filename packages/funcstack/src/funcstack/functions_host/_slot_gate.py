"""How many of a Service Bus trigger's slots wait on the broker at once.

The trigger has ``maxConcurrentSessions`` (or ``maxConcurrentCalls``) slots, and in Azure each
of them waits on the broker: a pending session accept, or a receive call. Through the Python
SDK each waiting slot is a connection of its own that the SDK polls five times a second, and
opening one costs a connection, an authentication and an attach: 64 idle slots cost a host
~1.2 s of CPU to start and ~1.3 s a minute to wait. So the slots wait in turn: ``target`` of
them wait on the broker (one at first), the others wait here, on nothing. A slot that found
something (a session, a message) brings one more slot to wait (so a burst is taken by 1, 2,
4, 8... slots, each wave one receiver's opening, ~0.3 s); a slot that waited the whole try
timeout for nothing takes one back (never under one). Every slot still runs its session or
invocation at once: the concurrency is the setting's.
"""

from __future__ import annotations

import asyncio
import contextlib


class SlotGate:
    """``enter()`` before waiting on the broker (returns once fewer than ``target`` slots
    wait), ``leave(found)`` after."""

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        #: How many slots may wait on the broker now.
        self.target = 1
        #: How many do.
        self.waiting = 0
        self._parked: list[asyncio.Future[None]] = []

    async def enter(self) -> None:
        while self.waiting >= self.target:
            parked = asyncio.get_running_loop().create_future()
            self._parked.append(parked)
            try:
                await parked
            finally:
                with contextlib.suppress(ValueError):
                    self._parked.remove(parked)
        self.waiting += 1

    def leave(self, found: bool) -> None:
        """A slot's wait ended: it ``found`` a session or a message (one more slot waits
        now, until ``done()``), or waited for nothing (one fewer, never under one)."""
        self.waiting -= 1
        if found:
            self.target = min(self.slots, self.target + 1)
            self._wake()
        else:
            self._fewer()

    def done(self) -> None:
        """The session or message found is done with: the slot it brought waits no more."""
        self._fewer()

    def _fewer(self) -> None:
        self.target = max(1, self.target - 1)
        self._wake()

    def _wake(self) -> None:
        free = self.target - self.waiting
        for parked in [p for p in self._parked if not p.done()][: max(0, free)]:
            parked.set_result(None)
