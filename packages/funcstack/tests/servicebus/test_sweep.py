"""The endpoint's sweep (``_server.Server``), without sockets: an idle endpoint sleeps (the sweep's
next round is SWEEP_IDLE_MAX away, or a frame's wake), and whatever times out makes the next
round come at its time: a message's time to live, a scheduled message, a message lock, a
session lock, a waiting session accept. A round is never later than the earliest of them, so
the sleep cannot make a lock, a schedule or an accept end late."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from funcstack.deadlines import SHORT, DeadlineError
from funcstack.servicebus import _server as server_module
from funcstack.servicebus._broker import Broker, StoredMessage, now_ms
from funcstack.servicebus._config import NamespaceConfig, queue_config
from funcstack.servicebus._server import SWEEP_IDLE_MAX, Server


async def _until(condition: Callable[[], bool], what: str, deadline: float = SHORT) -> None:
    """`funcstack.deadlines.wait_for` on the event loop (its sleeps let the loop run)."""
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() >= end:
            raise DeadlineError(f"{what}: not within {deadline:g} s")
        await asyncio.sleep(0.01)


def _broker(**props: Any) -> Broker:
    return Broker(NamespaceConfig("ns", [queue_config("q", {"LockDuration": "PT30S", **props})]))


def _message(
    seq: int, *, session_id: str | None = None, ttl_ms: int | None = None
) -> StoredMessage:
    header: list[Any] = [None, None, ttl_ms, None, None]
    return StoredMessage(
        seq=seq,
        message_id=f"m{seq}",
        session_id=session_id,
        properties_raw=b"",
        app_properties=None,
        app_properties_raw=b"",
        body_raw=b"",
        annotations={},
        header=header,
        enqueued_ms=now_ms(),
    )


def _next_due(server: Server) -> float:
    async def run() -> float:
        return server._next_due()

    return asyncio.run(run())


def test_an_idle_endpoint_sweeps_next_only_after_the_idle_maximum() -> None:
    broker = _broker()
    broker.receivers["q"].enqueue(_message(1))  # waiting, no time to live: nothing timed
    assert broker.next_due_ms() is None
    assert _next_due(Server(broker)) == SWEEP_IDLE_MAX


def test_a_message_lock_brings_the_next_round_to_its_end() -> None:
    broker = _broker()
    queue = broker.receivers["q"]
    queue.enqueue(_message(1))
    taken = queue.acquire(object(), None, delete=False)
    assert taken is not None
    assert broker.next_due_ms() == taken.locked_until_ms
    assert _next_due(Server(broker)) <= 30.0


def test_a_time_to_live_and_a_schedule_bring_the_next_round_to_theirs() -> None:
    broker = _broker()
    queue = broker.receivers["q"]
    queue.enqueue(_message(1, ttl_ms=2_000))
    expiry = broker.next_due_ms()
    assert expiry is not None and expiry <= now_ms() + 2_000
    scheduled = _message(2)
    scheduled.scheduled_ms = now_ms() + 1_000
    queue.enqueue(scheduled)
    assert broker.next_due_ms() == scheduled.scheduled_ms
    assert _next_due(Server(broker)) <= 1.0


def test_a_session_lock_brings_the_next_round_to_its_end() -> None:
    broker = _broker(RequiresSession=True)
    queue = broker.receivers["q"]
    until = queue.lock_session("s1", object())
    assert broker.next_due_ms() == until


@pytest.mark.parametrize("seconds", [0.5, 3.0])
def test_a_waiting_session_accept_brings_the_next_round_to_its_deadline(seconds: float) -> None:
    class Waiting:
        pending_deadline: float

    async def run() -> float:
        server = Server(_broker(RequiresSession=True))
        link = Waiting()
        link.pending_deadline = asyncio.get_running_loop().time() + seconds
        server.pending.append(link)  # type: ignore[arg-type]  # only its deadline is read
        return server._next_due()

    started = time.monotonic()
    due = asyncio.run(run())
    assert due <= seconds and due > seconds - (time.monotonic() - started) - 0.001


def test_a_wake_brings_a_sleeping_sweep_round_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asleep with nothing due (the idle maximum made an hour here), the sweep takes a round
    when woken, as every frame a connection handles wakes it: a message sent meanwhile with a
    time to live of 1 ms leaves."""
    monkeypatch.setattr(server_module, "SWEEP_IDLE_MAX", 3600.0)

    async def run() -> None:
        broker = _broker()
        server = Server(broker)
        rounds = []
        sweep_once = server._sweep_once

        def counted() -> None:
            rounds.append(1)
            sweep_once()

        server._sweep_once = counted  # type: ignore[method-assign]
        sweeper = asyncio.create_task(server._sweep())
        # its first round taken: then, in the same step of the loop, asleep with nothing due
        await _until(lambda: len(rounds) == 1, "the sweep's first round")
        queue = broker.receivers["q"]
        queue.enqueue(_message(1, ttl_ms=1))
        server.wake_sweep()
        try:
            await _until(lambda: 1 not in queue.messages, "the expired message gone on a wake")
        finally:
            sweeper.cancel()

    asyncio.run(run())


def test_a_message_lock_with_a_session_id_runs_out_in_an_entity_without_sessions() -> None:
    """A SessionId on a message of an entity without sessions (a dead-letter queue's dead
    letters keep theirs) is no session: its lock runs out as any other's, the message is given
    again (before, it stayed locked while the link lived)."""
    broker = _broker()
    queue = broker.receivers["q"]
    queue.enqueue(_message(1, session_id="c-1"))
    taken = queue.acquire(object(), None, delete=False)
    assert taken is not None
    queue.expire_lock(taken, taken.locked_until_ms + 1)
    assert taken.owner is None
    again = queue.acquire(object(), None, delete=False)
    assert again is not None and again.seq == 1
