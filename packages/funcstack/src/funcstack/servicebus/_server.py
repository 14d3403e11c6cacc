"""AMQP 1.0 server (asyncio) speaking enough Service Bus for the azure-servicebus SDK.

Framing and the type system come from the SDK's own codec (``azure.servicebus._pyamqp``).
Supported: SASL (ANONYMOUS/MSSBCBS/PLAIN/EXTERNAL, always OK), ``$cbs`` put-token, senders to
topics/queues (single and batched messages, duplicate detection, session-id enforcement, 256 KB
limit), receivers on subscriptions/queues and their dead-letter queues (peek-lock and
receive-and-delete, sessions incl. NEXT_AVAILABLE), settlement over the link and over
``$management`` (update-disposition, renew-lock, renew-session-lock, get/set-session-state, peek,
receive-by-sequence-number), lock expiry and MaxDeliveryCount dead-lettering.

State is in memory: a restart loses undelivered messages and the duplicate detection history.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import uuid
from dataclasses import dataclass, field
from typing import Any

from azure.servicebus._pyamqp import _decode as amqp_decode
from azure.servicebus._pyamqp import _encode as amqp_encode
from azure.servicebus._pyamqp import endpoints, outcomes
from azure.servicebus._pyamqp import error as amqp_error
from azure.servicebus._pyamqp import message as amqp_message
from azure.servicebus._pyamqp import performatives as perf
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes

from funcstack.servicebus._broker import (
    SCHEDULED_ENQUEUE_TIME,
    Broker,
    ReceiverEntity,
    SenderEntity,
    StoredMessage,
    now_ms,
)
from funcstack.servicebus._config import MAX_MESSAGE_SIZE

logger = logging.getLogger(__name__)

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
MAX_FRAME_SIZE = 65536
BIG_WINDOW = 2**31 - 1
SENDER_CREDIT = 1000
BATCH_FORMAT = 0x80013700
SESSION_FILTER = b"com.microsoft:session-filter"
MESSAGE_STATE = b"x-opt-message-state"
DATETIME_MAX_MS = 253402300800000  # .NET DateTime.MaxValue: "no filter" in get-message-sessions
LOCKED_UNTIL_UTC = b"com.microsoft:locked-until-utc"
LINK_TIMEOUT = b"com.microsoft:timeout"
DATETIMEOFFSET_EPOCH = 621355968000000000
ROLE_SENDER = False
ROLE_RECEIVER = True

COND_NOT_FOUND = b"amqp:not-found"
COND_NOT_ALLOWED = b"amqp:not-allowed"
COND_SIZE = b"amqp:link:message-size-exceeded"
COND_LOCK_LOST = b"com.microsoft:message-lock-lost"
COND_SESSION_LOCKED = b"com.microsoft:session-cannot-be-locked"
COND_SESSION_LOCK_LOST = b"com.microsoft:session-lock-lost"
COND_TIMEOUT = b"com.microsoft:timeout"
COND_MESSAGE_NOT_FOUND = b"com.microsoft:message-not-found"
COND_ARGUMENT_ERROR = b"com.microsoft:argument-error"
COND_INVALID_FIELD = b"amqp:invalid-field"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8")
    return str(value)


def _pad(values: list[Any] | None, n: int) -> list[Any]:
    out = list(values or [])
    return out + [None] * (n - len(out))


def _entity_path(address: str) -> str:
    """``amqp://host:port/topic/Subscriptions/sub`` or ``topic/...`` -> ``topic/...``."""
    if "://" in address:
        address = address.split("://", 1)[1]
        address = address.split("/", 1)[1] if "/" in address else ""
    return address.strip("/")


def _source(address: str | None, filters: dict[bytes, Any] | None = None) -> Any:
    return endpoints.Source(*([None] * 11))._replace(address=address, filters=filters)


def _target(address: str | None) -> Any:
    return endpoints.Target(*([None] * 7))._replace(address=address)


def _error(condition: bytes, description: str) -> Any:
    return amqp_error.AMQPError(condition=condition, description=description, info=None)


def _split_sections(payload: bytes) -> list[tuple[int, bytes, Any]]:
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


def parse_message(payload: bytes) -> StoredMessage:
    """A sent message as stored by the broker (sequence number assigned per receiver entity)."""
    props_raw = b""
    props: list[Any] = []
    app: dict[Any, Any] | None = None
    app_raw = b""
    body = bytearray()
    annotations: dict[Any, Any] = {}
    delivery_annotations: dict[Any, Any] | None = None
    header: list[Any] = []
    for code, raw, value in _split_sections(payload):
        if code == 0x70:
            header = _pad(value, 5)
        elif code == 0x72:
            annotations = dict(value or {})
        elif code == 0x73:
            props_raw, props = raw, _pad(value, 13)
        elif code == 0x74:
            app_raw, app = raw, dict(value or {})
        elif code == 0x71:
            delivery_annotations = dict(value or {})
        else:
            body += raw
    return StoredMessage(
        seq=0,
        message_id=_text(props[0]) if props else None,
        session_id=_text(props[10]) if props else None,
        properties_raw=props_raw,
        app_properties=app,
        app_properties_raw=app_raw,
        body_raw=bytes(body),
        annotations=annotations,
        header=_pad(header, 5),
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


class SendRejectedError(Exception):
    def __init__(self, condition: bytes, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


@dataclass(eq=False)
class Link:
    session: Session
    handle: int
    name: str
    kind: str  # "cbs-in", "cbs-out", "mgmt-in", "mgmt-out", "send", "recv"
    address: str
    sender_entity: SenderEntity | None = None
    entity: ReceiverEntity | None = None
    session_id: str | None = None
    is_session: bool = False
    receive_and_delete: bool = False
    credit: int = 0
    delivery_count: int = 0
    drain: bool = False
    active: bool = True
    pending_deadline: float | None = None
    attach_fields: list[Any] = field(default_factory=list)
    partial: bytearray = field(default_factory=bytearray)
    first_transfer: list[Any] | None = None
    received: int = 0


@dataclass(eq=False)
class Session:
    conn: Connection
    channel: int
    next_outgoing_id: int = 0
    next_incoming_id: int = 0
    links: dict[int, Link] = field(default_factory=dict)
    unsettled: dict[int, tuple[Link, uuid.UUID | None]] = field(default_factory=dict)


class Connection:
    def __init__(
        self, server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.sessions: dict[int, Session] = {}
        self.remote_max_frame = 512
        self.closed = False

    # ---- framing -------------------------------------------------------------------------
    def send(self, channel: int, frame: Any, frame_type: bytes = b"\x00") -> None:
        if self.closed:
            return
        header, body = amqp_encode.encode_frame(frame, frame_type=frame_type)
        if body is None:
            self.writer.write(header)
        else:
            self.writer.write(header + channel.to_bytes(2, "big") + body)

    async def read_frame(self) -> tuple[int, int, memoryview | None]:
        head = await self.reader.readexactly(8)
        size = int.from_bytes(head[:4], "big")
        doff = head[4]
        channel = int.from_bytes(head[6:8], "big")
        body = await self.reader.readexactly(size - 8) if size > 8 else b""
        data = memoryview(body)[doff * 4 - 8 :]
        return head[5], channel, data if len(data) else None

    async def run(self) -> None:
        try:
            header = await self.reader.readexactly(8)
            if header == SASL_HEADER:
                self.writer.write(SASL_HEADER)
                self.send(
                    0,
                    perf.SASLMechanism(
                        sasl_server_mechanisms=[b"MSSBCBS", b"ANONYMOUS", b"PLAIN", b"EXTERNAL"]
                    ),
                    frame_type=b"\x01",
                )
                await self.writer.drain()
                _, _, data = await self.read_frame()  # sasl-init
                self.send(0, perf.SASLOutcome(code=0, additional_data=None), frame_type=b"\x01")
                await self.writer.drain()
                header = await self.reader.readexactly(8)
            if header != AMQP_HEADER:
                self.writer.write(AMQP_HEADER)
                return
            self.writer.write(AMQP_HEADER)
            while not self.closed:
                _, channel, data = await self.read_frame()
                if data is None:
                    continue  # heartbeat
                code, fields = amqp_decode.decode_frame(data)
                self.handle(code, channel, fields)
                await self.writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        except Exception:
            logger.exception("connection failed")
        finally:
            self.closed = True
            self.cleanup()
            with contextlib.suppress(Exception):
                self.writer.close()

    def cleanup(self) -> None:
        for session in list(self.sessions.values()):
            for link in list(session.links.values()):
                self.server.unlink(link)
        self.sessions.clear()

    # ---- performatives -------------------------------------------------------------------
    def handle(self, code: int, channel: int, f: list[Any]) -> None:
        if code == 0x10:  # open
            self.remote_max_frame = int(f[2] or 4294967295)
            self.send(
                0,
                perf.OpenFrame(
                    container_id="funcstack-servicebus",
                    hostname=None,
                    max_frame_size=MAX_FRAME_SIZE,
                    channel_max=65535,
                    idle_timeout=None,
                    outgoing_locales=None,
                    incoming_locales=None,
                    offered_capabilities=None,
                    desired_capabilities=None,
                    properties=None,
                ),
            )
        elif code == 0x11:  # begin
            session = Session(conn=self, channel=channel, next_incoming_id=int(f[1] or 0))
            self.sessions[channel] = session
            self.send(
                channel,
                perf.BeginFrame(
                    remote_channel=channel,
                    next_outgoing_id=0,
                    incoming_window=BIG_WINDOW,
                    outgoing_window=BIG_WINDOW,
                    handle_max=65535,
                    offered_capabilities=None,
                    desired_capabilities=None,
                    properties=None,
                ),
            )
        elif code == 0x18:  # close
            self.send(0, perf.CloseFrame(error=None))
            self.closed = True
        elif 0x12 <= code <= 0x17 and channel not in self.sessions:
            self.on_unmapped_channel(code, channel)
        elif code == 0x12:
            self.on_attach(self.sessions[channel], f)
        elif code == 0x13:
            self.on_flow(self.sessions[channel], f)
        elif code == 0x14:
            self.on_transfer(self.sessions[channel], f)
        elif code == 0x15:
            self.on_disposition(self.sessions[channel], f)
        elif code == 0x16:  # detach
            session = self.sessions[channel]
            link = session.links.pop(int(f[0]), None)
            if link is not None:
                self.server.unlink(link)
            self.send(channel, perf.DetachFrame(handle=int(f[0]), closed=True, error=None))
        elif code == 0x17:  # end
            session = self.sessions.pop(channel)
            for link in list(session.links.values()):
                self.server.unlink(link)
            self.send(channel, perf.EndFrame(error=None))

    def on_unmapped_channel(self, code: int, channel: int) -> None:
        """A frame on a channel with no session: one ended already, or never begun.

        As the service's AMQP stack (Microsoft.Azure.Amqp) does: a ``detach`` or ``end`` there
        is ignored (the async SDK detaches its links after its session's ``end``: the session
        and its links are gone, there is nothing to answer); any other frame is a
        ``amqp:not-found`` error that closes the connection.
        """
        if code in (0x16, 0x17):
            logger.debug("ignored a %s on channel %s: no session there (ended already)",
                         "detach" if code == 0x16 else "end", channel,
                         extra={"channel": channel})
            return
        description = f"channel {channel} has no session"
        logger.warning("closing a connection: frame 0x%x on %s", code, description,
                       extra={"channel": channel})
        self.send(0, perf.CloseFrame(error=_error(COND_NOT_FOUND, description)))
        self.closed = True

    def send_attach(
        self, link: Link, *, role: bool, source: Any, target: Any, props: Any = None
    ) -> None:
        f = link.attach_fields
        self.send(
            link.session.channel,
            perf.AttachFrame(
                name=link.name,
                handle=link.handle,
                role=role,
                send_settle_mode=f[3],
                rcv_settle_mode=f[4],
                source=source,
                target=target,
                unsettled=None,
                incomplete_unsettled=None,
                initial_delivery_count=0 if role == ROLE_SENDER else None,
                max_message_size=self.server.max_message_size if role == ROLE_RECEIVER else None,
                offered_capabilities=None,
                desired_capabilities=None,
                properties=props,
            ),
        )

    def refuse_attach(self, link: Link, *, role: bool, condition: bytes, description: str) -> None:
        """Attach then detach with an error, the way the service refuses a link."""
        # No source/target: the client's link fails at once with the detach's error, so the
        # receiver's open raises (it does not report a link that is about to go).
        self.send_attach(link, role=role, source=None, target=None)
        self.send(
            link.session.channel,
            perf.DetachFrame(handle=link.handle, closed=True, error=_error(condition, description)),
        )
        link.session.links.pop(link.handle, None)
        link.active = False

    def on_attach(self, session: Session, f: list[Any]) -> None:
        handle = int(f[1])
        client_role = bool(f[2])
        source = _pad(f[5], 11) if f[5] is not None else _pad(None, 11)
        target = _pad(f[6], 7) if f[6] is not None else _pad(None, 7)
        if client_role == ROLE_SENDER:
            address = _text(target[0]) or ""
            path = _entity_path(address)
            link = Link(
                session=session,
                handle=handle,
                name=_text(f[0]) or "",
                kind="send",
                address=address,
                attach_fields=f,
            )
            session.links[handle] = link
            if path.lower() == "$cbs":
                link.kind = "cbs-in"
            elif path.lower().endswith("$management"):
                link.kind = "mgmt-in"
            else:
                link.sender_entity = self.server.broker.sender(path)
                if link.sender_entity is None:
                    self.refuse_attach(
                        link,
                        role=ROLE_RECEIVER,
                        condition=COND_NOT_FOUND,
                        description=f"The messaging entity '{path}' could not be found.",
                    )
                    return
            self.send_attach(
                link, role=ROLE_RECEIVER, source=_source(_text(source[0])), target=_target(address)
            )
            link.delivery_count = int(f[9] or 0)
            link.credit = SENDER_CREDIT
            self.send_link_flow(link)
            return
        address = _text(source[0]) or ""
        path = _entity_path(address)
        link = Link(
            session=session,
            handle=handle,
            name=_text(f[0]) or "",
            kind="recv",
            address=address,
            attach_fields=f,
            receive_and_delete=f[3] == 1,
        )
        session.links[handle] = link
        if path.lower() == "$cbs":
            link.kind = "cbs-out"
        elif path.lower().endswith("$management"):
            link.kind = "mgmt-out"
        else:
            link.entity = self.server.broker.receiver(path)
            if link.entity is None:
                self.refuse_attach(
                    link,
                    role=ROLE_SENDER,
                    condition=COND_NOT_FOUND,
                    description=f"The messaging entity '{path}' could not be found.",
                )
                return
            filters = source[7] if isinstance(source[7], dict) else {}
            link.is_session = SESSION_FILTER in filters
            if link.entity.requires_session and not link.is_session:
                self.refuse_attach(
                    link,
                    role=ROLE_SENDER,
                    condition=COND_NOT_ALLOWED,
                    description="It is not possible for an entity that requires sessions "
                    "to create a non-sessionful message receiver.",
                )
                return
            if link.is_session and not link.entity.requires_session:
                self.refuse_attach(
                    link,
                    role=ROLE_SENDER,
                    condition=COND_NOT_ALLOWED,
                    description="A sessionful message receiver cannot be created on an entity "
                    "that does not require sessions. Ensure RequiresSession is set to true when "
                    "creating a Queue or Subscription to enable sessionful behavior.",
                )
                return
            raw_sid = filters.get(SESSION_FILTER)
            if link.is_session and not (raw_sid is None or isinstance(raw_sid, bytes | str)):
                # a session id is a string (an int from the client is refused at open)
                self.refuse_attach(
                    link,
                    role=ROLE_SENDER,
                    condition=COND_INVALID_FIELD,
                    description="The session filter must be a string session id.",
                )
                return
            if link.is_session:
                sid = _text(raw_sid)
                if sid is not None:
                    owner = link.entity.session_owners.get(sid)
                    if owner is not None and owner is not link:
                        self.refuse_attach(
                            link,
                            role=ROLE_SENDER,
                            condition=COND_SESSION_LOCKED,
                            description=f"The requested session '{sid}' cannot be accepted. "
                            "It may be locked by another receiver.",
                        )
                        return
                    link.entity.session_owners[sid] = link
                    link.session_id = sid
                else:
                    props = f[13] if isinstance(f[13], dict) else {}
                    timeout_ms = int(props.get(LINK_TIMEOUT) or 65000)  # the service default
                    link.active = False
                    link.pending_deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
                    self.server.pending.append(link)
                    self.server.schedule_pump()
                    return
        self.complete_receiver_attach(link)

    def complete_receiver_attach(self, link: Link) -> None:
        link.active = True
        link.pending_deadline = None
        props = None
        filters = None
        if link.is_session and link.session_id is not None:
            filters = {SESSION_FILTER: link.session_id}
            assert link.entity is not None
            ticks = (
                DATETIMEOFFSET_EPOCH
                + (now_ms() + int(link.entity.config.lock_duration * 1000)) * 10000
            )
            props = {LOCKED_UNTIL_UTC: {TYPE: AMQPTypes.long, VALUE: ticks}}
        target = _pad(link.attach_fields[6], 7)
        self.send_attach(
            link,
            role=ROLE_SENDER,
            source=_source(link.address, filters),
            target=_target(_text(target[0])),
            props=props,
        )
        self.server.schedule_pump()

    def send_link_flow(self, link: Link, *, drain: bool = False) -> None:
        session = link.session
        self.send(
            session.channel,
            perf.FlowFrame(
                next_incoming_id=session.next_incoming_id,
                incoming_window=BIG_WINDOW,
                next_outgoing_id=session.next_outgoing_id,
                outgoing_window=BIG_WINDOW,
                handle=link.handle,
                delivery_count=link.delivery_count,
                link_credit=link.credit,
                available=None,
                drain=drain,
                echo=None,
                properties=None,
            ),
        )

    def on_flow(self, session: Session, f: list[Any]) -> None:
        if f[4] is None:
            return
        link = session.links.get(int(f[4]))
        if link is None or link.kind not in ("recv", "mgmt-out", "cbs-out"):
            return
        delivery_count = link.delivery_count if f[5] is None else int(f[5])
        link.credit = max(0, delivery_count + int(f[6] or 0) - link.delivery_count)
        link.drain = bool(f[8])
        if f[9]:
            self.send_link_flow(link)
        self.server.schedule_pump()

    def on_transfer(self, session: Session, f: list[Any]) -> None:
        session.next_incoming_id += 1
        link = session.links.get(int(f[0]))
        if link is None:
            return
        if link.first_transfer is None:
            link.first_transfer = f
        link.partial += bytes(f[11])
        if f[5]:  # more
            return
        first = link.first_transfer
        payload = bytes(link.partial)
        link.first_transfer = None
        link.partial = bytearray()
        link.delivery_count += 1
        link.received += 1
        state: Any = outcomes.Accepted()
        if link.kind == "send":
            try:
                self.server.accept_send(link, payload, int(first[3] or 0))
            except SendRejectedError as exc:
                state = outcomes.Rejected(error=_error(exc.condition, exc.description))
        elif link.kind in ("cbs-in", "mgmt-in"):
            self.server.management(link, payload)
        if not first[4]:
            disposition = perf.DispositionFrame(
                role=ROLE_RECEIVER,
                first=first[1],
                last=first[1],
                settled=True,
                state=state,
                batchable=None,
            )
            if link.kind == "send" and self.server.settle_delay > 0:
                asyncio.get_running_loop().call_later(
                    self.server.settle_delay, self._send_quietly, session.channel, disposition
                )
            else:
                self.send(session.channel, disposition)
        if link.received >= SENDER_CREDIT // 2:
            link.received = 0
            link.credit = SENDER_CREDIT
            self.send_link_flow(link)

    def _send_quietly(self, channel: int, frame: Any) -> None:
        try:
            self.send(channel, frame)
        except Exception:  # the connection may be gone by then
            logger.debug("late disposition not sent", exc_info=True)

    def on_disposition(self, session: Session, f: list[Any]) -> None:
        if not f[0]:  # only receiver-role dispositions settle our deliveries
            return
        first = int(f[1])
        last = int(f[2]) if f[2] is not None else first
        for delivery_id in range(first, last + 1):
            entry = session.unsettled.pop(delivery_id, None)
            if entry is None:
                continue
            link, token = entry
            echo = self.server.settle(link, token, f[4])
            if not f[3]:
                self.send(
                    session.channel,
                    perf.DispositionFrame(
                        role=ROLE_SENDER,
                        first=delivery_id,
                        last=delivery_id,
                        settled=True,
                        state=echo,
                        batchable=None,
                    ),
                )
        self.server.schedule_pump()

    def send_transfer(self, link: Link, payload: bytes, *, tag: bytes, settled: bool) -> int:
        session = link.session
        delivery_id = session.next_outgoing_id
        session.next_outgoing_id += 1
        chunk = max(512, min(self.remote_max_frame, 1024 * 1024) - 256)
        pieces = [payload[i : i + chunk] for i in range(0, len(payload), chunk)] or [b""]
        for index, piece in enumerate(pieces):
            first = index == 0
            self.send(
                session.channel,
                perf.TransferFrame(
                    handle=link.handle,
                    delivery_id=delivery_id if first else None,
                    delivery_tag=tag if first else None,
                    message_format=0 if first else None,
                    settled=settled if first else None,
                    more=index < len(pieces) - 1,
                    payload=piece,
                ),
            )
        link.delivery_count += 1
        link.credit = max(0, link.credit - 1)
        return delivery_id


class Server:
    """The listening endpoint plus its broker."""

    def __init__(self, broker: Broker, *, settle_delay: float = 0.0,
                 max_message_size: int = MAX_MESSAGE_SIZE) -> None:
        self.broker = broker
        #: The largest message (or batch) a sender may send, announced on each sender's link
        #: (the SDK sizes its batches by it): 256 KB as on Standard; larger as on Premium.
        self.max_message_size = max_message_size
        # Fault injection for tests: accept a send at once (receivers see it) but answer its
        # disposition late, so a sender can be killed while it still waits for the ack.
        self.settle_delay = settle_delay
        self.connections: set[Connection] = set()
        self.pending: list[Link] = []
        self._pump_scheduled = False
        self._server: asyncio.base_events.Server | None = None
        self._tls_server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        broker.on_change = self.schedule_pump

    async def start(self, host: str, port: int) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        self._server = await asyncio.start_server(self._on_client, sock=sock)
        self._sweeper = asyncio.create_task(self._sweep())
        return int(sock.getsockname()[1])

    async def start_tls(self, host: str, port: int, context: ssl.SSLContext) -> int:
        """A second listener speaking AMQP over TLS (amqps, what clients use without
        ``UseDevelopmentEmulator``); the same broker behind both."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        self._tls_server = await asyncio.start_server(self._on_client, sock=sock, ssl=context)
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for listener in (self._server, self._tls_server):
            if listener is not None:
                listener.close()
        for conn in list(self.connections):
            conn.closed = True
            with contextlib.suppress(Exception):
                conn.writer.close()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(self, reader, writer)
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(0.2)
            self.broker.expire_locks()
            now = loop.time()
            for link in list(self.pending):
                if link.pending_deadline is not None and link.pending_deadline < now:
                    self.pending.remove(link)
                    if link.session.links.get(link.handle) is link and not link.session.conn.closed:
                        link.session.conn.refuse_attach(
                            link,
                            role=ROLE_SENDER,
                            condition=COND_TIMEOUT,
                            description="The operation did not complete within the allocated time.",
                        )

    # ---- links ---------------------------------------------------------------------------
    def unlink(self, link: Link) -> None:
        link.active = False
        if link in self.pending:
            self.pending.remove(link)
        if link.entity is not None:
            link.entity.release_owner(link)
        for delivery_id, (owner, _) in list(link.session.unsettled.items()):
            if owner is link:
                del link.session.unsettled[delivery_id]

    def schedule_pump(self) -> None:
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        for link in list(self.pending):
            entity = link.entity
            if entity is None:
                continue
            sid = entity.next_free_session()
            if sid is None:
                continue
            self.pending.remove(link)
            if link.session.links.get(link.handle) is not link or link.session.conn.closed:
                continue
            entity.session_owners[sid] = link
            link.session_id = sid
            link.session.conn.complete_receiver_attach(link)
        for conn in list(self.connections):
            for session in list(conn.sessions.values()):
                for link in list(session.links.values()):
                    if link.kind == "recv" and link.active and link.entity is not None:
                        self._deliver(conn, link, link.entity)

    def _deliver(self, conn: Connection, link: Link, entity: ReceiverEntity) -> None:
        while link.credit > 0:
            m = entity.acquire(link, link.session_id, delete=link.receive_and_delete)
            if m is None:
                break
            payload = encode_stored(m, locked=not link.receive_and_delete)
            tag = m.lock_token.bytes_le if m.lock_token is not None else uuid.uuid4().bytes_le
            delivery_id = conn.send_transfer(
                link, payload, tag=tag, settled=link.receive_and_delete
            )
            if not link.receive_and_delete:
                link.session.unsettled[delivery_id] = (link, m.lock_token)
        if link.drain:
            link.delivery_count += link.credit
            link.credit = 0
            link.drain = False
            conn.send_link_flow(link, drain=True)

    # ---- sending -------------------------------------------------------------------------
    def accept_send(self, link: Link, payload: bytes, message_format: int) -> None:
        entity = link.sender_entity
        assert entity is not None
        if len(payload) > self.max_message_size:
            raise SendRejectedError(
                COND_SIZE,
                f"The received message (size {len(payload)} bytes) exceeds the limit "
                f"({self.max_message_size} bytes) currently allowed on the link.",
            )
        if message_format == BATCH_FORMAT:
            inner = [value for code, _, value in _split_sections(payload) if code == 0x75]
            messages = [parse_message(bytes(data)) for data in inner]
        else:
            messages = [parse_message(payload)]
        if entity.requires_session and any(m.session_id is None for m in messages):
            raise SendRejectedError(
                COND_NOT_ALLOWED,
                "The SessionId was not set on a message, and it cannot be sent to the entity. "
                "Entities that have session support enabled can only receive messages that have "
                "the SessionId set to a valid value.",
            )
        for m in messages:
            entity.accept(m)

    # ---- settlement ----------------------------------------------------------------------
    def settle(self, link: Link, token: uuid.UUID | None, state: Any) -> Any:
        entity = link.entity
        m = entity.by_lock(token) if entity is not None and token is not None else None
        if entity is None or m is None:
            return outcomes.Rejected(
                error=_error(
                    COND_LOCK_LOST,
                    "The lock supplied is invalid. Either the lock expired, or the message has "
                    "already been removed from the queue.",
                )
            )
        state = state or {"accepted": []}
        if "accepted" in state:
            entity.complete(m)
            return outcomes.Accepted()
        if "modified" in state:
            fields = _pad(state["modified"], 3)
            if fields[1]:
                entity.defer(m)
            else:
                entity.release(m, count=bool(fields[0]))
            return outcomes.Modified(
                delivery_failed=fields[0], undeliverable_here=fields[1], message_annotations=None
            )
        if "rejected" in state:
            err = _pad(state["rejected"], 1)[0]
            info = (_pad(err, 3)[2] if err else None) or {}
            entity.dead_letter_message(
                m,
                reason=_text(info.get(b"DeadLetterReason")),
                description=_text(info.get(b"DeadLetterErrorDescription")),
            )
            return outcomes.Rejected(error=None)
        entity.release(m, count=False)
        return outcomes.Released()

    # ---- $cbs and $management ------------------------------------------------------------
    def management(self, link: Link, payload: bytes) -> None:
        request = amqp_decode.decode_payload(memoryview(payload))
        app = request.application_properties or {}
        message_id = request.properties.message_id if request.properties else None
        if link.kind == "cbs-in":
            response_app: dict[str, Any] = self._put_token(app)
            value: Any = None
        else:
            try:
                status, description, value, condition = self._management_op(
                    link, app, request.value or {}
                )
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                # a request missing an entry or with one of the wrong type: the service answers
                # 400; the link and the connection go on
                status, value, condition = 400, None, COND_ARGUMENT_ERROR
                description = f"The management request is malformed: {type(exc).__name__} {exc}"
                logger.warning("refused a malformed $management request on %s: %s",
                               link.address, description)
            response_app = {"statusCode": status, "statusDescription": description}
            if condition is not None:
                response_app["errorCondition"] = {TYPE: AMQPTypes.symbol, VALUE: condition}
        reply_link = None
        for candidate in link.session.links.values():
            if candidate.kind in ("cbs-out", "mgmt-out") and _entity_path(
                candidate.address
            ).lower() == (_entity_path(link.address).lower()):
                reply_link = candidate
        if reply_link is None:
            return
        response = amqp_message.Message(
            properties=amqp_message.Properties(correlation_id=message_id),
            application_properties=response_app,
            value=value,
        )
        body = bytes(amqp_encode.encode_payload(bytearray(), response))
        link.session.conn.send_transfer(reply_link, body, tag=uuid.uuid4().bytes_le, settled=True)

    def _put_token(self, app: dict[Any, Any]) -> dict[str, Any]:
        """$cbs put-token: any token is accepted (keys are not checked locally), but the
        service refuses a token whose audience names an entity that does not exist — the
        client's open fails with an authentication error before any link is attached."""
        audience = _text(app.get(b"name")) or ""
        path = audience.split("://", 1)[-1].partition("/")[2].strip("/")
        for suffix in ("$management", "$deadletterqueue"):
            if path.lower().endswith(suffix):
                path = path[: -len(suffix)].rstrip("/")
        if path and self.broker.sender(path) is None and self.broker.receiver(path) is None:
            return {
                "status-code": 404,
                "status-description": f"The messaging entity '{path}' could not be found.",
            }
        return {"status-code": 202, "status-description": "Accepted"}

    def _schedule_op(
        self, op: str, path: str, body: dict[Any, Any]
    ) -> tuple[int, str, Any, bytes | None]:
        """schedule-message / cancel-scheduled-message on a queue's or topic's $management."""
        sender = self.broker.sender(path)
        if sender is None:
            return 404, f"The messaging entity '{path}' could not be found.", None, COND_NOT_FOUND
        if op == "cancel-scheduled-message":
            for seq in body.get(b"sequence-numbers") or []:
                sender.cancel(int(seq))  # the service ignores numbers it does not know
            return 200, "OK", None, None
        messages = []
        for entry in body.get(b"messages") or []:
            m = parse_message(bytes(entry[b"message"]))
            if sender.requires_session and m.session_id is None:
                return (
                    400,
                    "The SessionId was not set on a message, and it cannot be sent to the entity.",
                    None,
                    COND_NOT_ALLOWED,
                )
            messages.append(m)
        numbers = []
        for m in messages:
            due = m.annotations.get(SCHEDULED_ENQUEUE_TIME)
            if not isinstance(due, int):
                return 400, "The message has no scheduled enqueue time.", None, COND_NOT_ALLOWED
            if sender.is_duplicate(m.message_id):
                numbers.append(0)
                continue
            numbers.append(sender.schedule(m, max(due, now_ms())))
        return (
            200,
            "OK",
            {"sequence-numbers": {
                TYPE: AMQPTypes.array,
                VALUE: [{TYPE: AMQPTypes.long, VALUE: n} for n in numbers],
            }},
            None,
        )

    def _management_op(
        self, link: Link, app: dict[Any, Any], body: dict[Any, Any]
    ) -> tuple[int, str, Any, bytes | None]:
        operation = _text(app.get(b"operation")) or ""
        path = _entity_path(link.address)
        path = path[: -len("$management")].rstrip("/")
        op = operation.removeprefix("com.microsoft:")
        if op in ("schedule-message", "cancel-scheduled-message"):
            return self._schedule_op(op, path, body)
        entity = self.broker.receiver(path)
        if entity is None:
            return 404, f"The messaging entity '{path}' could not be found.", None, COND_NOT_FOUND
        lock_ms = int(entity.config.lock_duration * 1000)
        if op == "renew-lock":
            expirations = []
            for token in body.get(b"lock-tokens") or []:
                m = entity.by_lock(token)
                if m is None:
                    return 410, "The lock supplied is invalid.", None, COND_LOCK_LOST
                m.locked_until_ms = now_ms() + lock_ms
                expirations.append({TYPE: AMQPTypes.timestamp, VALUE: m.locked_until_ms})
            return 200, "OK", {"expirations": expirations}, None
        if op == "update-disposition":
            status = _text(body.get(b"disposition-status"))
            for token in body.get(b"lock-tokens") or []:
                m = entity.by_lock(token)
                if m is None:
                    return 410, "The lock supplied is invalid.", None, COND_LOCK_LOST
                if status == "completed":
                    entity.complete(m)
                elif status == "abandoned":
                    entity.release(m, count=True)
                elif status == "suspended":
                    entity.dead_letter_message(
                        m,
                        reason=_text(body.get(b"deadletter-reason")),
                        description=_text(body.get(b"deadletter-description")),
                    )
                elif status == "defered":
                    entity.defer(m)
            return 200, "OK", None, None
        if op in ("renew-session-lock", "get-session-state", "set-session-state"):
            sid = _text(body.get(b"session-id")) or ""
            if entity.session_owners.get(sid) is None:
                return 410, "The session lock was lost.", None, COND_SESSION_LOCK_LOST
            if op == "renew-session-lock":
                expiry = now_ms() + lock_ms
                return 200, "OK", {"expiration": {TYPE: AMQPTypes.timestamp, VALUE: expiry}}, None
            if op == "get-session-state":
                return 200, "OK", {"session-state": entity.session_state.get(sid)}, None
            state = body.get(b"session-state")
            entity.session_state[sid] = bytes(state) if state is not None else None
            entity.session_updated_ms[sid] = now_ms()
            return 200, "OK", None, None
        if op == "peek-message":
            start = int(body.get(b"from-sequence-number") or 0)
            count = int(body.get(b"message-count") or 1)
            peek_sid = _text(body.get(b"session-id"))
            found = [
                m
                for m in entity.messages.values()
                if m.seq >= start and (peek_sid is None or m.session_id == peek_sid)
            ][:count]
            if not found:
                return 204, "No messages", None, None
            return (
                200,
                "OK",
                {"messages": [{"message": encode_stored(m, locked=False)} for m in found]},
                None,
            )
        if op == "receive-by-sequence-number":
            out: list[dict[str, Any]] = []
            # receiver-settle-mode 0: a receive-and-delete receiver, the messages go now
            delete = body.get(b"receiver-settle-mode") == 0
            for seq in body.get(b"sequence-numbers") or []:
                m = entity.messages.get(int(seq))
                if m is None or not m.deferred:
                    return 404, f"Message {seq} not found.", None, COND_MESSAGE_NOT_FOUND
                if delete:
                    entity.messages.pop(m.seq)
                    self.broker.changed()
                    out.append({"message": encode_stored(m, locked=False)})
                    continue
                # locked by this receiver; still deferred, so out of normal receives
                m.owner = link
                m.lock_token = uuid.uuid4()
                m.locked_until_ms = now_ms() + lock_ms
                self.broker.locks[m.lock_token] = (entity, m.seq)
                out.append({"message": encode_stored(m, locked=True), "lock-token": m.lock_token})
            return 200, "OK", {"messages": out}, None
        if op == "get-message-sessions":
            since = body.get(b"last-updated-time")
            if isinstance(since, int) and since < DATETIME_MAX_MS:
                # a filter (DateTime.MaxValue means none): sessions whose state was set after
                sessions = sorted(
                    sid for sid, at in entity.session_updated_ms.items() if at > since
                )
                return 200, "OK", {"sessions-ids": sessions, "skip": 0}, None
            sessions = sorted({m.session_id for m in entity.messages.values() if m.session_id})
            return 200, "OK", {"sessions-ids": sessions, "skip": 0}, None
        return (
            501,
            f"Operation {operation} is not supported by the local endpoint.",
            None,
            (b"amqp:not-implemented"),
        )
