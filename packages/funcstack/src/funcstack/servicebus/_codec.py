"""The AMQP message codec of the local Service Bus endpoint: a sent message (one transfer's
payload, or each message of an SDK batch) taken apart into the sections the broker keeps, and a
stored message encoded as the service delivers it to a receiver (its header and message
annotations the broker's: sequence number, enqueued time, lock token, locked-until, state).

Follows the AMQP 1.0 message format (part 3.2) and the annotations Service Bus adds ("AMQP 1.0 in
Azure Service Bus: request-response and message annotations", learn.microsoft.com); the encoding
itself is the SDK's own codec (``azure.servicebus._pyamqp``). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from azure.servicebus._pyamqp import _decode as amqp_decode
from azure.servicebus._pyamqp import _encode as amqp_encode
from azure.servicebus._pyamqp import message as amqp_message
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes

from funcstack.servicebus._broker import SCHEDULED_ENQUEUE_TIME, StoredMessage, now_ms
from funcstack.servicebus._limits import check_header, check_ids, check_properties

BATCH_FORMAT = 0x80013700
MESSAGE_STATE = b"x-opt-message-state"
PARTITION_KEY = b"x-opt-partition-key"
VIA_PARTITION_KEY = b"x-opt-via-partition-key"


def text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8")
    return str(value)


def pad(values: list[Any] | None, n: int) -> list[Any]:
    out = list(values or [])
    return out + [None] * (n - len(out))


def split_sections(payload: bytes) -> list[tuple[int, bytes, Any]]:
    """The message sections of an encoded message: (descriptor code, raw bytes, decoded value)."""
    buf = memoryview(payload)
    out: list[tuple[int, bytes, Any]] = []
    while len(buf):
        if buf[1] == 0x53:
            code, start = buf[2], 3
        else:  # 0x80: ulong descriptor
            code, start = int.from_bytes(buf[2:10], "big"), 10
        rest, value = amqp_decode._DECODE_BY_CONSTRUCTOR[buf[start]](buf[start + 1 :])
        used = len(buf) - len(rest)
        out.append((code, bytes(buf[:used]), value))
        buf = rest
    return out


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
    for code, raw, value in split_sections(payload):
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
    header = amqp_message.Header(
        durable=m.header[0],
        priority=m.header[1],
        ttl=m.header[2],
        first_acquirer=None,
        delivery_count=m.delivery_count,
    )
    amqp_encode.encode_value(out, amqp_encode.describe_performative(header))
    delivery: dict[Any, Any] = dict(getattr(m, "delivery_annotations", None) or {})
    if locked and m.lock_token is not None:
        # the service gives the lock token in the delivery annotations too
        delivery[b"x-opt-lock-token"] = {TYPE: AMQPTypes.uuid, VALUE: m.lock_token}
    if delivery:
        amqp_encode.encode_value(
            out,
            {
                TYPE: AMQPTypes.described,
                VALUE: (
                    {TYPE: AMQPTypes.ulong, VALUE: 0x71},
                    amqp_encode.encode_annotations(delivery),
                ),
            },
        )
    ann: dict[Any, Any] = {
        k: v
        for k, v in m.annotations.items()
        if not (isinstance(k, bytes) and k.startswith(b"x-opt-lock"))
    }
    ann[b"x-opt-sequence-number"] = {TYPE: AMQPTypes.long, VALUE: m.seq}
    scheduled = m.annotations.get(SCHEDULED_ENQUEUE_TIME)
    if isinstance(scheduled, int):
        ann[SCHEDULED_ENQUEUE_TIME] = {TYPE: AMQPTypes.timestamp, VALUE: scheduled}
    # 0 active, 1 deferred, 2 scheduled (ServiceBusMessageState)
    state = 2 if m.scheduled_ms else 1 if m.deferred else 0
    ann[MESSAGE_STATE] = {TYPE: AMQPTypes.int, VALUE: state}
    ann[b"x-opt-enqueued-time"] = {TYPE: AMQPTypes.timestamp, VALUE: m.enqueued_ms}
    if locked and m.locked_until_ms:
        ann[b"x-opt-locked-until"] = {TYPE: AMQPTypes.timestamp, VALUE: m.locked_until_ms}
    if m.lock_token is not None:
        ann[b"x-opt-lock-token"] = {TYPE: AMQPTypes.uuid, VALUE: m.lock_token}
    amqp_encode.encode_value(
        out,
        {
            TYPE: AMQPTypes.described,
            VALUE: ({TYPE: AMQPTypes.ulong, VALUE: 0x72}, amqp_encode.encode_annotations(ann)),
        },
    )
    out += m.properties_raw
    if m.app_properties_raw:
        out += m.app_properties_raw
    elif m.app_properties:
        amqp_encode.encode_value(
            out,
            {
                TYPE: AMQPTypes.described,
                VALUE: (
                    {TYPE: AMQPTypes.ulong, VALUE: 0x74},
                    amqp_encode.encode_application_properties(m.app_properties),
                ),
            },
        )
    out += m.body_raw
    return bytes(out)
