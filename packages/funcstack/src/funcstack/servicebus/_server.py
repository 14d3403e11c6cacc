"""The local Service Bus endpoint's server: it listens (AMQP, and AMQP over TLS), runs one
``Connection`` per client, and does what links carry against the broker: accepts sends (single
messages and the SDK's batches; duplicate detection, session-id enforcement, the limits of the
namespace's tier, ``_limits``), delivers to receivers with credit (peek-lock and
receive-and-delete, sessions including NEXT_AVAILABLE), settles over the link, and hands
``$cbs``/``$management`` requests to ``_management``. A sweep ends expired locks, activates
scheduled messages, expires messages past their time to live and times out waiting session
accepts: a few times a second while any of those is due soon, else when the next one is due or
a frame comes (an idle endpoint sleeps).

The rooms: ``_codec`` (messages in and out), ``_connection`` (AMQP framing and performatives),
``_management`` (request-response operations), ``_broker`` (entities and messages), ``_state``
(what persists). Follows "AMQP 1.0 in Azure Service Bus and Event Hubs protocol guide" and "Message
transfers, locks, and settlement" (learn.microsoft.com).

What persists: the broker's state is in memory and, with ``--state-file``, in a SQLite file
(``_state``: messages waiting, deferred and scheduled, a message lock with its expiry, sequence
numbers, session state, the duplicate-detection history), written before it is acknowledged: a
send before its ``accepted`` disposition, a settlement before its echo or its ``$management``
answer (``persist``), the rest as soon as the event loop is free. A SIGKILL right after an
acknowledgement loses nothing acknowledged; without ``--state-file`` a restart loses everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import uuid
from typing import Any, cast

from funcstack.servicebus._amqp import (
    ACCEPTED,
    MODIFIED,
    REJECTED,
    RELEASED,
    Described,
    error,
    fields,
    named,
    performative,
    text,
)
from funcstack.servicebus._broker import Broker, ReceiverEntity, SenderEntity, now_ms
from funcstack.servicebus._codec import (
    BATCH_FORMAT,
    batch_messages,
    encode_stored,
    parse_message,
)
from funcstack.servicebus._connection import (
    COND_LOCK_LOST,
    COND_NOT_ALLOWED,
    COND_NOT_FOUND,
    COND_SESSION_LOCK_LOST,
    COND_TIMEOUT,
    ROLE_SENDER,
    Connection,
    Link,
)
from funcstack.servicebus._limits import RefusedError, check_size
from funcstack.servicebus._management import Management
from funcstack.servicebus._state import Store

logger = logging.getLogger(__name__)

#: The sweep's pace while something is due: locks, schedules, times to live and session
#: accepts end within about this much of their time.
SWEEP_INTERVAL = 0.2
#: The longest the sweep sleeps with nothing due (every handled frame wakes it sooner).
SWEEP_IDLE_MAX = 5.0


class Server:
    """The listening endpoint plus its broker."""

    def __init__(
        self,
        broker: Broker,
        *,
        settle_delay: float = 0.0,
        max_message_size: int | None = None,
        store: Store | None = None,
    ) -> None:
        self.broker = broker
        broker.on_removed = self._entity_gone
        #: Where what persists is written (``--state-file``), before it is acknowledged.
        self.store = store
        #: Overrides the largest message and batch of every entity (``--max-message-size``);
        #: None: each entity's, by its namespace's tier (``limits``).
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
        self._wake = asyncio.Event()
        self._management = Management(broker, persist=self.persist)
        broker.on_change = self.schedule_pump

    async def start(self, host: str, port: int, *, listening: int | None = None) -> int:
        """Listen on ``host``:``port``, or on the socket whose descriptor is ``listening``
        (bound and listening already: handed over by the process that started this one at
        its first connection, ``funcstack._activation``)."""
        if listening is not None:
            sock = socket.socket(fileno=listening)
        else:
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

    def wake_sweep(self) -> None:
        """Something happened that may be due sooner than the sweep sleeps (a frame handled:
        a lock taken, a message scheduled or sent with a time to live, a session accept)."""
        self._wake.set()

    async def _sweep(self) -> None:
        """Every SWEEP_INTERVAL while something is due sooner; else asleep until the next due
        time (``_next_due``), a wake (``wake_sweep``) or SWEEP_IDLE_MAX, whichever comes
        first: an idle endpoint does not wake five times a second."""
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            self._wake.clear()  # what came meanwhile is seen by this round
            self._sweep_once()
            wait = self._next_due() - SWEEP_INTERVAL
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)

    def _next_due(self) -> float:
        """Seconds until the sweep has work: a lock, schedule or time to live
        (``Broker.next_due_ms``), or a waiting session accept's deadline; at most
        SWEEP_IDLE_MAX."""
        due = SWEEP_IDLE_MAX
        next_ms = self.broker.next_due_ms()
        if next_ms is not None:
            due = min(due, (next_ms - now_ms()) / 1000)
        now = asyncio.get_running_loop().time()
        for link in self.pending:
            if link.pending_deadline is not None:
                due = min(due, link.pending_deadline - now)
        return due

    def _sweep_once(self) -> None:
        now = asyncio.get_running_loop().time()
        for owner in self.broker.expire_locks():
            if isinstance(owner, Link) and owner.active:
                owner.session.conn.detach_with_error(
                    owner,
                    COND_SESSION_LOCK_LOST,
                    "The session lock has expired on the MessageSession. Accept a new "
                    "MessageSession.",
                )
        self.persist()  # locks run out, expiries, scheduled messages come due
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
    def _entity_gone(self, name: str, gone: set[int]) -> None:
        """A queue or topic deleted or replaced: the links attached to it (or to its
        subscriptions and dead-letter queues) end with ``amqp:not-found``, as Service Bus ends
        them; a client attaches again to what now has the name, if anything does."""
        for conn in list(self.connections):
            for session in list(conn.sessions.values()):
                for link in list(session.links.values()):
                    if id(link.sender_entity) in gone or id(link.entity) in gone:
                        conn.detach_with_error(
                            link,
                            COND_NOT_FOUND,
                            f"The messaging entity '{name}' could not be found.",
                        )

    def unlink(self, link: Link) -> None:
        link.active = False
        if link in self.pending:
            self.pending.remove(link)
        if link.entity is not None:
            link.entity.release_owner(link)
        for delivery_id, (owner, _) in list(link.session.unsettled.items()):
            if owner is link:
                del link.session.unsettled[delivery_id]

    def persist(self) -> None:
        """Write what changed to the state file (before acknowledging it; no-op without one)."""
        if self.store is not None:
            self.store.flush(self.broker)

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
            entity.lock_session(sid, link)
            link.session_id = sid
            link.session.conn.complete_receiver_attach(link)
        for conn in list(self.connections):
            for session in list(conn.sessions.values()):
                for link in list(session.links.values()):
                    if link.kind == "recv" and link.active and link.entity is not None:
                        self._deliver(conn, link, link.entity)
        self.persist()  # locks taken, and whatever else changed since the last write

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
    def limits(self, entity: SenderEntity | None) -> tuple[int, int]:
        """The largest message and the largest batch a sender to ``entity`` may send: the
        entity's (its tier's, or a Premium entity's MaxMessageSizeInKilobytes), unless
        ``--max-message-size`` overrides both for every entity."""
        if self.max_message_size is not None:
            return self.max_message_size, self.max_message_size
        tier = self.broker.tier
        message = entity.config.max_message_bytes if entity is not None else tier.max_message_bytes
        return message, tier.max_batch_bytes

    def accept_send(self, link: Link, payload: bytes, message_format: int) -> None:
        """Take one transfer of a sender (a message, or the SDK's batch) or refuse it whole
        (``RefusedError``: the batch's size, then each message's size and quotas)."""
        entity = link.sender_entity
        assert entity is not None
        max_message, max_batch = self.limits(entity)
        if message_format == BATCH_FORMAT:
            check_size(len(payload), max_batch, what="batch")
            messages = []
            for n, data in enumerate(batch_messages(payload), 1):
                check_size(len(data), max_message, what=f"message {n} of the batch")
                messages.append(parse_message(data, label=f"message {n} of the batch"))
        else:
            check_size(len(payload), max_message, what="message")
            messages = [parse_message(payload, label="the message")]
        if entity.requires_session and any(m.session_id is None for m in messages):
            raise RefusedError(
                COND_NOT_ALLOWED,
                "The SessionId was not set on a message, and it cannot be sent to the entity. "
                "Entities that have session support enabled can only receive messages that have "
                "the SessionId set to a valid value.",
            )
        for m in messages:
            entity.accept(m)

    # ---- settlement ----------------------------------------------------------------------
    def settle(self, link: Link, token: uuid.UUID | None, state: Any) -> Any:
        """A receiver's outcome for a delivery (a described outcome, part 3.4; none: accepted)
        applied to its message; the outcome the endpoint answers with."""
        entity = link.entity
        m = entity.by_lock(token) if entity is not None and token is not None else None
        if entity is None or m is None:
            return performative(
                REJECTED,
                error(
                    COND_LOCK_LOST,
                    "The lock supplied is invalid. Either the lock expired, or the message has "
                    "already been removed from the queue.",
                ),
            )
        outcome = int(cast(int, state.descriptor)) if isinstance(state, Described) else ACCEPTED
        if outcome == ACCEPTED:
            entity.complete(m)
            return performative(ACCEPTED)
        if outcome == MODIFIED:
            failed, undeliverable_here, _ = fields(state, 3)
            if undeliverable_here:
                entity.defer(m)
            else:
                entity.release(m, count=bool(failed))
            return performative(MODIFIED, failed, undeliverable_here)
        if outcome == REJECTED:
            [err] = fields(state, 1)
            info = named(fields(err, 3)[2])
            entity.dead_letter_message(
                m,
                reason=text(info.get("DeadLetterReason")),
                description=text(info.get("DeadLetterErrorDescription")),
            )
            return performative(REJECTED)
        entity.release(m, count=False)
        return performative(RELEASED)

    def management(self, link: Link, payload: bytes) -> None:
        self._management.handle(link, payload)
