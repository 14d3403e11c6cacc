"""The Service Bus output binding (queue or topic), as the Service Bus extension 5.x serves it
to a script worker (Azure/azure-sdk-for-net, ``Microsoft.Azure.WebJobs.Extensions.ServiceBus``:
``ServiceBusAttributeBindingProvider`` has no binding rules, so the host binds a script's value
to ``IAsyncCollector<string>`` (``JobHostMetadataProvider.GetDefaultType``); each string becomes
a message by ``StringToMessageConverter``):

* ``queueName`` or ``topicName`` (``{...}`` resolved per invocation); ``connection``: a Service
  Bus connection (``_connections``: a connection string, or
  ``<connection>__fullyQualifiedNamespace``), ``AzureWebJobsServiceBus`` when empty.
* The value: one message per item (``values.collector_string``): a list (or a string that is a
  JSON array) is one message per element, a JSON object its indented JSON text. Each message's
  body is the text in UTF-8 with ``ContentType`` ``text/plain``: the properties a Python
  function can set on a Service Bus output are none but the body (the library's converter
  takes ``str`` and ``bytes`` only).
* ``bytes`` (``func.Out[bytes]``): the host's ``IAsyncCollector<string>`` writes
  ``value.ToString()``, the text ``System.Byte[]``; funcstack fails the invocation instead,
  saying so (docs/azure-differences.md).
* The messages of one invocation are sent together after the function succeeded; a failed send
  (an entity that does not exist, a session-enabled entity without a session id) fails the
  invocation.
* ``accessRights`` (extension 2.x-4.x) is accepted and has no effect, as in extension 5.x.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

from funcstack.functions_host._bindings.base import BindingError, BindingRefusedError, ClientBinding
from funcstack.functions_host._bindings.expressions import ExpressionError, Template
from funcstack.functions_host._bindings.values import BindingValueError, collector_string

if TYPE_CHECKING:
    from azure.servicebus.aio import ServiceBusSender

    from funcstack.functions_host._bindings.base import BindingDecl, BindingEnv
    from funcstack.functions_host._bindings.expressions import BindingData
    from funcstack.functions_host._bindings.values import HostValue

logger = logging.getLogger("funcstack.functions_host.bindings")

__all__ = ["ServiceBusOutput"]

DEFAULT_CONNECTION = "AzureWebJobsServiceBus"
TEXT_PLAIN = "text/plain"


class ServiceBusOutput(ClientBinding):
    """``[ServiceBus(queueOrTopicName)]`` as ``IAsyncCollector<string>``."""

    kind = "servicebus"
    default_connection = DEFAULT_CONNECTION

    def __init__(self, decl: BindingDecl, env: BindingEnv) -> None:
        super().__init__(decl, env)
        queue, topic = decl.text("queueName"), decl.text("topicName")
        if bool(queue) == bool(topic):
            raise BindingRefusedError(
                "a Service Bus output needs either 'queueName' or 'topicName'"
            )
        self._is_topic = bool(topic)
        self._entity: Template = decl.template("topicName" if topic else "queueName")
        self._senders: dict[str, tuple[ServiceBusSender, asyncio.Lock]] = {}

    def _sender(self, entity: str) -> tuple[ServiceBusSender, asyncio.Lock]:
        found = self._senders.get(entity)
        if found is None:
            client = self._env.clients.servicebus(self._connection)
            sender = (
                client.get_topic_sender(entity)
                if self._is_topic
                else client.get_queue_sender(entity)
            )
            found = self._senders[entity] = (sender, asyncio.Lock())
        return found

    async def write(self, value: HostValue, data: BindingData) -> None:
        if isinstance(value, bytes):
            raise BindingError(
                f"output '{self.name}' (serviceBus): a bytes value is written by the Azure host "
                "as the text 'System.Byte[]' (its script type is IAsyncCollector<string>); "
                "set a str"
            )
        try:
            entity = self._entity.bind(data)
            bodies = collector_string(value)
        except (ExpressionError, BindingValueError) as exc:
            raise BindingError(f"output '{self.name}' (serviceBus): {exc}") from None
        messages = [ServiceBusMessage(body, content_type=TEXT_PLAIN) for body in bodies]
        if not messages:
            return
        sender, lock = self._sender(entity)
        try:
            async with lock:
                await _send_all(sender, messages)
        except ServiceBusError as exc:
            self._senders.pop(entity, None)
            raise BindingError(
                f"output '{self.name}' (serviceBus {entity}): {type(exc).__name__}: {exc}"
            ) from None


async def _send_all(sender: Any, messages: list[ServiceBusMessage]) -> None:
    """Send in as few batches as the entity's size limit allows."""
    batch = await sender.create_message_batch()
    for message in messages:
        try:
            batch.add_message(message)
        except ValueError:  # MessageSizeExceededError: this batch is full
            await sender.send_messages(batch)
            batch = await sender.create_message_batch()
            batch.add_message(message)
    await sender.send_messages(batch)
