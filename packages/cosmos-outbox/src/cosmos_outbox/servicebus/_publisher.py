"""The relay's publisher on the azure-servicebus SDK: `ServiceBusPublisher` (sync: one client
and sender per thread) and `AsyncServiceBusPublisher` (`aio`: one client, a sender per running
invocation, reused by the next). Both make batches of at most `max_message_bytes`, or of the
link's own limit when smaller, and refresh the link once per invocation when asked (the entity's
limit may have been raised). Connection string or managed identity: the classmethods."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from azure.servicebus import ServiceBusClient
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from cosmos_outbox.ports import AsyncMessagePublisher, MessageBatch, MessagePublisher
from cosmos_outbox.servicebus._clients import AsyncClientAdapter, ConnectedAdapter
from cosmos_outbox.servicebus._messages import ServiceBusBatch

logger = logging.getLogger("cosmos_outbox.servicebus")

#: The Standard tier's message and batch size; 1048576 on Premium.
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024


class _Link:
    """A topic sender and the size of the batches it makes: the smaller of the link's limit and
    the publisher's cap (known once the link was asked)."""

    def __init__(self) -> None:
        self.sender: Any = None
        self.batch_bytes: int | None = None


class ServiceBusPublisher(ConnectedAdapter, MessagePublisher):
    """One client and one sender per thread: the worker runs the trigger's invocations (one per
    lease) on threads of its own, concurrently, and the SDK's clients and senders are not
    thread-safe (its README: "not recommended to share across threads"). A sender per thread
    keeps the leases' sends concurrent; a lock around one sender would serialise them.

    `connect` makes a client (called once per thread)."""

    def __init__(
        self,
        connect: Callable[[], ServiceBusClient],
        topic: str,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        cloudevents_source_base: str = "",
    ) -> None:
        self.topic = topic
        self._connect = connect
        self._cap = max_message_bytes
        self._base = cloudevents_source_base
        self._lock = threading.Lock()  # guards `_clients`, every thread's (for close())
        self._clients: list[tuple[ServiceBusClient, _Link]] = []
        self._local = threading.local()

    def _link(self) -> tuple[ServiceBusClient, _Link]:
        found: tuple[ServiceBusClient, _Link] | None = getattr(self._local, "link", None)
        if found is None:
            found = self._local.link = (self._connect(), _Link())
            with self._lock:
                self._clients.append(found)
        client, link = found
        if link.sender is None:
            link.sender = client.get_topic_sender(self.topic)
        return found

    def create_batch(self) -> MessageBatch:
        """A batch of at most `max_message_bytes`, or of the link's own limit (what the entity
        announced when the link opened) when that is smaller: a message that does not fit an
        empty one is larger than the topic takes (the relay offloads it)."""
        try:
            _, link = self._link()
            if link.batch_bytes is None:
                batch = link.sender.create_message_batch()  # the link's limit
                link.batch_bytes = min(batch.max_size_in_bytes, self._cap)
                if batch.max_size_in_bytes > self._cap:
                    batch = link.sender.create_message_batch(self._cap)
            else:
                batch = link.sender.create_message_batch(link.batch_bytes)
            return ServiceBusBatch(batch, base=self._base)
        except Exception:
            self._reset()
            raise

    def send(self, batch: MessageBatch) -> None:
        assert isinstance(batch, ServiceBusBatch)
        try:
            self._link()[1].sender.send_messages(batch.batch)
        except Exception:
            # A broken link is not reused: the retried invocation opens a fresh one.
            self._reset()
            raise

    def refresh(self) -> bool:
        """The next batch comes from a new link, which announces the entity's current limit;
        unless this link already takes `max_message_bytes` (no link can take more from the
        relay): opening a link costs a round trip or more."""
        found: tuple[ServiceBusClient, _Link] | None = getattr(self._local, "link", None)
        if (
            found is not None
            and found[1].batch_bytes is not None
            and (found[1].batch_bytes >= self._cap)
        ):
            return False
        self._reset()
        return True

    def probe(self) -> None:
        """A fresh client and sender to the topic, opened (the connection, its authentication
        and the link: round trips to the namespace) and closed; the relay's own links are left
        as they are."""
        client = self._connect()
        try:
            with client.get_topic_sender(self.topic):
                pass
        finally:
            client.close()

    def _reset(self) -> None:
        """This thread's sender is closed; its next batch opens a new one."""
        found: tuple[ServiceBusClient, _Link] | None = getattr(self._local, "link", None)
        if found is not None:
            _close_sender(found[1])

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        self._local = threading.local()
        for client, link in clients:
            _close_sender(link)
            client.close()


class AsyncServiceBusPublisher(AsyncClientAdapter, AsyncMessagePublisher):
    """One `aio` client; a sender per running invocation (a task: the SDK's senders are not
    safe to share between coroutines), returned to a pool when the invocation ends and reused
    by the next, so concurrent leases send concurrently and no invocation opens a link of its
    own once the pool holds one. Batches are filled without blocking the loop."""

    def __init__(
        self,
        client: AsyncServiceBusClient,
        topic: str,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        cloudevents_source_base: str = "",
    ) -> None:
        self.topic = topic
        self._client = client
        self._cap = max_message_bytes
        self._base = cloudevents_source_base
        self._idle: list[_Link] = []
        self._busy: dict[asyncio.Task[Any], _Link] = {}

    def _link(self) -> _Link:
        task = asyncio.current_task()
        assert task is not None, "the async publisher runs in a task"
        link = self._busy.get(task)
        if link is None:
            link = self._busy[task] = self._idle.pop() if self._idle else _Link()
            task.add_done_callback(self._release)
        if link.sender is None:
            link.sender = self._client.get_topic_sender(self.topic)
        return link

    def _release(self, task: asyncio.Task[Any]) -> None:
        link = self._busy.pop(task, None)
        if link is not None and link.sender is not None:
            self._idle.append(link)

    async def create_batch(self) -> MessageBatch:
        link = self._link()
        try:
            if link.batch_bytes is None:
                batch = await link.sender.create_message_batch()
                link.batch_bytes = min(batch.max_size_in_bytes, self._cap)
                if batch.max_size_in_bytes > self._cap:
                    batch = await link.sender.create_message_batch(self._cap)
            else:
                batch = await link.sender.create_message_batch(link.batch_bytes)
            return ServiceBusBatch(batch, base=self._base)
        except Exception:
            await _aclose_sender(link)
            raise

    async def send(self, batch: MessageBatch) -> None:
        assert isinstance(batch, ServiceBusBatch)
        link = self._link()
        try:
            await link.sender.send_messages(batch.batch)
        except Exception:
            await _aclose_sender(link)
            raise

    async def refresh(self) -> bool:
        link = self._link()
        if link.batch_bytes is not None and link.batch_bytes >= self._cap:
            return False
        await _aclose_sender(link)
        return True

    async def probe(self) -> None:
        """A fresh sender to the topic (its own connection, authentication and link: round
        trips to the namespace), opened and closed; the relay's own links are left as they
        are."""
        async with self._client.get_topic_sender(self.topic):
            pass

    async def close(self) -> None:
        """Close the senders at once, then the client: the SDK's close of a sender waits for its
        link's keep-alive to end (about 0.5 s each, against Azure too), so one after the other
        a relay with three open senders took 1.5 s to stop, past a stack's stop grace."""
        links, self._idle = [*self._idle, *self._busy.values()], []
        self._busy.clear()
        await asyncio.gather(*(_aclose_sender(link) for link in links))
        await self._client.close()


def _close_sender(link: _Link) -> None:
    sender, link.sender, link.batch_bytes = link.sender, None, None
    if sender is not None:
        try:
            sender.close()
        except Exception:  # closing a broken sender may fail too
            logger.debug("closing a failed sender raised", exc_info=True)


async def _aclose_sender(link: _Link) -> None:
    sender, link.sender, link.batch_bytes = link.sender, None, None
    if sender is not None:
        try:
            await sender.close()
        except Exception:  # closing a broken sender may fail too
            logger.debug("closing a failed sender raised", exc_info=True)
