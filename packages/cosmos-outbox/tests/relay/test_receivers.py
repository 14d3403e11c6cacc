"""The relay process's own receivers (`_relay_process`: the schedule queue's releases, the
failures' ingest) on a broker of fakes: each runs as a task of its name, a connection refused is
said and tried again, what it receives is handed on and completed, and `stop` ends it."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from cosmos_outbox._mapper.release_message import release_body
from cosmos_outbox._records import Release
from cosmos_outbox._relay.scheduled import Releases
from cosmos_outbox._relay_process import schedule_receiver
from cosmos_outbox._relay_process.schedule_receiver import ReleaseReceiver

RELEASE = Release("c-1", "e-1", datetime(2026, 1, 1, tzinfo=UTC))


class Message:
    def __init__(self, body: bytes) -> None:
        self.body = [body]


class Receiver:
    """A queue's receiver that gives `messages`, then waits (as the broker's does)."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.completed: list[Message] = []

    async def __aenter__(self) -> Receiver:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    def __aiter__(self) -> Receiver:
        return self

    async def __anext__(self) -> Message:
        if self.messages:
            return self.messages.pop(0)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def complete_message(self, message: Message) -> None:
        self.completed.append(message)


class Client:
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.queues: list[str] = []

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    def get_queue_receiver(self, queue: str, **_: Any) -> Receiver:
        self.queues.append(queue)
        return self.receiver


class Released:
    def __init__(self) -> None:
        self.releases: list[Release] = []

    async def release(self, release: Release) -> None:
        self.releases.append(release)


def test_a_receiver_refused_a_connection_says_so_connects_again_and_stops_when_told(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(schedule_receiver, "RETRY_SECONDS", 0.0)
    message = Message(release_body(RELEASE))
    client = Client(Receiver([message]))
    connects: list[int] = []

    def connect() -> Any:
        connects.append(1)
        if len(connects) == 1:
            raise ConnectionError("the broker is away")
        return client

    released = Released()

    async def scenario() -> tuple[str, bool]:
        receiver = ReleaseReceiver(connect, "releases", cast("Releases", released))
        receiver.start()
        task = receiver._task
        assert task is not None
        for _ in range(200):
            if client.receiver.completed:
                break
            await asyncio.sleep(0.01)
        await receiver.stop()
        return task.get_name(), task.cancelled()

    with caplog.at_level(logging.WARNING, "cosmos_outbox.relay"):
        name, cancelled = asyncio.run(scenario())
    assert (name, cancelled) == ("releases-releases", True)
    assert len(connects) == 2 and client.queues == ["releases"]
    assert released.releases == [RELEASE] and client.receiver.completed == [message]
    assert "the schedule queue releases cannot be received (ConnectionError" in caplog.text
