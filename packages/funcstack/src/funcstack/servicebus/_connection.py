"""One AMQP 1.0 connection to the local Service Bus endpoint: the SASL and AMQP handshakes,
framing, sessions and links, and the performatives (open, begin, attach, flow, transfer,
disposition, detach, end, close) as the service's AMQP stack (Microsoft.Azure.Amqp) answers them.
What a link carries (sends, deliveries, settlements, ``$cbs`` and ``$management`` requests) is
the endpoint's (``Endpoint``, implemented by ``_server.Server``).

Follows the OASIS AMQP 1.0 specification (parts 2.4-2.8: connections, sessions, links, flow
control, delivery state) and "AMQP 1.0 in Azure Service Bus and Event Hubs protocol guide"
(learn.microsoft.com) for what Service Bus adds: the session filter, locked-until on attach, the
link timeout, refusals by detach with an error. Frames are encoded and decoded by ``_amqp``
(Apache Qpid Proton's codec); the connection's state machine is this module's, to answer as the
service does where it differs from a strict peer (an unmapped channel's detach, below).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from proton import Data

from funcstack.servicebus._amqp import (
    ACCEPTED,
    ATTACH,
    BEGIN,
    CLOSE,
    DETACH,
    DISPOSITION,
    END,
    FLOW,
    OPEN,
    REJECTED,
    SASL_FRAME,
    SASL_MECHANISMS,
    SASL_OUTCOME,
    SOURCE,
    TARGET,
    TRANSFER,
    array_of,
    decode_frame_body,
    error,
    fields,
    frame,
    performative,
    symbol,
    text,
    ubyte,
    uint,
    ulong,
    ushort,
)
from funcstack.servicebus._atom import looks_like_http
from funcstack.servicebus._atom import serve as serve_management
from funcstack.servicebus._broker import Broker, ReceiverEntity, SenderEntity, now_ms
from funcstack.servicebus._limits import RefusedError

logger = logging.getLogger(__name__)

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
MAX_FRAME_SIZE = 65536
BIG_WINDOW = 2**31 - 1
SENDER_CREDIT = 1000
SESSION_FILTER = symbol("com.microsoft:session-filter")
LOCKED_UNTIL_UTC = symbol("com.microsoft:locked-until-utc")
LINK_TIMEOUT = symbol("com.microsoft:timeout")
MAX_BATCH_SIZE = symbol("com.microsoft:max-message-batch-size")
SASL_MECHANISM_NAMES = ("MSSBCBS", "ANONYMOUS", "PLAIN", "EXTERNAL")
DATETIMEOFFSET_EPOCH = 621355968000000000
ROLE_SENDER = False
ROLE_RECEIVER = True

COND_NOT_FOUND = "amqp:not-found"
COND_NOT_ALLOWED = "amqp:not-allowed"
COND_LOCK_LOST = "com.microsoft:message-lock-lost"
COND_SESSION_LOCKED = "com.microsoft:session-cannot-be-locked"
COND_SESSION_LOCK_LOST = "com.microsoft:session-lock-lost"
COND_TIMEOUT = "com.microsoft:timeout"
COND_MESSAGE_NOT_FOUND = "com.microsoft:message-not-found"
COND_ARGUMENT_ERROR = "com.microsoft:argument-error"
COND_INVALID_FIELD = "amqp:invalid-field"


def entity_path(address: str) -> str:
    """``amqp://host:port/topic/Subscriptions/sub`` or ``topic/...`` -> ``topic/...``."""
    if "://" in address:
        address = address.split("://", 1)[1]
        address = address.split("/", 1)[1] if "/" in address else ""
    return address.strip("/")


def source_terminus(address: str | None, filters: dict[Any, Any] | None = None) -> Any:
    return performative(SOURCE, address, None, None, None, None, None, None, filters)


def target_terminus(address: str | None) -> Any:
    return performative(TARGET, address)


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
    #: The fields of the first transfer of a delivery still arriving (``more``).
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
    #: Handles of links the endpoint detached, whose client's detach is still to come.
    detached: set[int] = field(default_factory=set)


class Endpoint(Protocol):
    """What a connection hands over to the endpoint behind it (``_server.Server``)."""

    broker: Broker
    settle_delay: float
    pending: list[Link]

    def schedule_pump(self) -> None: ...

    def wake_sweep(self) -> None: ...

    def limits(self, entity: SenderEntity | None) -> tuple[int, int]: ...

    def unlink(self, link: Link) -> None: ...

    def accept_send(self, link: Link, payload: bytes, message_format: int) -> None: ...

    def settle(self, link: Link, token: uuid.UUID | None, state: Any) -> Any: ...

    def management(self, link: Link, payload: bytes) -> None: ...

    def persist(self) -> None: ...


class Connection:
    def __init__(
        self, server: Endpoint, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.sessions: dict[int, Session] = {}
        self.remote_max_frame = 512
        self.closed = False

    # ---- framing -------------------------------------------------------------------------
    def send(self, channel: int, body: Any, *, payload: bytes = b"", frame_type: int = 0) -> None:
        """A frame of ``body`` (a performative) on ``channel``, then a transfer's payload."""
        if self.closed:
            return
        self.writer.write(frame(channel, body, payload=payload, frame_type=frame_type))

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
            if looks_like_http(header):
                # the management API (ServiceBusAdministrationClient) on the same port: _atom
                await serve_management(self.server.broker, header, self.reader, self.writer)
                return
            if header == SASL_HEADER:
                self.writer.write(SASL_HEADER)
                mechanisms = [symbol(name) for name in SASL_MECHANISM_NAMES]
                self.send(
                    0,
                    performative(SASL_MECHANISMS, array_of(Data.SYMBOL, mechanisms)),
                    frame_type=SASL_FRAME,
                )
                await self.writer.drain()
                await self.read_frame()  # sasl-init: any mechanism and credentials will do
                self.send(0, performative(SASL_OUTCOME, ubyte(0)), frame_type=SASL_FRAME)
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
                code, values, payload = decode_frame_body(data)
                self.handle(code, channel, values, payload)
                self.server.wake_sweep()  # a lock, schedule or accept may be due soon
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
    def handle(self, code: int, channel: int, f: list[Any], payload: memoryview) -> None:
        if code == OPEN:
            self.remote_max_frame = int(f[2] or 4294967295)
            self.send(
                0,
                performative(
                    OPEN, "funcstack-servicebus", None, uint(MAX_FRAME_SIZE), ushort(65535)
                ),
            )
        elif code == BEGIN:
            session = Session(conn=self, channel=channel, next_incoming_id=int(f[1] or 0))
            self.sessions[channel] = session
            self.send(
                channel,
                performative(
                    BEGIN,
                    ushort(channel),
                    uint(0),
                    uint(BIG_WINDOW),
                    uint(BIG_WINDOW),
                    uint(65535),
                ),
            )
        elif code == CLOSE:
            self.send(0, performative(CLOSE))
            self.closed = True
        elif ATTACH <= code <= END and channel not in self.sessions:
            self.on_unmapped_channel(code, channel)
        elif code == ATTACH:
            self.on_attach(self.sessions[channel], f)
        elif code == FLOW:
            self.on_flow(self.sessions[channel], f)
        elif code == TRANSFER:
            self.on_transfer(self.sessions[channel], f, payload)
        elif code == DISPOSITION:
            self.on_disposition(self.sessions[channel], f)
        elif code == DETACH:
            session = self.sessions[channel]
            if int(f[0]) in session.detached:  # the answer to our detach
                session.detached.discard(int(f[0]))
                return
            link = session.links.pop(int(f[0]), None)
            if link is not None:
                self.server.unlink(link)
            self.send(channel, performative(DETACH, uint(int(f[0])), True))
        elif code == END:
            session = self.sessions.pop(channel)
            for link in list(session.links.values()):
                self.server.unlink(link)
            self.send(channel, performative(END))

    def on_unmapped_channel(self, code: int, channel: int) -> None:
        """A frame on a channel with no session: one ended already, or never begun.

        As the service's AMQP stack (Microsoft.Azure.Amqp) does: a ``detach`` or ``end`` there
        is ignored (the async SDK detaches its links after its session's ``end``: the session
        and its links are gone, there is nothing to answer); any other frame is a
        ``amqp:not-found`` error that closes the connection.
        """
        if code in (DETACH, END):
            logger.debug(
                "ignored a %s on channel %s: no session there (ended already)",
                "detach" if code == DETACH else "end",
                channel,
                extra={"channel": channel},
            )
            return
        description = f"channel {channel} has no session"
        logger.warning(
            "closing a connection: frame 0x%x on %s", code, description, extra={"channel": channel}
        )
        self.send(0, performative(CLOSE, error(COND_NOT_FOUND, description)))
        self.closed = True

    def send_attach(
        self, link: Link, *, role: bool, source: Any, target: Any, props: Any = None
    ) -> None:
        f = link.attach_fields
        max_message_size = None
        if role == ROLE_RECEIVER:
            # the client's sender learns the entity's limits here (the SDK sizes its batches
            # by the batch limit, as Service Bus announces it)
            max_message_size, max_batch_size = self.server.limits(link.sender_entity)
            props = {MAX_BATCH_SIZE: ulong(max_batch_size)}
        self.send(
            link.session.channel,
            performative(
                ATTACH,
                link.name,
                uint(link.handle),
                role,
                None if f[3] is None else ubyte(int(f[3])),  # send-settle-mode, the client's
                None if f[4] is None else ubyte(int(f[4])),  # receive-settle-mode
                source,
                target,
                None,  # unsettled
                None,  # incomplete-unsettled
                uint(0) if role == ROLE_SENDER else None,  # initial-delivery-count
                None if max_message_size is None else ulong(max_message_size),
                None,  # offered-capabilities
                None,  # desired-capabilities
                props,
            ),
        )

    def refuse_attach(self, link: Link, *, role: bool, condition: str, description: str) -> None:
        """Attach then detach with an error, the way the service refuses a link."""
        # No source/target: the client's link fails at once with the detach's error, so the
        # receiver's open raises (it does not report a link that is about to go).
        self.send_attach(link, role=role, source=None, target=None)
        self.send(
            link.session.channel,
            performative(DETACH, uint(link.handle), True, error(condition, description)),
        )
        link.session.links.pop(link.handle, None)
        link.active = False

    def detach_with_error(self, link: Link, condition: str, description: str) -> None:
        """The service ends a link (a lost session lock): a detach with the error; the
        client's answering detach is not answered again."""
        session = link.session
        if session.links.get(link.handle) is not link or self.closed:
            return
        session.links.pop(link.handle, None)
        session.detached.add(link.handle)
        self.server.unlink(link)
        self.send(
            session.channel,
            performative(DETACH, uint(link.handle), True, error(condition, description)),
        )

    def on_attach(self, session: Session, f: list[Any]) -> None:
        source = fields(f[5], 11)
        if bool(f[2]) == ROLE_SENDER:  # the client's role: it sends, the link comes in
            self._attach_sender(session, f, source, fields(f[6], 7))
        else:
            self._attach_receiver(session, f, source)

    def _attach_sender(
        self, session: Session, f: list[Any], source: list[Any], target: list[Any]
    ) -> None:
        """A client's sending link: to an entity (refused when there is none), the CBS node or
        a management node; attached with credit to send."""
        link, path = self._open_link(session, int(f[1]), f, text(target[0]) or "", "in")
        if link.kind == "send":
            link.sender_entity = self.server.broker.sender(path)
            if link.sender_entity is None:
                self._refuse_unknown_entity(link, path, ROLE_RECEIVER)
                return
        self.send_attach(
            link,
            role=ROLE_RECEIVER,
            source=source_terminus(text(source[0])),
            target=target_terminus(link.address),
        )
        link.delivery_count = int(f[9] or 0)
        link.credit = SENDER_CREDIT
        self.send_link_flow(link)

    def _attach_receiver(self, session: Session, f: list[Any], source: list[Any]) -> None:
        """A client's receiving link: from an entity (refused when there is none, or when its
        session filter does not fit the entity), the CBS node or a management node. A session
        receiver naming no session waits for a session free of locks (``pending``)."""
        link, path = self._open_link(
            session, int(f[1]), f, text(source[0]) or "", "out", receive_and_delete=f[3] == 1
        )
        if link.kind == "recv":
            link.entity = self.server.broker.receiver(path)
            if link.entity is None:
                self._refuse_unknown_entity(link, path, ROLE_SENDER)
                return
            filters = source[7] if isinstance(source[7], dict) else {}
            link.is_session = SESSION_FILTER in filters
            raw_sid = filters.get(SESSION_FILTER)
            refusal = _session_refusal(link.is_session, link.entity.requires_session, raw_sid)
            if refusal is not None:
                condition, description = refusal
                self.refuse_attach(
                    link, role=ROLE_SENDER, condition=condition, description=description
                )
                return
            if link.is_session and not self._accept_session(link, text(raw_sid), f):
                return
        self.complete_receiver_attach(link)

    def _accept_session(self, link: Link, sid: str | None, f: list[Any]) -> bool:
        """A session receiver's session locked to it (True: attach it now); refused when
        another receiver holds it; naming none, it waits in ``pending`` (False)."""
        assert link.entity is not None
        if sid is None:
            props = f[13] if isinstance(f[13], dict) else {}
            timeout_ms = int(props.get(LINK_TIMEOUT) or 65000)  # the service default
            link.active = False
            link.pending_deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
            self.server.pending.append(link)
            self.server.schedule_pump()
            return False
        owner = link.entity.session_owners.get(sid)
        if owner is not None and owner is not link:
            self.refuse_attach(
                link,
                role=ROLE_SENDER,
                condition=COND_SESSION_LOCKED,
                description=f"The requested session '{sid}' cannot be accepted. "
                "It may be locked by another receiver.",
            )
            return False
        link.entity.lock_session(sid, link)
        link.session_id = sid
        return True

    def _open_link(
        self, session: Session, handle: int, f: list[Any], address: str, way: str, **extra: Any
    ) -> tuple[Link, str]:
        """The link an attach opens (``way``: ``in`` for a client that sends, ``out`` for one
        that receives), kept by its session, and the entity path it names: the CBS node's
        (``cbs-in``/``cbs-out``), a management node's (``mgmt-...``), or an entity's (``send``,
        ``recv``)."""
        path = entity_path(address)
        kind = "send" if way == "in" else "recv"
        if path.lower() == "$cbs":
            kind = f"cbs-{way}"
        elif path.lower().endswith("$management"):
            kind = f"mgmt-{way}"
        link = Link(
            session=session,
            handle=handle,
            name=text(f[0]) or "",
            kind=kind,
            address=address,
            attach_fields=f,
            **extra,
        )
        session.links[handle] = link
        return link, path

    def _refuse_unknown_entity(self, link: Link, path: str, role: bool) -> None:
        self.refuse_attach(
            link,
            role=role,
            condition=COND_NOT_FOUND,
            description=f"The messaging entity '{path}' could not be found.",
        )

    def complete_receiver_attach(self, link: Link) -> None:
        link.active = True
        link.pending_deadline = None
        props = None
        filters = None
        if link.is_session and link.session_id is not None:
            filters = {SESSION_FILTER: link.session_id}
            assert link.entity is not None
            until = link.entity.session_locked_until.get(link.session_id) or now_ms()
            ticks = DATETIMEOFFSET_EPOCH + until * 10000
            props = {LOCKED_UNTIL_UTC: ticks}  # a long: .NET ticks
        target = fields(link.attach_fields[6], 7)
        self.send_attach(
            link,
            role=ROLE_SENDER,
            source=source_terminus(link.address, filters),
            target=target_terminus(text(target[0])),
            props=props,
        )
        self.server.schedule_pump()

    def send_link_flow(self, link: Link, *, drain: bool = False) -> None:
        session = link.session
        self.send(
            session.channel,
            performative(
                FLOW,
                uint(session.next_incoming_id % 2**32),
                uint(BIG_WINDOW),
                uint(session.next_outgoing_id % 2**32),
                uint(BIG_WINDOW),
                uint(link.handle),
                uint(link.delivery_count % 2**32),
                uint(link.credit),
                None,  # available
                drain,
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

    def on_transfer(self, session: Session, f: list[Any], data: memoryview) -> None:
        session.next_incoming_id += 1
        link = session.links.get(int(f[0]))
        if link is None:
            return
        if link.first_transfer is None:
            link.first_transfer = f
        link.partial += data
        if f[5]:  # more
            return
        first = link.first_transfer
        payload = bytes(link.partial)
        link.first_transfer = None
        link.partial = bytearray()
        link.delivery_count += 1
        link.received += 1
        state: Any = performative(ACCEPTED)
        if link.kind == "send":
            try:
                self.server.accept_send(link, payload, int(first[3] or 0))
            except RefusedError as exc:
                state = performative(REJECTED, error(exc.condition, exc.description))
            self.server.persist()  # durable before the sender hears it was accepted
        elif link.kind in ("cbs-in", "mgmt-in"):
            self.server.management(link, payload)
        if not first[4]:
            delivery_id = uint(int(first[1]))
            disposition = performative(
                DISPOSITION, ROLE_RECEIVER, delivery_id, delivery_id, True, state
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
        echoes: list[tuple[int, Any]] = []
        for delivery_id in range(first, last + 1):
            entry = session.unsettled.pop(delivery_id, None)
            if entry is None:
                continue
            link, token = entry
            echoes.append((delivery_id, self.server.settle(link, token, f[4])))
        self.server.persist()  # durable before the receiver hears it was settled
        if not f[3]:
            for delivery_id, echo in echoes:
                settled = uint(delivery_id)
                self.send(
                    session.channel,
                    performative(DISPOSITION, ROLE_SENDER, settled, settled, True, echo),
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
                performative(
                    TRANSFER,
                    uint(link.handle),
                    uint(delivery_id % 2**32) if first else None,
                    tag if first else None,
                    uint(0) if first else None,  # message-format
                    settled if first else None,
                    index < len(pieces) - 1,  # more
                ),
                payload=piece,
            )
        link.delivery_count += 1
        link.credit = max(0, link.credit - 1)
        return delivery_id


def _session_refusal(
    is_session: bool, requires_session: bool, raw_sid: object
) -> tuple[str, str] | None:
    """Why Service Bus refuses a receiver's session filter on its entity (condition, its
    description), or None."""
    if requires_session and not is_session:
        return (
            COND_NOT_ALLOWED,
            "It is not possible for an entity that requires sessions "
            "to create a non-sessionful message receiver.",
        )
    if is_session and not requires_session:
        return (
            COND_NOT_ALLOWED,
            "A sessionful message receiver cannot be created on an entity "
            "that does not require sessions. Ensure RequiresSession is set to true when "
            "creating a Queue or Subscription to enable sessionful behavior.",
        )
    if is_session and not (raw_sid is None or isinstance(raw_sid, bytes | str)):
        # a session id is a string (an int from the client is refused at open)
        return COND_INVALID_FIELD, "The session filter must be a string session id."
    return None
