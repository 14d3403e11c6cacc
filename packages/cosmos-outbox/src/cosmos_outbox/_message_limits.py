"""Service Bus's limits on one message that no retry can change (the Service Bus quotas page;
the same on the Standard and Premium tiers), held in one place: a transaction refuses at
`publish` an event that could never be sent, and the relay sets aside (quarantines, with the
reason) a stored event that breaks one, instead of failing its batch on every retry.

- MessageId, SessionId (and PartitionKey, ReplyToSessionId): at most 128 characters.
- An application property's value: at most 32 KB; the header (system and application
  properties together): at most 64 KB.

The message's whole size (256 KB on Standard, up to 100 MB on Premium) depends on the entity
and is the publisher's to tell: an event too large for it goes by claim check.

Pure: no I/O, no SDK import (a transaction imports it on the hot path).
"""

from __future__ import annotations

from collections.abc import Mapping

from cosmos_outbox._records import OutboxMessage

MAX_ID_LENGTH = 128
MAX_PROPERTY_VALUE_BYTES = 32 * 1024
MAX_HEADER_BYTES = 64 * 1024
#: What the outbox's own properties and the CloudEvents attributes of a message take of the
#: header at most, besides an app's own properties and the ids (names, the time, the trace
#: context, the source): kept free when an app's properties are checked at publish.
OUTBOX_HEADER_BYTES = 2 * 1024
#: An AMQP string or integer's encoding around its bytes, at most (a str32's code and length).
_ITEM_OVERHEAD = 5


def property_bytes(properties: Mapping[str, str | int]) -> int:
    """At most how many bytes `properties` take in a message's header (AMQP map entries)."""
    return sum(
        len(name.encode()) + len(str(value).encode()) + 2 * _ITEM_OVERHEAD
        for name, value in properties.items()
    )


def refused_properties(properties: Mapping[str, str | int]) -> str | None:
    """Why an app's own application properties can never be sent, or None."""
    for name, value in properties.items():
        size = len(value.encode()) if isinstance(value, str) else 8
        if size > MAX_PROPERTY_VALUE_BYTES:
            return (
                f"application property {name!r} is {size} bytes; Service Bus takes at most "
                f"{MAX_PROPERTY_VALUE_BYTES} for a property's value"
            )
    total = property_bytes(properties)
    if total > MAX_HEADER_BYTES - OUTBOX_HEADER_BYTES:
        return (
            f"the application properties are {total} bytes; Service Bus takes at most "
            f"{MAX_HEADER_BYTES} for a message's header, of which the outbox's own "
            f"properties take up to {OUTBOX_HEADER_BYTES}"
        )
    return None


def utf16_length(value: str) -> int:
    """The length .NET gives `value`: UTF-16 units (a character outside the BMP is two)."""
    return len(value) if value.isascii() else len(value.encode("utf-16-le")) // 2


def refused_id(what: str, value: str) -> str | None:
    """Why `value` can never be a message's `what` (MessageId, SessionId), or None."""
    length = utf16_length(value)
    if length > MAX_ID_LENGTH:
        return (
            f"{what} {value[:40]!r}... is {length} characters (UTF-16 units); Service Bus "
            f"takes at most {MAX_ID_LENGTH}"
        )
    return None


def unsendable(message: OutboxMessage) -> str | None:
    """Why a message can never be sent, whatever the retries, or None."""
    reason = refused_id("MessageId", message.message_id) or refused_id(
        "SessionId", message.session_id
    )
    if reason is not None:
        return reason
    for name, value in message.application_properties.items():
        size = len(value.encode()) if isinstance(value, str) else 8
        if size > MAX_PROPERTY_VALUE_BYTES:
            return (
                f"application property {name!r} is {size} bytes; Service Bus takes at most "
                f"{MAX_PROPERTY_VALUE_BYTES} for a property's value"
            )
    header = (
        property_bytes(message.application_properties)
        + len(message.message_id)
        + len(message.session_id)
        + len(message.subject.encode())
        + OUTBOX_HEADER_BYTES
    )
    if header > MAX_HEADER_BYTES:
        return (
            f"the message's header is about {header} bytes; Service Bus takes at most "
            f"{MAX_HEADER_BYTES} (its application properties are too large)"
        )
    return None
