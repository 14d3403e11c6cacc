"""Each Service Bus adapter is made from a connection string or from its namespace (with
`DefaultAzureCredential`) the one way (`cosmos_outbox.servicebus._clients`), its entity and
options in place; nothing connects until it is used."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cosmos_outbox.servicebus import (
    ServiceBusDeadLetters,
    ServiceBusPublisher,
    ServiceBusScheduleQueue,
    aio,
)

CONNECTION = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a2V5"
ADAPTERS = [
    ServiceBusPublisher,
    ServiceBusDeadLetters,
    ServiceBusScheduleQueue,
    aio.ServiceBusPublisher,
    aio.ServiceBusDeadLetters,
    aio.ServiceBusScheduleQueue,
]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: f"{a.__module__}.{a.__name__}")
@pytest.mark.parametrize("made", ["from_connection_string", "from_namespace"])
def test_an_adapter_is_made_for_its_entity_either_way(adapter: Any, made: str) -> None:
    given = CONNECTION if made == "from_connection_string" else "ns.servicebus.windows.net"

    async def make() -> Any:  # an aio client is made inside its event loop
        return getattr(adapter, made)(given, "orders")

    instance = asyncio.run(make())
    assert type(instance) is adapter
    assert "orders" in vars(instance).values()


def test_the_publishers_options_follow_the_entity() -> None:
    publisher = ServiceBusPublisher.from_namespace(
        "ns.servicebus.windows.net", "orders", max_message_bytes=1024
    )
    assert publisher.topic == "orders" and publisher._cap == 1024
