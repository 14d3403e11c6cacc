"""The Service Bus side: the relay's publisher (azure-servicebus) and the CloudEvents attributes
every message carries (`cosmos_outbox.servicebus._cloudevents`). Imported where the relay runs,
never at indexing."""

from __future__ import annotations

from cosmos_outbox.servicebus._publisher import (
    ServiceBusBatch,
    ServiceBusPublisher,
    application_properties,
    servicebus_client,
    to_amqp_message,
    to_servicebus_message,
)

__all__ = [
    "ServiceBusBatch",
    "ServiceBusPublisher",
    "application_properties",
    "servicebus_client",
    "to_amqp_message",
    "to_servicebus_message",
]
