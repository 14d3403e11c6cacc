"""The relay's publisher: the azure-servicebus SDK, one client and one sender per thread,
created lazily. Connection string or managed identity. Each message carries the outbox's
properties and the CloudEvents attributes (`cosmos_outbox.servicebus._cloudevents`)."""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from cosmos_outbox._records import OutboxMessage
from cosmos_outbox.ports import MessageBatch, MessagePublisher
from cosmos_outbox.servicebus._cloudevents import cloudevent_properties
from cosmos_outbox.settings import OutboxSettings, SettingsError

logger = logging.getLogger(__name__)


def servicebus_client(settings: OutboxSettings) -> ServiceBusClient:
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
    relay adds to a batch. The SDK encodes the two alike (the Contacts app's
    tests/contacts/unit/test_wire_bytes.py pins the bytes), but a `ServiceBusMessage` fills its
    AMQP properties one setter at a time, each re-reading them, which cost the relay more than
    the rest of its mapping."""
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

    @property
    def max_size_in_bytes(self) -> int:
        return int(self.batch.max_size_in_bytes)


class _Link:
    """One thread's client and topic sender (the SDK's are not thread-safe), and the size of
    the batches it makes: the smaller of the link's limit and SERVICEBUS_MAX_MESSAGE_BYTES."""

    def __init__(self, client: ServiceBusClient) -> None:
        self.client = client
        self.sender: Any = None
        self.batch_bytes: int | None = None


class ServiceBusPublisher(MessagePublisher):
    """One client and one sender per thread: the worker runs the trigger's invocations (one per
    lease) on threads of its own, concurrently, and the SDK's clients and senders are not
    thread-safe (its README: "not recommended to share across threads"). A sender per thread
    keeps the leases' sends concurrent; a lock around one sender would serialise them."""

    def __init__(self, settings: OutboxSettings) -> None:
        if not settings.servicebus_topic:
            raise SettingsError("invalid settings: set SERVICEBUS_TOPIC (the topic the relay "
                                "sends to) to relay events")
        self.topic = settings.servicebus_topic
        self._settings = settings
        self._lock = threading.Lock()  # guards `_links`, every thread's link (for close())
        self._links: list[_Link] = []
        self._local = threading.local()

    def _link(self) -> _Link:
        link: _Link | None = getattr(self._local, "link", None)
        if link is None:
            link = self._local.link = _Link(servicebus_client(self._settings))
            with self._lock:
                self._links.append(link)
        return link

    def _get_sender(self) -> Any:
        link = self._link()
        if link.sender is None:
            link.sender = link.client.get_topic_sender(self.topic)
        return link.sender

    def create_batch(self) -> MessageBatch:
        """A batch of at most SERVICEBUS_MAX_MESSAGE_BYTES, or of the link's own limit (what
        the entity announced when the link opened) when that is smaller: a message that does
        not fit an empty one is larger than the topic takes (the relay offloads it)."""
        try:
            sender, link = self._get_sender(), self._link()
            if link.batch_bytes is None:
                batch = sender.create_message_batch()  # the link's limit
                cap = self._settings.servicebus_max_message_bytes
                link.batch_bytes = min(batch.max_size_in_bytes, cap)
                if batch.max_size_in_bytes > cap:
                    batch = sender.create_message_batch(cap)
            else:
                batch = sender.create_message_batch(link.batch_bytes)
            return ServiceBusBatch(batch, base=self._settings.cloudevents_source_base)
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

    def refresh(self) -> bool:
        """The next batch comes from a new link, which announces the entity's current limit;
        unless this link already takes SERVICEBUS_MAX_MESSAGE_BYTES (no link can take more
        from the relay): opening a link costs a round trip or more."""
        link: _Link | None = getattr(self._local, "link", None)
        if (link is not None and link.batch_bytes is not None
                and link.batch_bytes >= self._settings.servicebus_max_message_bytes):
            return False
        self._reset()
        return True

    def _reset(self) -> None:
        """This thread's sender is closed; its next batch opens a new one."""
        link: _Link | None = getattr(self._local, "link", None)
        if link is not None:
            _close_sender(link)

    def close(self) -> None:
        with self._lock:
            links, self._links = self._links, []
        self._local = threading.local()
        for link in links:
            _close_sender(link)
            link.client.close()


def _close_sender(link: _Link) -> None:
    sender, link.sender, link.batch_bytes = link.sender, None, None
    if sender is not None:
        try:
            sender.close()
        except Exception:  # closing a broken sender may fail too
            logger.debug("closing a failed sender raised", exc_info=True)
