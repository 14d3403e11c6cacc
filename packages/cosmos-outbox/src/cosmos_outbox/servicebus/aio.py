"""Service Bus, async: the same names as `cosmos_outbox.servicebus`, on the SDK's `aio` client
(as `azure.servicebus.aio` mirrors `azure.servicebus`): the relay's publisher
(`ServiceBusPublisher`: one sender, reused), the dead-letter queues (`ServiceBusDeadLetters`) and
the schedule queue (`ServiceBusScheduleQueue`), the targeted-delivery rule check
(`ServiceBusTargetRules`: the SDK's management client is sync, so it runs in a worker thread)."""

from __future__ import annotations

from cosmos_outbox.servicebus._dead_letters import (
    AsyncServiceBusDeadLetters as ServiceBusDeadLetters,
)
from cosmos_outbox.servicebus._publisher import AsyncServiceBusPublisher as ServiceBusPublisher
from cosmos_outbox.servicebus._schedule import (
    AsyncServiceBusScheduleQueue as ServiceBusScheduleQueue,
)
from cosmos_outbox.servicebus._target_rules import (
    AsyncServiceBusTargetRules as ServiceBusTargetRules,
)

__all__ = [
    "ServiceBusDeadLetters",
    "ServiceBusPublisher",
    "ServiceBusScheduleQueue",
    "ServiceBusTargetRules",
]
