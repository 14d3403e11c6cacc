"""Scheduled events' releases in a relay process: the receiving end of the schedule queue
(SERVICEBUS_SCHEDULE_QUEUE), what the Functions app's `release_due_events` (a Service Bus queue
trigger) does, done by a receiver of the process's own: each release received at its due time
is handed to `Releases.release` and completed once that returned; a release that fails is
abandoned (the broker gives it again, then dead-letters it after the queue's
maxDeliveryCount, as the trigger's message would be), and its body not a release is
dead-lettered at once with the reason. Several processes receive as competing consumers, as
the trigger's instances do; a release given twice is harmless (the second finds the event
released)."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from azure.servicebus.aio import ServiceBusClient

from cosmos_outbox._mapper import release_of
from cosmos_outbox._relay.scheduled import Releases

logger = logging.getLogger("cosmos_outbox.relay")

#: Wait after a receiver that failed (the queue missing, the broker away) before another.
RETRY_SECONDS = 5.0


async def receive_again_later(what: str, exc: Exception) -> None:
    """A receiver's connection lost or refused: said (`what` cannot be received, why), then
    tried again after RETRY_SECONDS (the relay's receivers share it)."""
    logger.warning(
        "relay: %s cannot be received (%s: %s); again in %gs",
        what,
        type(exc).__name__,
        str(exc).splitlines()[0][:200] if str(exc) else "",
        RETRY_SECONDS,
    )
    await asyncio.sleep(RETRY_SECONDS)


class Receiving(abc.ABC):
    """A receiver of the relay's own, as a task named `task` (`start`; `stop` cancels it and
    waits for it): connected with `connect`, it receives (`_receive`, until cancelled); a
    connection lost or refused is said (`what` cannot be received) and tried again after
    RETRY_SECONDS (`receive_again_later`)."""

    def __init__(self, connect: Callable[[], ServiceBusClient], *, task: str, what: str) -> None:
        self._connect = connect
        self._task_name = task
        self._what = what
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self._task_name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                async with self._connect() as client:
                    await self._receive(client)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await receive_again_later(self._what, exc)

    @abc.abstractmethod
    async def _receive(self, client: ServiceBusClient) -> None:
        """Receive from `client` until cancelled (or until its connection fails)."""


class ReleaseReceiver(Receiving):
    """Receives the schedule queue `queue` and releases what it gets (see the module)."""

    def __init__(
        self, connect: Callable[[], ServiceBusClient], queue: str, releases: Releases
    ) -> None:
        super().__init__(connect, task=f"releases-{queue}", what=f"the schedule queue {queue}")
        self.queue = queue
        self._releases = releases

    async def _receive(self, client: ServiceBusClient) -> None:
        async with client.get_queue_receiver(self.queue, max_wait_time=None) as receiver:
            logger.info("relay: receiving scheduled events' releases on %s", self.queue)
            async for message in receiver:
                await self._handle(receiver, message)

    async def _handle(self, receiver: Any, message: Any) -> None:
        try:
            release = release_of(b"".join(bytes(part) for part in message.body))
        except ValueError as exc:
            logger.error("relay: not a release on %s: %s", self.queue, exc)
            await receiver.dead_letter_message(
                message, reason="NotARelease", error_description=str(exc)[:1000]
            )
            return
        try:
            await self._releases.release(release)
        except Exception:
            logger.warning(
                "relay: release of event %s failed; the queue gives it again",
                release.event_id,
                exc_info=True,
            )
            await receiver.abandon_message(message)
            return
        await receiver.complete_message(message)
