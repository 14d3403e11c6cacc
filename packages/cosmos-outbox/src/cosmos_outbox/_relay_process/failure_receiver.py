"""The failures' ingest in a relay process (OUTBOX_FAILURE_INGEST): what the Functions app's
`ingest_failures_*` triggers do (one per dead-letter path), done by a receiver of the process's
own per watched entity: the dead letters are received (peek-lock) in batches of up to
`RECEIVE_BATCH`, kept as records at once
(`cosmos_outbox.operations._failures.Failures.ingest_many`: each group's records and summary in
transactional batches) and completed only once that write
returned; a write that fails abandons them all (the queue gives them again). A process killed
between the write and the complete loses nothing: the lock runs out (or the link closes), the
dead letters are given again, and their second write changes nothing. Several processes receive
as competing consumers, as the triggers' instances do."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from azure.servicebus import ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient

from cosmos_outbox._relay_process.schedule_receiver import Receiving
from cosmos_outbox.operations._failures import Failures, received
from cosmos_outbox.ports import DeadLetterEntity
from cosmos_outbox.servicebus._dead_letters import dead_letter_of

__all__ = ["FailureReceiver", "dead_letter_path"]

logger = logging.getLogger("cosmos_outbox.relay")

#: Dead letters received (and kept) at once: one batch of a group's records (99) and more.
RECEIVE_BATCH = 100
#: The longest wait for a first dead letter before receiving again (the SDK returns a batch a
#: moment after its first message, full or not).
RECEIVE_WAIT_SECONDS = 5.0


def dead_letter_path(topic: str, entity: DeadLetterEntity) -> str:
    """The dead-letter queue's path, as Service Bus (and the trigger's binding) names it."""
    if entity.kind == "subscription":
        return f"{topic}/Subscriptions/{entity.name}/$DeadLetterQueue"
    return f"{entity.name}/$DeadLetterQueue"


class FailureReceiver(Receiving):
    """Drains `entity`'s dead-letter queue into `failures` (see the module)."""

    def __init__(
        self,
        connect: Callable[[], ServiceBusClient],
        topic: str,
        entity: DeadLetterEntity,
        failures: Failures,
    ) -> None:
        path = dead_letter_path(topic, entity)
        super().__init__(
            connect, task=f"failures-{entity.name}", what=f"the dead letters of {path}"
        )
        self._topic = topic
        self.entity = entity
        self._failures = failures
        #: dead letters kept and completed since the start
        self.ingested = 0

    @property
    def path(self) -> str:
        return dead_letter_path(self._topic, self.entity)

    def _receiver(self, client: Any) -> Any:
        options = {
            "sub_queue": ServiceBusSubQueue.DEAD_LETTER,
            "receive_mode": ServiceBusReceiveMode.PEEK_LOCK,
        }
        if self.entity.kind == "subscription":
            return client.get_subscription_receiver(self._topic, self.entity.name, **options)
        return client.get_queue_receiver(self.entity.name, **options)

    async def _receive(self, client: ServiceBusClient) -> None:
        async with self._receiver(client) as receiver:
            logger.info("relay: keeping the failures of %s", self.path)
            while True:
                batch = await receiver.receive_messages(
                    max_message_count=RECEIVE_BATCH, max_wait_time=RECEIVE_WAIT_SECONDS
                )
                if batch:
                    await self._handle(receiver, batch)

    async def _handle(self, receiver: Any, messages: list[Any]) -> None:
        """`messages` kept at once, then completed; none completed unless all were kept."""
        letters = [received(dead_letter_of(m)) for m in messages]
        try:
            await self._failures.ingest_many(self.entity, letters)
        except Exception:
            logger.warning(
                "relay: %d dead letter(s) of %s (sequence numbers %s-%s) not kept; the queue "
                "gives them again",
                len(letters),
                self.path,
                letters[0].sequence_number,
                letters[-1].sequence_number,
                exc_info=True,
            )
            for message in messages:
                with contextlib.suppress(Exception):  # its lock runs out on its own
                    await receiver.abandon_message(message)
            return
        # kept: the completes go out together (one link); one that fails leaves its dead
        # letter to come back, and its second write changes nothing
        completed = await asyncio.gather(
            *(receiver.complete_message(m) for m in messages), return_exceptions=True
        )
        failed = [r for r in completed if isinstance(r, BaseException)]
        for problem in failed:
            if not isinstance(problem, Exception):
                raise problem
        if failed:
            logger.warning(
                "relay: %d of %d dead letter(s) of %s kept but not completed (%s); the queue "
                "gives them again, their second write changes nothing",
                len(failed),
                len(messages),
                self.path,
                failed[0],
            )
        self.ingested += len(messages) - len(failed)
