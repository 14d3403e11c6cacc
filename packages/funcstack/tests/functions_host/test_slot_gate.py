"""How many of a Service Bus trigger's slots wait on the broker at once (``_slot_gate``): one
at first; each that finds something brings one more (up to the slots), each that waited for
nothing takes one back (never under one); the others wait on nothing until their turn."""

from __future__ import annotations

import asyncio

from funcstack.functions_host._slot_gate import SlotGate


async def _entered(gate: SlotGate, slots: int) -> list[asyncio.Task[None]]:
    """``slots`` slots asking for a turn; those that got one by now are done."""
    tasks = [asyncio.create_task(gate.enter()) for _ in range(slots)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return tasks


def test_one_slot_waits_at_first_and_each_find_brings_one_more() -> None:
    async def scenario() -> None:
        gate = SlotGate(4)
        tasks = await _entered(gate, 4)
        assert sum(t.done() for t in tasks) == 1 and gate.waiting == 1
        gate.leave(found=True)  # it took a session: two may wait now
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert sum(t.done() for t in tasks) == 3 and (gate.waiting, gate.target) == (2, 2)
        gate.leave(found=True)
        gate.leave(found=True)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert all(t.done() for t in tasks) and gate.target == 4  # never more than the slots
        gate.leave(found=True)
        assert gate.target == 4

    asyncio.run(scenario())


def test_a_wait_for_nothing_takes_one_back_never_under_one() -> None:
    async def scenario() -> None:
        gate = SlotGate(8)
        gate.target = 3
        tasks = await _entered(gate, 4)
        assert sum(t.done() for t in tasks) == 3
        gate.leave(found=False)  # 2 waiting, target 2: the fourth still waits for its turn
        await asyncio.sleep(0)
        assert sum(t.done() for t in tasks) == 3 and (gate.waiting, gate.target) == (2, 2)
        gate.leave(found=False)
        gate.leave(found=False)
        assert (gate.waiting, gate.target) == (0, 1)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert all(t.done() for t in tasks) and gate.waiting == 1  # its turn now

    asyncio.run(scenario())


def test_a_slot_done_with_what_it_found_takes_its_waiting_slot_back() -> None:
    """As many slots wait as sessions (or messages) are held, plus one: a burst's waiting
    slots go once what they took is done, not a try timeout later."""

    async def scenario() -> None:
        gate = SlotGate(8)
        tasks = await _entered(gate, 4)
        gate.leave(found=True)  # three held, one waiting (the fourth)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        gate.leave(found=True)
        gate.leave(found=True)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert all(t.done() for t in tasks) and (gate.waiting, gate.target) == (1, 4)
        for _ in range(3):
            gate.done()
        assert (gate.waiting, gate.target) == (1, 1)

    asyncio.run(scenario())
