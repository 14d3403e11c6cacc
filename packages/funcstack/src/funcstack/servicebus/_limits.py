"""Service Bus's quotas, by tier, and the endpoint's refusal of a message that breaks one.

The figures are the Service Bus quotas page's (learn.microsoft.com/azure/service-bus-messaging/
service-bus-quotas: "Common limits for all tiers" and "Basic, Standard and Premium tiers"); a
library that refuses such messages before it sends them can hold its figures to these:

- message size, and a batch's: 256 KB on Standard; on Premium a single message up to the entity's
  ``MaxMessageSizeInKilobytes`` (1 MB by default, up to 100 MB over AMQP) and a batch 1 MB;
- each application property's value at most 32 KB, and the header (system and application
  properties together) at most 64 KB;
- MessageId, SessionId, ReplyToSessionId and PartitionKey at most 128 characters (.NET's UTF-16
  units, as the service counts them);
- a queue's or topic's path at most 260 characters, a subscription's or rule's name at most 50.

What the service answers, as the SDK surfaces it: a message or batch over its size, and a header
over 64 KB, are rejected with ``amqp:link:message-size-exceeded`` (``MessageSizeExceededError``;
the header's description as the service words it: "the size quota for this stream (65536) has
been exceeded"); a property over 32 KB with an internal error that the SDKs cannot map
(azure-sdk-for-net #15325: "The service was unable to process the request; please retry the
operation"; the Python SDK raises ``ServiceBusError``, retryable, so a sender retries it in
vain); an id over 128 characters, which the SDKs refuse before sending (``ServiceBusMessage``
raises ``ValueError``) and only a raw ``AmqpAnnotatedMessage`` can carry, with
``com.microsoft:argument-out-of-range`` (``ServiceBusError``, not retried). Each description
names the message, the value and the limit.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

QUOTAS_PAGE = "https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas"

KB = 1024
MAX_ID_LENGTH = 128
MAX_PROPERTY_VALUE_BYTES = 32 * KB
MAX_HEADER_BYTES = 64 * KB
MAX_ENTITY_PATH_LENGTH = 260
MAX_ENTITY_NAME_LENGTH = 50

COND_SIZE = "amqp:link:message-size-exceeded"
COND_INTERNAL = "amqp:internal-error"
COND_OUT_OF_RANGE = "com.microsoft:argument-out-of-range"


@dataclass(frozen=True)
class Tier:
    """A namespace's pricing tier, as far as the endpoint's limits go."""

    name: str
    #: The largest message an entity takes unless it says otherwise (MaxMessageSizeInKilobytes).
    max_message_bytes: int
    #: The largest batch (one transfer of the SDK's batch format).
    max_batch_bytes: int
    #: The range of an entity's MaxMessageSizeInKilobytes (None: the tier has no such setting).
    entity_message_kilobytes: tuple[int, int] | None


STANDARD = Tier("Standard", 256 * KB, 256 * KB, None)
PREMIUM = Tier("Premium", 1024 * KB, 1024 * KB, (1024, 100 * 1024))
TIERS = {tier.name.lower(): tier for tier in (STANDARD, PREMIUM)}


def tier_named(name: str) -> Tier:
    """The tier a namespace declares (``Sku``), case-insensitive; ValueError naming the choices."""
    tier = TIERS.get(name.strip().lower())
    if tier is None:
        if name.strip().lower() == "basic":
            raise ValueError(
                "Sku 'Basic' is not modelled by funcstack (a Basic namespace has no topics, "
                "sessions or duplicate detection): declare 'Standard' or 'Premium'"
            )
        raise ValueError(f"Sku {name!r} is not a Service Bus tier: 'Standard' or 'Premium'")
    return tier


def utf16_length(value: str) -> int:
    """A string's length as .NET counts it (UTF-16 units: a character outside the BMP is 2)."""
    return len(value) if value.isascii() else len(value.encode("utf-16-le")) // 2


class RefusedError(Exception):
    """Why a sent message is refused: the AMQP error condition and its description."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


def _value_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, bytes | bytearray | memoryview):
        return len(bytes(value))
    return 8  # numbers, booleans, timestamps, uuids: at most 16 bytes, far from the limit


def _name(key: Any) -> str:
    return bytes(key).decode("utf-8", "replace") if isinstance(key, bytes) else str(key)


def check_ids(ids: Mapping[str, Any], *, label: str) -> None:
    """Refuse an id (MessageId, SessionId, ReplyToSessionId, PartitionKey) over 128 characters."""
    for what, value in ids.items():
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str) and utf16_length(value) > MAX_ID_LENGTH:
            raise RefusedError(
                COND_OUT_OF_RANGE,
                f"The value supplied for {what} of {label} is {utf16_length(value)} characters "
                f"long; the maximum allowed is {MAX_ID_LENGTH} ({QUOTAS_PAGE}).",
            )


def check_properties(properties: Mapping[Any, Any] | None, *, label: str) -> None:
    """Refuse an application property whose value is over 32 KB."""
    for key, value in (properties or {}).items():
        size = _value_bytes(value)
        if size > MAX_PROPERTY_VALUE_BYTES:
            raise RefusedError(
                COND_INTERNAL,
                f"The service was unable to process the request; please retry the operation. "
                f"(funcstack: application property {_name(key)!r} of {label} is {size} bytes; "
                f"Service Bus takes at most {MAX_PROPERTY_VALUE_BYTES} bytes for a property, "
                f"{QUOTAS_PAGE})",
            )


def check_header(header_bytes: int, *, label: str) -> None:
    """Refuse a header (system and application properties) over 64 KB."""
    if header_bytes > MAX_HEADER_BYTES:
        raise RefusedError(
            COND_SIZE,
            f"A serialization error occurred while processing the message header stream of "
            f"{label}: it is {header_bytes} bytes, and the size quota for this stream "
            f"({MAX_HEADER_BYTES}) has been exceeded ({QUOTAS_PAGE}).",
        )


def check_size(size: int, limit: int, *, what: str) -> None:
    """Refuse a message or a batch over the entity's limit."""
    if size > limit:
        raise RefusedError(
            COND_SIZE,
            f"The received {what} (size {size} bytes) exceeds the limit ({limit} bytes) "
            f"currently allowed on the link.",
        )


def check_entity_name(name: str, *, kind: str, where: str) -> None:
    """A queue's or topic's path (260 characters), a subscription's or rule's name (50): a
    ValueError naming ``where`` and the limit, as Azure refuses to create such an entity."""
    limit = MAX_ENTITY_PATH_LENGTH if kind in ("queue", "topic") else MAX_ENTITY_NAME_LENGTH
    if not name:
        raise ValueError(f"{where}: a {kind} needs a name")
    if len(name) > limit:
        raise ValueError(
            f"{where}: the {kind} name {name[:40]!r}... is {len(name)} characters; "
            f"Service Bus takes at most {limit} for a {kind} ({QUOTAS_PAGE})"
        )
