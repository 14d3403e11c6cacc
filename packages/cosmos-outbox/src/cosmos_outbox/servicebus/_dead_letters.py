"""The dead-letter queues on azure-servicebus: `ServiceBusDeadLetters` (sync) and
`AsyncServiceBusDeadLetters` (`aio`), over one pure mapping (a received message as a
`DeadLetter`, an `Outgoing` as a `ServiceBusMessage`).

- **Peek** reads a dead-letter queue's messages without locking them
  (`peek_messages(sequence_number=...)`, from 1 at the least: the SDK reads 0 as "after the
  last message this receiver received"): a Listen operation, the same right as receiving. No
  Manage right is needed: counts are peeked too, never read from the management API.
- **Move** receives (peek-lock) from the dead-letter queue until it has seen every message it
  was asked for, or the queue gives nothing more within a second; for each one asked for, it
  sends its `Outgoing` (to the topic for a subscription's dead letter, to the queue for a
  queue's) and **only once that send was accepted** completes the dead letter. A send that
  fails abandons it: it stays. The others it received are held locked until the end, then
  abandoned, so a receive never hands the same one back twice (Service Bus Explorer does the
  same; an abandoned dead letter's DeliveryCount goes up, nothing else changes).

The links are kept (one receiver of each dead-letter queue and one sender to where its messages
go back, per entity, made on first use: opening and closing a pair costs about two seconds on a
local endpoint), used by one call at a time; a call that fails drops its entity's links, and the
next opens new ones (the locks of a dropped receiver are released with it).

The sub-queue is the SDK's (`ServiceBusSubQueue.DEAD_LETTER`: `<entity>/$DeadLetterQueue`); a
dead-letter queue is never session-enabled, whatever its entity is (Azure's docs, "Service Bus
dead-letter queues"). The app's identity needs Azure Service Bus Data Receiver on the watched
subscriptions (or queues) and Data Sender on the topic (or queues).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from cosmos_outbox._mapper.message import Headers, headers_of
from cosmos_outbox._sync_over_async import _Awaitable, run_sync
from cosmos_outbox.ports import (
    AsyncDeadLetterQueues,
    DeadLetter,
    DeadLetterEntity,
    DeadLetterQueues,
    MoveOutcome,
    Outgoing,
)

__all__ = [
    "AsyncServiceBusDeadLetters",
    "ServiceBusDeadLetters",
    "dead_letter_of",
    "dead_letter_with",
]
from cosmos_outbox.servicebus._clients import AsyncClientAdapter, ConnectedAdapter
from cosmos_outbox.servicebus._messages import message_of

logger = logging.getLogger("cosmos_outbox.servicebus")
#: The two application properties the broker adds when it dead-letters a message.
BROKER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})
#: How long a move waits for more dead letters once a receive came back empty.
_RECEIVE_WAIT_SECONDS = 1.0
_RECEIVE_BATCH = 50


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def dead_letter_of(message: ServiceBusReceivedMessage) -> DeadLetter:
    """A received (or peeked) message of a dead-letter queue, as the port's `DeadLetter`."""
    return dead_letter_with(message, b"".join(message.body), headers_of(message))


def dead_letter_with(message: Any, body: bytes, headers: Headers) -> DeadLetter:
    """A dead-lettered message as the port's `DeadLetter`, given its body and its headers: the
    SDK's received message (`dead_letter_of`) or the Functions trigger's, whose other fields
    (the sequence number, the broker's reason and description, the delivery count, the
    enqueued time, the application properties but the broker's two) are read alike."""
    properties = {
        str(_text(k)): _text(v)
        for k, v in (message.application_properties or {}).items()
        if str(_text(k)) not in BROKER_PROPERTIES
    }
    enqueued = message.enqueued_time_utc
    return DeadLetter(
        sequence_number=int(message.sequence_number or 0),
        body=body,
        **headers,
        application_properties=properties,
        reason=message.dead_letter_reason,
        description=message.dead_letter_error_description,
        delivery_count=int(message.delivery_count or 0),
        enqueued_at=enqueued.timestamp() if enqueued is not None else None,
    )


class _Links:
    """One entity's receiver (of its dead-letter queue, peek-lock) and sender (to the topic for
    a subscription's, to the queue for a queue's)."""

    def __init__(self, receiver: Any, sender: Any) -> None:
        self.receiver, self.sender = receiver, sender


def _receiver_of(client: Any, topic: str, entity: DeadLetterEntity) -> Any:
    options = {
        "sub_queue": ServiceBusSubQueue.DEAD_LETTER,
        "receive_mode": ServiceBusReceiveMode.PEEK_LOCK,
    }
    if entity.kind == "subscription":
        return client.get_subscription_receiver(topic, entity.name, **options)
    return client.get_queue_receiver(entity.name, **options)


def _sender_of(client: Any, topic: str, entity: DeadLetterEntity) -> Any:
    if entity.kind == "subscription":
        return client.get_topic_sender(topic)
    return client.get_queue_sender(entity.name)


def _peeked(messages: list[ServiceBusReceivedMessage], from_sequence: int) -> list[DeadLetter]:
    return [dead_letter_of(m) for m in messages if int(m.sequence_number or 0) >= from_sequence]


def _batch_size(wanted: Mapping[int, Any]) -> int:
    """As many as are wanted (the receive returns once it has them), at most a batch."""
    return max(1, min(_RECEIVE_BATCH, len(wanted)))


class ServiceBusDeadLetters(ConnectedAdapter, DeadLetterQueues):
    """The dead-letter queues of `topic`'s subscriptions (and of queues) on the SDK's sync
    client (made by `connect`, once, on first use). One call at a time (a lock): the sync
    SDK's links are not to be shared between threads."""

    def __init__(self, connect: Any, topic: str) -> None:
        self._connect = connect
        self._topic = topic
        self._client: ServiceBusClient | None = None
        self._lock = threading.Lock()
        self._links: dict[str, _Links] = {}

    def _links_of(self, entity: DeadLetterEntity) -> _Links:
        links = self._links.get(entity.name)
        if links is None:
            if self._client is None:
                self._client = self._connect()
            receiver = _receiver_of(self._client, self._topic, entity)
            sender = _sender_of(self._client, self._topic, entity)
            receiver.__enter__()
            try:
                sender.__enter__()
            except Exception:
                _quietly(lambda: receiver.__exit__(None, None, None))
                raise
            links = self._links[entity.name] = _Links(receiver, sender)
        return links

    def _drop(self, entity: DeadLetterEntity) -> None:
        links = self._links.pop(entity.name, None)
        if links is not None:
            _quietly(lambda: links.receiver.__exit__(None, None, None))
            _quietly(lambda: links.sender.__exit__(None, None, None))

    def peek(
        self, entity: DeadLetterEntity, *, from_sequence: int, max_count: int
    ) -> list[DeadLetter]:
        with self._lock:
            try:
                peeked = self._links_of(entity).receiver.peek_messages(
                    max_message_count=max_count, sequence_number=max(from_sequence, 1)
                )
            except Exception:
                self._drop(entity)
                raise
        return _peeked(peeked, from_sequence)

    def move(
        self, entity: DeadLetterEntity, moves: Mapping[int, Outgoing | None]
    ) -> dict[int, MoveOutcome]:
        with self._lock:
            links = self._links_of(entity)
            receiver, sender = _Awaitable(links.receiver), _Awaitable(links.sender)
            try:
                outcomes, held = run_sync(_moved(entity, moves, receiver, sender))
            except Exception:
                self._drop(entity)  # its locks are released with it
                raise
            for message in held:
                _quietly(lambda m=message: links.receiver.abandon_message(m))
        return outcomes

    def send(self, entity: DeadLetterEntity, messages: Sequence[Outgoing]) -> None:
        if not messages:
            return
        with self._lock:
            try:
                self._links_of(entity).sender.send_messages([message_of(m) for m in messages])
            except Exception:
                self._drop(entity)
                raise

    def close(self) -> None:
        with self._lock:
            for name in list(self._links):
                self._drop(DeadLetterEntity(name))
            if self._client is not None:
                self._client.close()
                self._client = None


class AsyncServiceBusDeadLetters(AsyncClientAdapter, AsyncDeadLetterQueues):
    """`ServiceBusDeadLetters` on the SDK's `aio` client: one call at a time per entity (an
    `asyncio.Lock` each), the others' concurrent."""

    def __init__(self, client: AsyncServiceBusClient, topic: str) -> None:
        self._client = client
        self._topic = topic
        self._links: dict[str, _Links] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, entity: DeadLetterEntity) -> asyncio.Lock:
        return self._locks.setdefault(entity.name, asyncio.Lock())

    async def _links_of(self, entity: DeadLetterEntity) -> _Links:
        links = self._links.get(entity.name)
        if links is None:
            receiver = _receiver_of(self._client, self._topic, entity)
            sender = _sender_of(self._client, self._topic, entity)
            await receiver.__aenter__()
            try:
                await sender.__aenter__()
            except Exception:
                await _aquietly(receiver.__aexit__(None, None, None))
                raise
            links = self._links[entity.name] = _Links(receiver, sender)
        return links

    async def _drop(self, entity: DeadLetterEntity) -> None:
        links = self._links.pop(entity.name, None)
        if links is not None:
            await _aquietly(links.receiver.__aexit__(None, None, None))
            await _aquietly(links.sender.__aexit__(None, None, None))

    async def peek(
        self, entity: DeadLetterEntity, *, from_sequence: int, max_count: int
    ) -> list[DeadLetter]:
        async with self._lock(entity):
            try:
                links = await self._links_of(entity)
                peeked = await links.receiver.peek_messages(
                    max_message_count=max_count, sequence_number=max(from_sequence, 1)
                )
            except BaseException:
                await self._drop(entity)
                raise
        return _peeked(peeked, from_sequence)

    async def move(
        self, entity: DeadLetterEntity, moves: Mapping[int, Outgoing | None]
    ) -> dict[int, MoveOutcome]:
        async with self._lock(entity):
            links = await self._links_of(entity)
            try:
                outcomes, held = await _moved(entity, moves, links.receiver, links.sender)
            except BaseException:  # cancelled (the operators' bound) included
                await self._drop(entity)  # its locks are released with it
                raise
            for message in held:
                await _aquietly(links.receiver.abandon_message(message))
        return outcomes

    async def send(self, entity: DeadLetterEntity, messages: Sequence[Outgoing]) -> None:
        if not messages:
            return
        async with self._lock(entity):
            try:
                links = await self._links_of(entity)
                await links.sender.send_messages([message_of(m) for m in messages])
            except BaseException:
                await self._drop(entity)
                raise

    async def close(self) -> None:
        for name in list(self._links):
            await self._drop(DeadLetterEntity(name))
        await self._client.close()


#: The outcome of a dead letter that was not received: gone, or locked by another receiver.
NOT_FOUND = "not found (removed already, or locked by another receiver)"


async def _moved(
    entity: DeadLetterEntity, moves: Mapping[int, Outgoing | None], receiver: Any, sender: Any
) -> tuple[dict[int, MoveOutcome], list[ServiceBusReceivedMessage]]:
    """A move, written once for both clients (the sync one's receiver and sender made
    awaitable, run with `run_sync`): what became of each dead letter asked for, and the others
    received, held locked for the caller to abandon. A receive that fails raises (the caller
    drops the links, and their locks with them)."""
    wanted = dict(moves)
    outcomes: dict[int, MoveOutcome] = {}
    held: list[ServiceBusReceivedMessage] = []
    while wanted:
        batch = await receiver.receive_messages(
            max_message_count=_batch_size(wanted), max_wait_time=_RECEIVE_WAIT_SECONDS
        )
        if not batch:
            break
        for message in batch:
            number = int(message.sequence_number or 0)
            if number not in wanted:
                held.append(message)
                continue
            outgoing = wanted.pop(number)
            try:
                if outgoing is not None:
                    await sender.send_messages(message_of(outgoing))
            except Exception as exc:
                outcomes[number] = _send_failed(entity, number, exc)
                held.append(message)
                continue
            try:
                await receiver.complete_message(message)
            except Exception as exc:
                outcomes[number] = _not_completed(entity, number, exc)
            else:
                outcomes[number] = None
    for number in wanted:
        outcomes[number] = NOT_FOUND
    return outcomes, held


def _send_failed(entity: DeadLetterEntity, number: int, exc: Exception) -> str:
    logger.warning(
        "dead letter %s of %s: the send failed (%s); it stays in the dead-letter queue",
        number,
        entity.name,
        type(exc).__name__,
        extra={"outbox.entity": entity.name, "outbox.sequence_number": number},
    )
    return f"the send was refused ({type(exc).__name__}: {str(exc)[:200]}); it stays"


def _not_completed(entity: DeadLetterEntity, number: int, exc: Exception) -> str:
    logger.warning(
        "dead letter %s of %s: sent, but not removed (%s)",
        number,
        entity.name,
        type(exc).__name__,
        extra={"outbox.entity": entity.name, "outbox.sequence_number": number},
    )
    return (
        f"sent, but the dead letter could not be removed ({type(exc).__name__}): it stays, and "
        "doing it again sends a message with the same MessageId (dropped as a duplicate)"
    )


def _quietly(call: Any) -> None:
    try:
        call()
    except Exception:  # its lock runs out on its own
        logger.debug("abandoning a dead letter failed", exc_info=True)


async def _aquietly(call: Any) -> None:
    try:
        await call
    except Exception:  # a broken link's close, an expired lock's abandon
        logger.debug("closing a link or abandoning a dead letter failed", exc_info=True)
