"""The schedule queue on azure-servicebus: where the relay schedules the release of each scheduled
event for its due time (`cosmos_outbox._relay.scheduled` says why a release, and not the event
itself, waits on the broker). A release is a small message on a queue of the topic's namespace,
sent with its `scheduled_enqueue_time_utc` (Service Bus keeps it invisible until then: the
`x-opt-scheduled-enqueue-time` annotation), received at that time by the relay's
`release_due_events` function (a Service Bus queue trigger). A release for a time already past
is sent without one: visible at once. No sequence number is kept: a release is never cancelled
(a cancelled event's release finds it cancelled, and does nothing).

`ServiceBusScheduleQueue` (sync: a client and sender per thread, as the relay's publisher) and
`AsyncServiceBusScheduleQueue` (`aio`: one client and one sender, its sends one at a time)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from cosmos_outbox import clock
from cosmos_outbox._mapper import RELEASE_SUBJECT, due_text, release_body
from cosmos_outbox._records import Release
from cosmos_outbox.ports import AsyncScheduleQueue, ScheduleQueue
from cosmos_outbox.servicebus._clients import AsyncClientAdapter, ConnectedAdapter

logger = logging.getLogger("cosmos_outbox.servicebus")

__all__ = ["AsyncServiceBusScheduleQueue", "ServiceBusScheduleQueue", "release_message"]


def release_message(release: Release) -> ServiceBusMessage:
    """A release as a Service Bus message: scheduled for its time unless that is past. Its
    MessageId is the event's id and the time, so a queue with duplicate detection drops a
    relay's retry of the same release, never a later step of it."""
    return ServiceBusMessage(
        release_body(release),
        content_type="application/json",
        subject=RELEASE_SUBJECT,
        message_id=f"{release.event_id}@{due_text(release.at)}",
        scheduled_enqueue_time_utc=release.at if release.at > clock.now() else None,
    )


class ServiceBusScheduleQueue(ConnectedAdapter, ScheduleQueue):
    """One client and sender per thread (the SDK's are not thread-safe; the sync relay's
    invocations run on threads of their own). `connect` makes a client."""

    def __init__(self, connect: Callable[[], ServiceBusClient], queue: str) -> None:
        self.queue = queue
        self._connect = connect
        self._lock = threading.Lock()
        self._clients: list[ServiceBusClient] = []
        self._local = threading.local()

    def _sender(self) -> Any:
        sender = getattr(self._local, "sender", None)
        if sender is None:
            client = getattr(self._local, "client", None)
            if client is None:
                client = self._local.client = self._connect()
                with self._lock:
                    self._clients.append(client)
            sender = self._local.sender = client.get_queue_sender(self.queue)
        return sender

    def _reset(self) -> None:
        sender, self._local.sender = getattr(self._local, "sender", None), None
        if sender is not None:
            try:
                sender.close()
            except Exception:  # closing a broken sender may fail too
                logger.debug("closing a failed sender raised", exc_info=True)

    def schedule(self, releases: Sequence[Release]) -> None:
        if not releases:
            return
        try:
            self._sender().send_messages([release_message(r) for r in releases])
        except Exception:
            self._reset()  # a broken link is not reused: the retry opens a fresh one
            raise

    def check(self) -> None:
        """The queue's link opens (a sender's batch asks the entity for its limit)."""
        try:
            self._sender().create_message_batch()
        except Exception:
            self._reset()
            raise

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        self._local = threading.local()
        for client in clients:
            client.close()


class AsyncServiceBusScheduleQueue(AsyncClientAdapter, AsyncScheduleQueue):
    """One `aio` client and one sender, kept (opening a link costs a round trip or more); a
    sender is not safe to share between coroutines, so the sends take turns (scheduled events
    are a small part of what the relay sends; a release is a small message)."""

    def __init__(self, client: AsyncServiceBusClient, queue: str) -> None:
        self.queue = queue
        self._client = client
        self._sender: Any = None
        self._turn: asyncio.Lock | None = None

    async def _send(self, releases: Sequence[Release] | None) -> None:
        """Send `releases` (None: open the link and ask its limit) on the kept sender; a sender
        that failed is closed, the next call opens another."""
        if self._turn is None:
            self._turn = asyncio.Lock()
        async with self._turn:
            if self._sender is None:
                self._sender = self._client.get_queue_sender(self.queue)
            try:
                if releases is None:
                    await self._sender.create_message_batch()
                else:
                    await self._sender.send_messages([release_message(r) for r in releases])
            except Exception:
                sender, self._sender = self._sender, None
                try:
                    await sender.close()
                except Exception:  # closing a broken sender may fail too
                    logger.debug("closing a failed sender raised", exc_info=True)
                raise

    async def schedule(self, releases: Sequence[Release]) -> None:
        if releases:
            await self._send(releases)

    async def check(self) -> None:
        """The queue's link opens (a sender's batch asks the entity for its limit)."""
        await self._send(None)

    async def close(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            await sender.close()
        await self._client.close()
