"""The subscriber settles its own messages when it is given the means: a message whose handling
failed on its last delivery (its delivery count reached the subscription's MaxDeliveryCount), or
that is poison it recognises (`UnreadableEventError`: not an outbox event at all, no delivery
will read it), is dead-lettered by the subscriber itself, its exception's type as the
dead-letter reason and its message as the description. So the
operators' failure groups are by cause: left to the broker, every such message is
"MaxDeliveryCountExceeded", and the exception lives only in the subscriber's log.

`settle` is what settles the message it was received with, either of:

* a Functions app's message actions (azurefunctions-extensions-bindings-servicebus's
  `ServiceBusMessageActions`, the trigger's message a `ServiceBusReceivedMessage`, declared with
  `auto_complete_messages=False`): `complete`, `abandon`, `deadletter(message,
  deadletter_reason=..., deadletter_error_description=...)`;
* an azure-servicebus receiver (a subscriber of its own, sync or `aio`): `complete_message`,
  `abandon_message`, `dead_letter_message(message, reason=..., error_description=...)`.

Given one, the dispatcher settles every message: completed when handled, abandoned (and the
error raised) when a later delivery may still succeed, dead-lettered when none will. Without
one, nothing changes: the function's error abandons the message, and the broker dead-letters it
after MaxDeliveryCount deliveries (reason `MaxDeliveryCountExceeded`)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_MAX_DELIVERY_COUNT",
    "DESCRIPTION_CHARACTERS",
    "Incoming",
    "dead_letter_words",
    "incoming",
    "settle",
]

#: Service Bus's MaxDeliveryCount when a subscription names none.
DEFAULT_MAX_DELIVERY_COUNT = 10
#: A dead-letter description is cut at this many characters (the broker keeps 4 KB).
DESCRIPTION_CHARACTERS = 1024


@dataclass(frozen=True)
class Incoming:
    """What the dispatcher reads of a message, whichever type it came as: its body, content
    type, application properties (text keys and values), id, and which delivery this is (1 on
    the first, as the Functions host counts)."""

    body: bytes
    content_type: str | None
    application_properties: dict[str, Any]
    message_id: str | None
    delivery_count: int | None


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def incoming(message: Any) -> Incoming:
    """`message` read: a Functions trigger's `func.ServiceBusMessage` (`get_body()`; its
    DeliveryCount is the host's, 1 on the first delivery), or an azure-servicebus
    `ServiceBusReceivedMessage` (`body`; its `delivery_count` is the AMQP header's, the
    deliveries before this one: one is added)."""
    properties = {
        str(_text(k)): _text(v) for k, v in (message.application_properties or {}).items()
    }
    if hasattr(message, "get_body"):
        return Incoming(
            message.get_body(),
            message.content_type,
            properties,
            message.message_id,
            message.delivery_count,
        )
    body = message.body
    if not isinstance(body, bytes | bytearray):
        body = b"".join(bytes(part) for part in body)
    count = message.delivery_count
    return Incoming(
        bytes(body),
        _text(message.content_type),
        properties,
        _text(message.message_id),
        count + 1 if count is not None else None,
    )


def dead_letter_words(exc: BaseException) -> tuple[str, str]:
    """The dead-letter reason and description of a failure: the exception's type, and its
    message (its type again when it has none), cut at DESCRIPTION_CHARACTERS."""
    reason = type(exc).__name__
    return reason, (str(exc) or reason)[:DESCRIPTION_CHARACTERS]


async def settle(
    means: Any, how: str, message: Any, *, reason: str = "", description: str = ""
) -> None:
    """Settle `message` with `means` (see the module): `how` is complete, abandon or
    dead-letter."""
    actions = hasattr(means, "deadletter")  # a Functions app's message actions
    if how == "complete":
        done = means.complete(message) if actions else means.complete_message(message)
    elif how == "abandon":
        done = means.abandon(message) if actions else means.abandon_message(message)
    elif actions:
        done = means.deadletter(
            message, deadletter_reason=reason, deadletter_error_description=description
        )
    else:
        done = means.dead_letter_message(message, reason=reason, error_description=description)
    if inspect.isawaitable(done):
        await done
