"""Outbox messages as Service Bus messages: the outbox's properties and the CloudEvents
attributes (`cosmos_outbox._mapper.cloudevents`), and a batch of them. Pure: no I/O, the
same for the sync and the `aio` publisher."""

from __future__ import annotations

from typing import Any, cast

from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from cosmos_outbox._mapper.cloudevents import application_properties, outgoing
from cosmos_outbox._mapper.message import headers_of
from cosmos_outbox._records import OutboxMessage
from cosmos_outbox.ports import MessageBatch, Outgoing


def to_servicebus_message(message: OutboxMessage, *, base: str = "") -> ServiceBusMessage:
    """The Service Bus message: the outbox's fields and properties, plus the CloudEvents
    attributes (the source: `base` + the message's source path)."""
    return message_of(outgoing(message, base=base))


def message_of(sent: Outgoing) -> ServiceBusMessage:
    """An `Outgoing` as the SDK's message: its fields as they are, nothing added."""
    # The SDK's stubs type these keys `str | bytes` here and `str` on the AMQP message.
    properties = cast("dict[str | bytes, Any]", dict(sent.application_properties))
    return ServiceBusMessage(sent.body, **headers_of(sent), application_properties=properties)


def to_amqp_message(message: OutboxMessage, *, base: str = "") -> AmqpAnnotatedMessage:
    """The same message as `to_servicebus_message`, as the SDK's public AMQP message: what the
    relay adds to a batch. The SDK encodes the two alike (the package's
    tests/relay/test_wire_bytes.py pins the bytes), but a `ServiceBusMessage` fills its
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
