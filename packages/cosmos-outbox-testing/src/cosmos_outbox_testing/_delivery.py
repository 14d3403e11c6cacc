"""A relayed message as a subscriber receives it: one of the messages the relay sent
(`FakePublisher.messages`, or any `OutboxMessage`) as the `func.ServiceBusMessage` a Service Bus
trigger hands a function, so a `Dispatcher` reads it as it reads the real one."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import azure.functions as func

from cosmos_outbox.bridge import run_sync
from cosmos_outbox.ports import OutboxMessage
from cosmos_outbox_testing._triggers import service_bus_message

__all__ = ["delivered", "dispatch_all", "on_the_wire"]


def delivered(
    message: OutboxMessage,
    *,
    delivery_count: int = 1,
    sequence_number: int = 1,
    cloudevents_source_base: str = "",
) -> func.ServiceBusMessage:
    """`message` as a session subscription's trigger receives it (its SessionId the aggregate
    id); `cloudevents_source_base` as the app's CLOUDEVENTS_SOURCE_BASE."""
    return service_bus_message(
        message.body,
        **on_the_wire(message, base=cloudevents_source_base),
        delivery_count=delivery_count,
        sequence_number=sequence_number,
    )


def on_the_wire(message: OutboxMessage, *, base: str = "") -> dict[str, Any]:
    """What of a relayed message the relay puts on the wire beside its body: its ids, subject,
    content type and application properties (the outbox's and the CloudEvents attributes, the
    source's base `base`), as keyword arguments."""
    from cosmos_outbox.servicebus import application_properties

    return {
        "message_id": message.message_id,
        "session_id": message.session_id,
        "subject": message.subject,
        "content_type": message.content_type,
        "application_properties": application_properties(message, base=base),
    }


def dispatch_all(dispatcher: Any, messages: Iterable[OutboxMessage]) -> list[Any]:
    """Each message `delivered` to `dispatcher` (a `Dispatcher`, sync or `aio`: an `aio` one
    run to its end here, over sync or in-memory stores), in order; the results."""
    results = []
    for number, message in enumerate(messages, 1):
        result = dispatcher.handle(delivered(message, sequence_number=number))
        results.append(run_sync(result) if inspect.iscoroutine(result) else result)
    return results
