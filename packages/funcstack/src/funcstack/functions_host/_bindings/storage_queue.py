"""The Storage queue output binding, as the Storage Queues extension 5.x serves it to a script
worker (Azure/azure-sdk-for-net, ``Microsoft.Azure.WebJobs.Extensions.Storage.Queues``:
``QueuesExtensionConfigProvider`` binds ``IAsyncCollector<QueueMessage>`` with a converter from
``byte[]``, so a script's value goes through ``IAsyncCollector<byte[]>``; ``QueueAsyncCollector``
adds each message with ``AddMessageAndCreateIfNotExistsAsync``):

* ``queueName`` (``{...}`` resolved per invocation) lower-cased, as the extension coerces it,
  and checked (3-63 lower-case letters, digits and single dashes); a literal name that is not
  valid is refused at indexing, as the extension's validator refuses it.
* ``connection``: a storage connection (``_connections``: a connection string, or
  ``<connection>__queueServiceUri`` / ``__accountName``); empty means ``AzureWebJobsStorage``.
* The value: one message per item (``values.collector_bytes``): a list (or a string that is a
  JSON array) is one message per element; a JSON object is its indented JSON text, as
  Newtonsoft writes ``JObject.ToString()`` (so ``func.QueueMessage(body=...)``, which the worker
  sends as ``{"id": ..., "body": ...}``, arrives as that JSON text); bytes as they are.
* Each message encoded as host.json ``extensions.queues.messageEncoding`` says (``base64``, the
  default, or ``none``); the queue created when it does not exist; the host's own listeners of
  that queue woken (``QueueAsyncCollector`` notifies the ``IMessageEnqueuedWatcher``). A failed
  add fails the invocation.
* There is no Storage queue *input* binding for a script worker (the extension binds a
  ``QueueClient``): refused at indexing.
"""

from __future__ import annotations

import base64
import contextlib
from typing import TYPE_CHECKING

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError

from funcstack.functions_host._bindings.base import BindingError, BindingRefusedError, ClientBinding
from funcstack.functions_host._bindings.expressions import ExpressionError
from funcstack.functions_host._bindings.values import BindingValueError, collector_bytes
from funcstack.functions_host._queue_trigger import _QUEUE_NAME, notify_enqueued

if TYPE_CHECKING:
    from funcstack.functions_host._bindings.base import BindingDecl, BindingEnv
    from funcstack.functions_host._bindings.expressions import BindingData
    from funcstack.functions_host._bindings.values import HostValue

__all__ = ["QueueOutput"]

DEFAULT_CONNECTION = "AzureWebJobsStorage"


def _check_name(name: str) -> str | None:
    """``QueueClientExtensions.ValidateQueueName``'s complaint about ``name``, or None."""
    if not 3 <= len(name) <= 63:
        return f"the queue name {name!r} must be 3-63 characters long"
    if not _QUEUE_NAME.match(name):
        return (
            f"the queue name {name!r} may contain only lower-case letters, digits and single "
            "dashes, and must start and end with a letter or digit"
        )
    return None


class QueueOutput(ClientBinding):
    """``[Queue(queueName)]`` as ``IAsyncCollector<byte[]>``."""

    kind = "queues"
    default_connection = DEFAULT_CONNECTION

    def __init__(self, decl: BindingDecl, env: BindingEnv) -> None:
        super().__init__(decl, env)
        self._queue = decl.template("queueName")
        if not self._queue.source.strip():
            raise BindingRefusedError("a queue binding needs 'queueName'")
        if self._queue.is_literal:
            problem = _check_name(self._queue.source.lower())
            if problem is not None:
                raise BindingRefusedError(problem)
        extension = {str(k).casefold(): v for k, v in dict(env.host_json.queues or {}).items()}
        self._encoding = str(extension.get("messageencoding", "base64")).casefold()

    async def write(self, value: HostValue, data: BindingData) -> None:
        try:
            queue_name = self._queue.bind(data).lower()
            messages = collector_bytes(value)
        except (ExpressionError, BindingValueError) as exc:
            raise BindingError(f"output '{self.name}' (queue): {exc}") from None
        problem = _check_name(queue_name)
        if problem is not None:
            raise BindingError(f"output '{self.name}' (queue): {problem}")
        client = self._env.clients.queues(self._connection).get_queue_client(queue_name)
        try:
            for message in messages:
                text = (
                    base64.b64encode(message).decode("ascii")
                    if self._encoding == "base64"
                    else message.decode("utf-8", "replace")
                )
                try:
                    await client.send_message(text)
                except ResourceNotFoundError:  # AddMessageAndCreateIfNotExistsAsync
                    with contextlib.suppress(ResourceExistsError):
                        await client.create_queue()
                    await client.send_message(text)
                notify_enqueued(queue_name)  # the host's queue listeners poll at once
        except AzureError as exc:
            raise BindingError(
                f"output '{self.name}' (queue {queue_name}): {type(exc).__name__}: {exc}"
            ) from None
