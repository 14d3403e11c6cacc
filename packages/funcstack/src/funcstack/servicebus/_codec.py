"""The AMQP message codec of the local Service Bus endpoint: a sent message (one transfer's
payload, or each message of an SDK batch) taken apart into the sections the broker keeps, and a
stored message encoded as the service delivers it to a receiver (its header and message
annotations the broker's: sequence number, enqueued time, lock token, locked-until, state).

Follows the AMQP 1.0 message format (part 3.2) and the annotations Service Bus adds ("AMQP 1.0 in
Azure Service Bus: request-response and message annotations", learn.microsoft.com); the encoding
is ``_amqp``'s (Apache Qpid Proton's codec). A section the broker does not change is kept and
delivered as its sender encoded it; the values it reads keep their AMQP types. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from funcstack.servicebus._amqp import (
    described,
    int32,
    sections,
    symbol,
    text,
    timestamp,
    uint,
)
from funcstack.servicebus._amqp import encode as encode_value
from funcstack.servicebus._broker import SCHEDULED_ENQUEUE_TIME, StoredMessage, now_ms
from funcstack.servicebus._limits import check_header, check_ids, check_properties

__all__ = ["BATCH_FORMAT", "batch_messages", "encode_stored", "pad", "parse_message", "text"]

BATCH_FORMAT = 0x80013700
MESSAGE_STATE = symbol("x-opt-message-state")
PARTITION_KEY = "x-opt-partition-key"
VIA_PARTITION_KEY = "x-opt-via-partition-key"
LOCK_TOKEN = symbol("x-opt-lock-token")


def pad(values: list[Any] | None, n: int) -> list[Any]:
    out = list(values or [])
    return out + [None] * (n - len(out))


def batch_messages(payload: bytes) -> list[bytes]:
    """The messages of an SDK batch (message format ``BATCH_FORMAT``): each data section of the
    batch's envelope holds one encoded message."""
    return [bytes(value) for code, _, value in sections(payload, bodies=True) if code == 0x75]


def parse_message(payload: bytes, *, label: str | None = None) -> StoredMessage:
    """A sent message as stored by the broker (sequence number assigned per receiver entity).

    With ``label`` (how a refusal names it), a message a sender sent: refused
    (``RefusedError``) when it breaks a quota of Service Bus's on one message (``_limits``: an
    id over 128 characters, a property over 32 KB, a header over 64 KB)."""
    props_raw = b""
    annotations_raw = b""
    props: list[Any] = []
    app: dict[Any, Any] | None = None
    app_raw = b""
    body = bytearray()
    annotations: dict[Any, Any] = {}
    delivery_annotations: dict[Any, Any] | None = None
    header: list[Any] = []
    for code, raw, value in sections(payload):
        if code == 0x70:
            header = pad(value, 5)
        elif code == 0x72:
            annotations_raw, annotations = raw, dict(value or {})
        elif code == 0x73:
            props_raw, props = raw, pad(value, 13)
        elif code == 0x74:
            app_raw, app = raw, dict(value or {})
        elif code == 0x71:
            delivery_annotations = dict(value or {})
        else:
            body += raw
    if label is not None:
        props = props or pad(None, 13)
        check_ids(
            {
                "MessageId": props[0],
                "SessionId": props[10],
                "ReplyToSessionId": props[12],
                "PartitionKey": annotations.get(PARTITION_KEY),
                "ViaPartitionKey": annotations.get(VIA_PARTITION_KEY),
            },
            label=label,
        )
        check_properties(app, label=label)
        check_header(len(props_raw) + len(app_raw) + len(annotations_raw), label=label)
    return StoredMessage(
        seq=0,
        message_id=text(props[0]) if props else None,
        session_id=text(props[10]) if props else None,
        properties_raw=props_raw,
        app_properties=app,
        app_properties_raw=app_raw,
        body_raw=bytes(body),
        annotations=annotations,
        header=pad(header, 5),
        enqueued_ms=now_ms(),
        delivery_annotations=delivery_annotations,
    )


def encode_stored(m: StoredMessage, *, locked: bool) -> bytes:
    """The message as delivered to a receiver: header and annotations are the broker's."""
    out = bytearray()
    durable, priority, ttl = m.header[0], m.header[1], m.header[2]
    out += encode_value(described(0x70, [durable, priority, ttl, None, uint(m.delivery_count)]))
    delivery: dict[Any, Any] = dict(getattr(m, "delivery_annotations", None) or {})
    if locked and m.lock_token is not None:
        # the service gives the lock token in the delivery annotations too
        delivery[LOCK_TOKEN] = m.lock_token
    if delivery:
        out += encode_value(described(0x71, delivery))
    ann: dict[Any, Any] = {
        symbol(text(k)): v
        for k, v in m.annotations.items()
        if not str(text(k)).startswith("x-opt-lock")
    }
    ann[symbol("x-opt-sequence-number")] = m.seq  # a long
    scheduled = m.annotations.get(SCHEDULED_ENQUEUE_TIME)
    if isinstance(scheduled, int):
        ann[symbol(SCHEDULED_ENQUEUE_TIME)] = timestamp(scheduled)
    # 0 active, 1 deferred, 2 scheduled (ServiceBusMessageState)
    ann[MESSAGE_STATE] = int32(2 if m.scheduled_ms else 1 if m.deferred else 0)
    ann[symbol("x-opt-enqueued-time")] = timestamp(m.enqueued_ms)
    if locked and m.locked_until_ms:
        ann[symbol("x-opt-locked-until")] = timestamp(m.locked_until_ms)
    if m.lock_token is not None:
        ann[LOCK_TOKEN] = m.lock_token
    out += encode_value(described(0x72, ann))
    out += m.properties_raw
    if m.app_properties_raw:
        out += m.app_properties_raw
    elif m.app_properties:
        out += encode_value(described(0x74, {text(k): v for k, v in m.app_properties.items()}))
    out += m.body_raw
    return bytes(out)
