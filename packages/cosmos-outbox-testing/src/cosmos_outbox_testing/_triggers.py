"""Trigger inputs, as the worker hands them to a function, for an app's tests of its own
Service Bus-, queue- and timer-triggered functions (call the function with them, or through
`FunctionClient.invoke`). Built from the azure-functions library's public modules
(`azure.functions.servicebus`, `.queue`, `.timer`), the classes the worker itself makes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import azure.functions as func
from azure.functions import queue, servicebus, timer

__all__ = ["queue_message", "service_bus_message", "timer_request"]


def _bytes(body: bytes | str | Mapping[str, Any] | list[Any]) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body, separators=(",", ":")).encode()


def service_bus_message(
    body: bytes | str | Mapping[str, Any] | list[Any],
    *,
    message_id: str | None = None,
    session_id: str | None = None,
    subject: str | None = None,
    content_type: str | None = "application/json",
    application_properties: Mapping[str, Any] | None = None,
    delivery_count: int = 1,
    sequence_number: int = 1,
    correlation_id: str | None = None,
) -> func.ServiceBusMessage:
    """A received Service Bus message (a dict or list body is sent as JSON). A session-enabled
    queue or subscription gives each message its `session_id`."""
    properties = dict(application_properties or {})
    now = datetime.now(UTC)
    message_id = message_id or uuid.uuid4().hex
    return servicebus.ServiceBusMessage(
        body=_bytes(body),
        message_id=message_id,
        session_id=session_id,
        subject=subject,
        label=subject,
        content_type=content_type,
        correlation_id=correlation_id,
        application_properties=properties,
        user_properties=properties,
        delivery_count=delivery_count,
        sequence_number=sequence_number,
        enqueued_time_utc=now,
        locked_until=now,
        lock_token=str(uuid.uuid4()),
        trigger_metadata={
            "MessageId": message_id,
            "SessionId": session_id,
            "DeliveryCount": delivery_count,
            "ApplicationProperties": properties,
            "UserProperties": properties,
        },
    )


def queue_message(
    body: bytes | str | Mapping[str, Any] | list[Any],
    *,
    id: str | None = None,
    dequeue_count: int = 1,
) -> func.QueueMessage:
    """A Storage queue message (a dict or list body is sent as JSON)."""
    now = datetime.now(UTC)
    return queue.QueueMessage(  # type: ignore[no-untyped-call]  # untyped in azure-functions
        id=id or uuid.uuid4().hex,
        body=_bytes(body),
        dequeue_count=dequeue_count,
        insertion_time=now,
        expiration_time=now,
        time_next_visible=now,
        pop_receipt=uuid.uuid4().hex,
    )


def timer_request(*, past_due: bool = False) -> func.TimerRequest:
    """A timer tick."""
    return timer.TimerRequest(past_due=past_due)
