"""Service Bus: the relay's publisher on azure-servicebus (`ServiceBusPublisher`; on its `aio`
client: `cosmos_outbox.servicebus.aio`); each message carries the outbox's properties and the
CloudEvents 1.0 attributes (AMQP binding, binary mode); the dead-letter queues of its
subscriptions (`ServiceBusDeadLetters`: peeked, and their messages sent again or given up); the
schedule queue, where the relay schedules scheduled events' releases (`ServiceBusScheduleQueue`);
the targeted-delivery rule check on the management API (`ServiceBusTargetRules`).
Imported where the relay runs, never at indexing."""

from __future__ import annotations

from cosmos_outbox._mapper.cloudevents import application_properties
from cosmos_outbox.servicebus._dead_letters import ServiceBusDeadLetters
from cosmos_outbox.servicebus._messages import (
    ServiceBusBatch,
    to_amqp_message,
    to_servicebus_message,
)
from cosmos_outbox.servicebus._publisher import (
    DEFAULT_MAX_MESSAGE_BYTES,
    ServiceBusPublisher,
)
from cosmos_outbox.servicebus._schedule import ServiceBusScheduleQueue
from cosmos_outbox.servicebus._target_rules import ServiceBusTargetRules

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ServiceBusBatch",
    "ServiceBusDeadLetters",
    "ServiceBusPublisher",
    "ServiceBusScheduleQueue",
    "ServiceBusTargetRules",
    "application_properties",
    "to_amqp_message",
    "to_servicebus_message",
]
