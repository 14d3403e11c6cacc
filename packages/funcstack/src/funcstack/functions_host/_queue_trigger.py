"""Azure Storage queue trigger (``queueTrigger``), as the host's Storage Queues extension (5.x)
polls and settles, on the unmodified ``azure-storage-queue`` SDK (locally: Azurite).

* Connection: the binding's ``connection`` (default ``AzureWebJobsStorage``), read as the host
  reads it: the setting ``<name>`` (else ``AzureWebJobs<name>``) as a connection string, or
  ``<name>__queueServiceUri`` with its identity (``_connections``). ``queueName`` may use
  ``%SETTING%``; it is lower-cased, as the extension normalizes it.
* Polling (``QueueListener``): up to ``batchSize`` messages per receive, each received with a
  10-minute visibility timeout (renewed at half-time while the function runs); a receive that
  found messages is followed by the next at once, as soon as at most ``newBatchThreshold`` are
  still running; an empty one by the randomized exponential back-off
  (``RandomizedExponentialBackoffStrategy``): 100 ms after a receive that found messages, then
  ``0.1 + r * 2^(k-1) * 0.1`` s (``r`` in 0.8..1.2) up to ``maxPollingInterval``. LOCAL
  DIFFERENCE: when host.json does not set ``maxPollingInterval`` the local cap is 1 s (Azure's
  default is 1 minute), so a new message is picked up within about a second. A message the
  host's own queue output adds wakes the queue's listener at once (``SharedQueueWatcher``:
  ``notify_enqueued``).
* Settling (``QueueProcessor``): success deletes the message; failure makes it visible again
  after ``visibilityTimeout`` (default 0: at once) with ``DequeueCount`` + 1 at the next
  receive; a failure at ``DequeueCount >= maxDequeueCount`` (default 5), or a message received
  with more, moves it to ``<queue>-poison`` (created when missing; the text as it was stored).
  A queue whose name ends in ``-poison``, or too long for the suffix, has no poison queue: a
  failed message stays invisible until its visibility timeout ends.
* ``messageEncoding`` (``base64`` default, or ``none``): base64 text is decoded before the
  function sees it; a message that is not valid base64 goes to the poison queue without an
  invocation (the extension's ``MessageDecodingFailed`` handler).
* The function gets the body as a string (``bytes`` with ``dataType: binary``) and the trigger
  metadata the library's ``QueueMessage`` decoder reads: ``Id``, ``PopReceipt``,
  ``DequeueCount``, ``InsertionTime``, ``ExpirationTime``, ``NextVisibleTime`` (numbers and
  dates as JSON, as the host serializes them), and ``QueueTrigger`` (the text).
* A retry policy on the function is applied in memory before the message is settled.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.storage.queue import QueueMessage
from azure.storage.queue.aio import QueueClient, QueueServiceClient

from funcstack.functions_host._config import SettingError, resolve
from funcstack.functions_host._connections import queue_service_for as queue_service_for
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._listener import (
    HostServices,
    TriggerListener,
    close_quietly,
    first_line,
)
from funcstack.functions_host._metadata import json_times, utc
from funcstack.functions_host._retry import RetryPolicy, parse_timespan
from funcstack.functions_host._rpc import protos

logger = logging.getLogger("funcstack.functions_host.queue")

DEFAULT_BATCH_SIZE = 16
MAX_BATCH_SIZE = 32  # the service's limit per receive
DEFAULT_MAX_DEQUEUE_COUNT = 5
MINIMUM_POLLING_INTERVAL = 0.1  # QueuePollingIntervals.Minimum
AZURE_MAX_POLLING_INTERVAL = 60.0  # QueuePollingIntervals.DefaultMaximum
LOCAL_MAX_POLLING_INTERVAL = 1.0  # the local cap when host.json sets none
RECEIVE_VISIBILITY_TIMEOUT = 600  # QueueListener: 10 minutes, renewed at half-time
POISON_SUFFIX = "-poison"
_QUEUE_NAME = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")


def poison_queue_name(queue: str) -> str | None:
    """``QueueListenerFactory.CreatePoisonQueueReference``: none for a poison queue itself or
    when the suffix makes the name invalid (too long)."""
    if queue.endswith(POISON_SUFFIX):
        return None
    name = queue + POISON_SUFFIX
    return name if _QUEUE_NAME.match(name) else None


#: The queue listeners of this host waiting for their next poll, by queue name: an output
#: binding that adds a message wakes them (the host's ``SharedQueueWatcher``).
_WAITING: dict[str, set[asyncio.Event]] = {}


def notify_enqueued(queue: str) -> None:
    """``IMessageEnqueuedWatcher.Notify``: a message was added to ``queue`` by this host; its
    listeners poll at once instead of finishing their back-off."""
    for event in _WAITING.get(queue.lower(), ()):
        event.set()


async def _enqueued(queue: str, delay: float) -> bool:
    """Wait ``delay`` seconds, or less when this host adds a message to ``queue``: whether it
    did."""
    event = asyncio.Event()
    waiting = _WAITING.setdefault(queue, set())
    waiting.add(event)
    try:
        await asyncio.wait_for(event.wait(), delay)
    except TimeoutError:
        return False
    finally:
        waiting.discard(event)
        if not waiting:
            _WAITING.pop(queue, None)
    return True


@dataclass(frozen=True)
class QueueTriggerOptions:
    """A ``queueTrigger`` binding with app settings resolved, and host.json
    ``extensions.queues``."""

    connection: str
    queue: str
    data_type: str
    batch_size: int
    new_batch_threshold: int
    max_polling_interval: float
    visibility_timeout: float
    max_dequeue_count: int
    message_encoding: str

    @classmethod
    def from_binding(
        cls, binding: Mapping[str, Any], host: Mapping[str, Any] | None = None
    ) -> QueueTriggerOptions:
        ext = {str(k).lower(): v for k, v in dict(host or {}).items()}
        queue = str(resolve(binding.get("queueName")) or "").lower()
        if not queue:
            raise SettingError("queueTrigger needs 'queueName'")
        batch = int(ext.get("batchsize", DEFAULT_BATCH_SIZE))
        if not 0 < batch <= MAX_BATCH_SIZE:
            raise SettingError(f"extensions.queues.batchSize must be 1..{MAX_BATCH_SIZE}")
        threshold = ext.get("newbatchthreshold")
        polling = ext.get("maxpollinginterval")
        max_polling = parse_timespan(polling) if polling is not None else LOCAL_MAX_POLLING_INTERVAL
        if max_polling < MINIMUM_POLLING_INTERVAL:
            raise SettingError(
                "extensions.queues.maxPollingInterval must not be less than 00:00:00.1"
            )
        encoding = str(ext.get("messageencoding", "base64")).lower()
        if encoding not in {"base64", "none"}:
            raise SettingError(f"extensions.queues.messageEncoding {encoding!r}: base64 or none")
        max_dequeue = int(ext.get("maxdequeuecount", DEFAULT_MAX_DEQUEUE_COUNT))
        if max_dequeue < 1:
            raise SettingError("extensions.queues.maxDequeueCount must not be less than 1")
        return cls(
            connection=str(resolve(binding.get("connection")) or "AzureWebJobsStorage"),
            queue=queue,
            data_type=str(binding.get("dataType") or "").lower(),
            batch_size=batch,
            # QueuesOptions: (batchSize / 2) * processor count when not set (1 on Consumption)
            new_batch_threshold=int(threshold)
            if threshold is not None
            else (batch // 2) * (os.cpu_count() or 1),
            max_polling_interval=max_polling,
            visibility_timeout=parse_timespan(ext.get("visibilitytimeout", 0)),
            max_dequeue_count=max_dequeue,
            message_encoding=encoding,
        )


def decode_body(content: str, encoding: str) -> bytes | None:
    """The message's bytes as the host's client decodes them; None when base64 is expected
    and the text is not base64 (``Convert.FromBase64String`` skips white space)."""
    if encoding == "none":
        return content.encode("utf-8")
    try:
        return base64.b64decode("".join(content.split()), validate=True)
    except (binascii.Error, ValueError):
        return None


def trigger_metadata(message: QueueMessage, text: str) -> dict[str, Any]:
    """The host's binding data for one message (``QueueTriggerBindingDataProvider``)."""
    pb = protos()
    out: dict[str, Any] = {
        "QueueTrigger": pb.TypedData(string=text),
        "Id": pb.TypedData(string=str(message.id)),
        "PopReceipt": pb.TypedData(string=str(message.pop_receipt)),
        "DequeueCount": pb.TypedData(json=json.dumps(int(message.dequeue_count or 0))),
    }
    moments = {
        "InsertionTime": message.inserted_on,
        "ExpirationTime": message.expires_on,
        "NextVisibleTime": message.next_visible_on,
    }
    # DateTimeOffsets, as Newtonsoft writes them
    return {**out, **json_times(moments, lambda moment: utc(moment).isoformat())}


class QueueTriggerListener(TriggerListener):
    """Feeds one function from its storage queue; listening once its first receive is answered
    (a queue that does not exist yet answers too: its messages are picked up once it does)."""

    kind = "queue trigger"

    def __init__(
        self, spec: FunctionSpec, host: HostServices, *, extension: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(spec, host)
        queues = host.host_json.queues if extension is None else extension
        self.options = QueueTriggerOptions.from_binding(spec.trigger, queues)
        self._service: QueueServiceClient | None = None
        self._processing: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._service = queue_service_for(self.options.connection)
        self.spawn(self._run(), name=f"queue-{self.spec.name}")
        opts = self.options
        logger.info(
            "queue trigger %s: %s (batchSize %d, newBatchThreshold %d, maxPollingInterval %.1fs,"
            " maxDequeueCount %d, messageEncoding %s)",
            self.spec.name,
            opts.queue,
            opts.batch_size,
            opts.new_batch_threshold,
            opts.max_polling_interval,
            opts.max_dequeue_count,
            opts.message_encoding,
        )

    async def stop(self) -> None:
        await super().stop()
        for task in list(self._processing):
            task.cancel()
        if self._processing:
            await asyncio.wait(self._processing, timeout=5.0)
        await close_quietly(self._service)
        self._service = None

    def poison_queue_name(self) -> str | None:
        """Where messages that keep failing go (``poison_queue_name``)."""
        return poison_queue_name(self.options.queue)

    def _delays(self) -> Any:
        policy = RetryPolicy(
            "exponential_backoff",
            -1,
            minimum_interval=MINIMUM_POLLING_INTERVAL,
            maximum_interval=self.options.max_polling_interval,
        )
        return policy.backoff()

    async def _run(self) -> None:
        assert self._service is not None
        opts = self.options
        queue = self._service.get_queue_client(opts.queue)
        poison_name = self.poison_queue_name()
        poison = self._service.get_queue_client(poison_name) if poison_name else None
        backoff = self._delays()
        found_since_last_delay = False
        while True:
            try:
                batch = [
                    m
                    async for m in queue.receive_messages(
                        messages_per_page=opts.batch_size,
                        max_messages=opts.batch_size,
                        visibility_timeout=RECEIVE_VISIBILITY_TIMEOUT,
                    )
                ]
            except asyncio.CancelledError:
                raise
            except ResourceNotFoundError:
                # the queue does not exist (yet): back off, as the host does; a message sent
                # once it does is received
                batch = []
                self.listening()
            except AzureError as exc:
                logger.warning("queue trigger %s: %s", self.spec.name, exc)
                self.unable_to_start(f"{type(exc).__name__}: {first_line(exc)}")
                batch = []
            else:
                self.listening()
            for message in batch:
                task = asyncio.create_task(self._process(queue, poison, message))
                self._processing.add(task)
                task.add_done_callback(self._processing.discard)
            if batch:
                found_since_last_delay = True
                while len(self._processing) > opts.new_batch_threshold:
                    await asyncio.wait(set(self._processing), return_when=asyncio.FIRST_COMPLETED)
                continue
            if found_since_last_delay:
                backoff = self._delays()  # GetNextDelay(executionSucceeded: true): the minimum
                found_since_last_delay = False
            if await _enqueued(opts.queue, backoff.next_delay()):
                backoff = self._delays()  # a message added by this host: poll now

    async def _process(
        self, queue: QueueClient, poison: QueueClient | None, message: QueueMessage
    ) -> None:
        opts = self.options
        try:
            if int(message.dequeue_count or 0) > opts.max_dequeue_count:
                await self._to_poison(queue, poison, message)
                return
            body = decode_body(str(message.content or ""), opts.message_encoding)
            if body is None:
                logger.warning(
                    "queue trigger %s: message %s is not base64 (messageEncoding base64)",
                    self.spec.name,
                    message.id,
                )
                await self._to_poison(queue, poison, message)
                return
            renewal = asyncio.create_task(self._keep_invisible(queue, message))
            try:
                ok = await self._invoke(message, body)
            finally:
                renewal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewal
            if ok:
                await self._settle(queue.delete_message(message.id, message.pop_receipt))
            elif poison is not None:
                if int(message.dequeue_count or 0) >= opts.max_dequeue_count:
                    await self._to_poison(queue, poison, message)
                else:
                    await self._settle(
                        queue.update_message(
                            message.id,
                            message.pop_receipt,
                            visibility_timeout=int(opts.visibility_timeout),
                        )
                    )
            # without a poison queue a failed message stays invisible (no fast infinite loop)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("queue trigger %s: message %s", self.spec.name, message.id)

    async def _keep_invisible(self, queue: QueueClient, message: QueueMessage) -> None:
        """``UpdateQueueMessageVisibilityCommand``: at half the visibility timeout, again."""
        while True:
            await asyncio.sleep(RECEIVE_VISIBILITY_TIMEOUT / 2)
            receipt = await queue.update_message(
                message.id, message.pop_receipt, visibility_timeout=RECEIVE_VISIBILITY_TIMEOUT
            )
            message.pop_receipt = receipt.pop_receipt
            message.next_visible_on = receipt.next_visible_on

    async def _settle(self, operation: Any) -> None:
        try:
            await operation
        except ResourceNotFoundError:
            pass  # the message or the queue is gone: nothing to settle
        except AzureError as exc:  # pop receipt mismatch: someone else took the message over
            logger.debug("queue trigger %s: settling: %s", self.spec.name, exc)

    async def _to_poison(
        self, queue: QueueClient, poison: QueueClient | None, message: QueueMessage
    ) -> None:
        """``HandlePoisonMessageAsync``: the text as stored, into ``<queue>-poison``."""
        if poison is None:
            return
        logger.warning(
            "Message has reached MaxDequeueCount of %d. Moving message to queue '%s'.",
            self.options.max_dequeue_count,
            poison.queue_name,
        )
        with contextlib.suppress(ResourceExistsError):
            await poison.create_queue()
        await poison.send_message(str(message.content or ""))
        await self._settle(queue.delete_message(message.id, message.pop_receipt))

    async def _invoke(self, message: QueueMessage, body: bytes) -> bool:
        pb = protos()
        text = body.decode("utf-8", "replace")
        data = (
            pb.TypedData(bytes=body)
            if self.options.data_type == "binary"
            else pb.TypedData(string=text)
        )
        ok, _ = await self.invoke(
            data,
            trigger_metadata=trigger_metadata(message, text),
            what=(
                f"queue trigger {self.spec.name}: message {message.id} "
                f"(dequeue {message.dequeue_count})"
            ),
        )
        return ok
