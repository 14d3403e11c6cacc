"""How many of a Service Bus trigger's slots wait on the broker at once: Azure's rule.

The trigger has ``maxConcurrentSessions`` (or ``maxConcurrentCalls``) slots. In Azure the
Service Bus extension's processor (Azure.Messaging.ServiceBus's ``ServiceBusProcessor``) lets at
most ``min(maxConcurrentCalls, 2 x processor count)`` of a session trigger's slots accept a
session at once ("so that the service is not overloaded with accept session requests"); the
others wait on nothing until one of those accepts ends, and a slot holding a session does not
count. A trigger without sessions receives on one link, its calls waiting on it together.

funcstack keeps the same bound for both kinds: at most ``min(slots, 2 x cores)`` slots wait on
the broker at once, a pending session accept or a receive call, each through the Python SDK a
connection of its own that the SDK polls five times a second. Every slot still runs its session
or invocation at once: the concurrency is the setting's. Before, all 64 of the reference
subscriber's session slots waited: ~1.2 s of CPU to start a host and ~1.3 s a minute idle.
"""

from __future__ import annotations

import asyncio
import os


def wait_limit(slots: int, cores: int | None = None) -> int:
    """Azure's bound on a trigger's slots waiting on the broker at once."""
    return max(1, min(slots, 2 * (cores if cores is not None else os.cpu_count() or 1)))


class SlotGate:
    """``enter()`` before waiting on the broker (returns once fewer than ``limit`` slots
    wait), ``leave()`` when that wait ends (something found or not)."""

    def __init__(self, slots: int, cores: int | None = None) -> None:
        #: How many slots may wait on the broker at once.
        self.limit = wait_limit(slots, cores)
        #: How many do.
        self.waiting = 0
        self._turns = asyncio.Semaphore(self.limit)

    async def enter(self) -> None:
        await self._turns.acquire()
        self.waiting += 1

    def leave(self) -> None:
        self.waiting -= 1
        self._turns.release()
