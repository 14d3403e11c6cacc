"""The relay's publisher: the azure-servicebus SDK, one client and one sender per process,
created lazily. Connection string or managed identity. Each message carries the outbox's
properties and the CloudEvents attributes (`infra.servicebus.cloudevents`)."""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from application.outbox.ports import MessageBatch, MessagePublisher
from application.outbox.records import OutboxMessage
from infra.servicebus.cloudevents import cloudevent_properties
from infra.settings import Settings, SettingsError

logger = logging.getLogger(__name__)


def servicebus_client(settings: Settings) -> ServiceBusClient:
    if settings.servicebus_connection is not None:
        return ServiceBusClient.from_connection_string(
            settings.servicebus_connection.get_secret_value()
        )
    if settings.servicebus_namespace:
        from azure.identity import DefaultAzureCredential

        return ServiceBusClient(settings.servicebus_namespace, credential=DefaultAzureCredential())
    raise SettingsError(
        "invalid settings: set ServiceBusConnection (connection string) or "
        "ServiceBusConnection__fullyQualifiedNamespace (managed identity) to relay events"
    )


def application_properties(message: OutboxMessage, *, base: str = "") -> dict[str, Any]:
    """The outbox's application properties, then the CloudEvents attributes (this order is on
    the wire)."""
    return cloudevent_properties(message, base=base, into=dict(message.application_properties))


def to_servicebus_message(message: OutboxMessage, *, base: str = "") -> ServiceBusMessage:
    """The Service Bus message: the outbox's fields and properties, plus the CloudEvents
    attributes (the source: `base` + the message's source path)."""
    # The SDK's stubs type these keys `str | bytes` here and `str` on the AMQP message.
    properties = cast("dict[str | bytes, Any]", application_properties(message, base=base))
    return ServiceBusMessage(
        message.body,
        content_type=message.content_type,
        subject=message.subject,
        message_id=message.message_id,
        session_id=message.session_id,
        application_properties=properties,
    )


def to_amqp_message(message: OutboxMessage, *, base: str = "") -> AmqpAnnotatedMessage:
    """The same message as `to_servicebus_message`, as the SDK's public AMQP message: what the
    relay adds to a batch. The SDK encodes the two alike (tests/unit/test_wire_bytes.py pins the
    bytes), but a `ServiceBusMessage` fills its AMQP properties one setter at a time, each
    re-reading them, which cost the relay more than the rest of its mapping."""
    return AmqpAnnotatedMessage(
        data_body=message.body,
        # A mapping, as the constructor takes it (an AmqpMessageProperties would be copied).
        properties={
            "message_id": message.message_id,
            "subject": message.subject,
            "content_type": message.content_type,
            "group_id": message.session_id,
        },
        application_properties=application_properties(message, base=base),
    )


class ServiceBusBatch(MessageBatch):
    def __init__(self, batch: ServiceBusMessageBatch, *, base: str = "") -> None:
        self.batch = batch
        self._base = base
        self._count = 0

    def try_add(self, message: OutboxMessage) -> bool:
        try:
            self.batch.add_message(to_amqp_message(message, base=self._base))
        except MessageSizeExceededError:
            return False
        self._count += 1
        return True

    def __len__(self) -> int:
        return self._count


class ServiceBusPublisher(MessagePublisher):
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._client: ServiceBusClient | None = None
        self._sender: Any = None

    def _get_sender(self) -> Any:
        with self._lock:
            if self._sender is None:
                if self._client is None:
                    self._client = servicebus_client(self._settings)
                self._sender = self._client.get_topic_sender(self._settings.servicebus_topic)
            return self._sender

    def create_batch(self) -> MessageBatch:
        try:
            return ServiceBusBatch(
                self._get_sender().create_message_batch(),
                base=self._settings.cloudevents_source_base,
            )
        except Exception:
            self._reset()
            raise

    def send(self, batch: MessageBatch) -> None:
        assert isinstance(batch, ServiceBusBatch)
        try:
            self._get_sender().send_messages(batch.batch)
        except Exception:
            # A broken link is not reused: the retried invocation opens a fresh one.
            self._reset()
            raise

    def refresh(self) -> None:
        """The next batch comes from a new link, which announces the entity's current limit."""
        self._reset()

    def _reset(self) -> None:
        with self._lock:
            sender, self._sender = self._sender, None
        if sender is not None:
            try:
                sender.close()
            except Exception:  # closing a broken sender may fail too
                logger.debug("closing a failed sender raised", exc_info=True)

    def close(self) -> None:
        self._reset()
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
