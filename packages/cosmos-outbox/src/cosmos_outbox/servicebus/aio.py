"""Service Bus, async: the same names as `cosmos_outbox.servicebus`, on the SDK's `aio` client
(as `azure.servicebus.aio` mirrors `azure.servicebus`): the relay's publisher
(`ServiceBusPublisher`: one sender, reused), the dead-letter queues (`ServiceBusDeadLetters`) and
the schedule queue (`ServiceBusScheduleQueue`)."""

from __future__ import annotations

from cosmos_outbox.servicebus._dead_letters import (
    AsyncServiceBusDeadLetters as ServiceBusDeadLetters,
)
from cosmos_outbox.servicebus._publisher import AsyncServiceBusPublisher as ServiceBusPublisher
from cosmos_outbox.servicebus._schedule import (
    AsyncServiceBusScheduleQueue as ServiceBusScheduleQueue,
)

__all__ = ["ServiceBusDeadLetters", "ServiceBusPublisher", "ServiceBusScheduleQueue"]
