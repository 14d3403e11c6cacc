"""How many of a Service Bus trigger's slots wait on the broker at once (``_slot_gate``):
Azure's bound, min(slots, 2 x cores), as the extension's processor bounds its concurrent session
accepts; the others wait on nothing until a turn ends."""

from __future__ import annotations

import asyncio

from funcstack.functions_host._slot_gate import SlotGate, wait_limit


def test_the_bound_is_azures_min_of_the_slots_and_twice_the_cores() -> None:
    assert wait_limit(64, cores=2) == 4  # the reference subscriber's maxConcurrentSessions
    assert wait_limit(32, cores=2) == 4  # maxConcurrentCalls' default on 2 cores
    assert wait_limit(3, cores=2) == 3
    assert wait_limit(64, cores=8) == 16
    assert wait_limit(0, cores=2) == 1  # a slot always may wait


def test_at_most_the_bound_wait_and_an_ended_wait_hands_its_turn_on() -> None:
    async def scenario() -> None:
        gate = SlotGate(8, cores=1)  # bound 2
        tasks = [asyncio.create_task(gate.enter()) for _ in range(5)]
        for _ in range(3):
            await asyncio.sleep(0)
        assert sum(t.done() for t in tasks) == 2 and gate.waiting == 2
        gate.leave()  # one found a session (or its wait ended): the next slot's turn
        for _ in range(3):
            await asyncio.sleep(0)
        assert sum(t.done() for t in tasks) == 3 and gate.waiting == 2
        gate.leave()
        gate.leave()
        for _ in range(3):
            await asyncio.sleep(0)
        assert all(t.done() for t in tasks) and gate.waiting == 2

    asyncio.run(scenario())
