"""In-memory Service Bus entities: topics/queues with duplicate detection, subscriptions with
peek-lock, sessions, delivery counts and dead-lettering.

Every change to what persists is recorded by key (``Broker.touch`` and its kin: a message, a
scheduled message, a session's state, a sequence counter, a duplicate-detection entry, a dropped
entity); ``_state.Store`` writes what was recorded before the endpoint acknowledges it
(``--state-file``).
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from funcstack.servicebus._config import NamespaceConfig, ReceiverEntityConfig, SenderEntityConfig
from funcstack.servicebus._filters import Facts, accepts

logger = logging.getLogger(__name__)

DEAD_LETTER_SUFFIX = "/$deadletterqueue"
#: Owner of a lock that outlived its receiver (restored after a restart): it stays locked
#: until it expires, as in the service.
ORPHANED = object()


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class StoredMessage:
    """One message in one receiver entity. ``bare`` holds the encoded bare-message sections."""

    seq: int
    message_id: str | None
    session_id: str | None
    properties_raw: bytes
    app_properties: dict[Any, Any] | None
    app_properties_raw: bytes
    body_raw: bytes
    annotations: dict[Any, Any]
    header: list[Any]
    enqueued_ms: int
    delivery_count: int = 0
    lock_token: uuid.UUID | None = None
    locked_until_ms: int = 0
    owner: object | None = None
    deferred: bool = False
    #: Epoch ms at which a scheduled message becomes active (0: active since it was sent).
    scheduled_ms: int = 0
    #: The sender's delivery annotations, passed on to the receiver as the service does.
    delivery_annotations: dict[Any, Any] | None = None

    def copy_for(self, seq: int) -> StoredMessage:
        return StoredMessage(
            seq=seq,
            message_id=self.message_id,
            session_id=self.session_id,
            properties_raw=self.properties_raw,
            app_properties=dict(self.app_properties) if self.app_properties else None,
            app_properties_raw=self.app_properties_raw,
            body_raw=self.body_raw,
            annotations=dict(self.annotations),
            header=list(self.header),
            enqueued_ms=self.enqueued_ms,
            delivery_annotations=getattr(self, "delivery_annotations", None),
        )


@dataclass
class ReceiverEntity:
    """A queue, a subscription, or the dead-letter queue of one of them."""

    path: str
    config: ReceiverEntityConfig
    broker: Broker
    is_dead_letter: bool = False
    messages: dict[int, StoredMessage] = field(default_factory=dict)
    session_owners: dict[str, object] = field(default_factory=dict)
    #: Until when (epoch ms) each held session is locked: it lapses then unless renewed, as the
    #: service's session lock does (LockDuration).
    session_locked_until: dict[str, int] = field(default_factory=dict)
    session_state: dict[str, bytes | None] = field(default_factory=dict)
    #: When each session's state was last set (epoch ms): list sessions "updated after".
    session_updated_ms: dict[str, int] = field(default_factory=dict)
    dead_letter: ReceiverEntity | None = None
    last_seq: int = 0
    #: (when it expires, seq) of messages with a time to live: the sweep looks at what is due
    #: only, whatever the entity holds (entries of messages gone meanwhile are skipped).
    _expiries: list[tuple[int, int]] = field(default_factory=list)
    #: Sequence numbers of the entity's scheduled messages (a queue's).
    _scheduled: set[int] = field(default_factory=set)

    def next_seq(self) -> int:
        """Sequence numbers are per entity, as in the service."""
        self.last_seq += 1  # kept with the message; the store keeps it when a message goes
        return self.last_seq

    @property
    def key(self) -> str:
        return self.path.lower()

    @property
    def requires_session(self) -> bool:
        return self.config.requires_session and not self.is_dead_letter

    def enqueue(self, message: StoredMessage) -> None:
        self.put(message)
        self.broker.touch(self, message.seq)
        self.broker.changed()

    def put(self, message: StoredMessage) -> None:
        """Hold ``message`` (indexed for the sweep): a new one, or one restored at start."""
        self.messages[message.seq] = message
        if message.scheduled_ms:
            self._scheduled.add(message.seq)
        else:
            self._index_expiry(message)

    def _index_expiry(self, m: StoredMessage) -> None:
        expires = self._expires_at(m)
        if expires is not None:
            heapq.heappush(self._expiries, (expires, m.seq))
            if len(self._expiries) > 2 * len(self.messages) + 1024:
                # entries of messages settled meanwhile: rebuilt from what is held
                self._expiries = [(at, seq) for at, seq in self._expiries if seq in self.messages]
                heapq.heapify(self._expiries)

    def _available(self, m: StoredMessage) -> bool:
        return (
            m.owner is None
            and not m.deferred
            and not m.scheduled_ms
            and not self._expired(m, now_ms())
        )

    def _expires_at(self, m: StoredMessage) -> int | None:
        """When its time to live ends (epoch ms): the message's own (header ttl, ms) or the
        entity's default, whichever is shorter, counted from when it was enqueued."""
        if self.is_dead_letter:
            return None  # dead-lettered messages do not expire
        limits = []
        if isinstance(m.header[2], int) and m.header[2] > 0:
            limits.append(m.header[2])
        if self.config.default_ttl:
            limits.append(int(self.config.default_ttl * 1000))
        return m.enqueued_ms + min(limits) if limits else None

    def _expired(self, m: StoredMessage, now: int) -> bool:
        expires = self._expires_at(m)
        return expires is not None and expires <= now

    def expire_messages(self, now: int) -> None:
        """Expired messages that nobody holds leave: to the dead-letter queue when the entity
        says so (DeadLetteringOnMessageExpiration), otherwise they are dropped. A held one is
        looked at again at the next sweep."""
        held: list[tuple[int, int]] = []
        while self._expiries and self._expiries[0][0] <= now:
            _, seq = heapq.heappop(self._expiries)
            m = self.messages.get(seq)
            if m is None or m.scheduled_ms or not self._expired(m, now):
                continue  # gone, scheduled (indexed again when due), or enqueued anew
            if m.owner is not None:
                held.append((now + 1, seq))
                continue
            if self.config.dead_lettering_on_expiration:
                self.dead_letter_message(
                    m,
                    reason="TTLExpiredException",
                    description="The message expired and was dead lettered.",
                )
            else:
                self.messages.pop(m.seq, None)
                self.broker.touch(self, m.seq)
                self.broker.changed()
        for entry in held:
            heapq.heappush(self._expiries, entry)

    def next_due_ms(self) -> int | None:
        """When this entity's sweep work comes next (epoch ms): a session lock's end, a
        scheduled message's time, the first time to live to end; None: nothing timed."""
        dues = list(self.session_locked_until.values())
        for seq in self._scheduled:
            m = self.messages.get(seq)
            if m is not None and m.scheduled_ms:
                dues.append(m.scheduled_ms)
        if self._expiries:
            dues.append(self._expiries[0][0])
        return min(dues, default=None)

    def activate_due(self, now: int) -> None:
        """Scheduled messages whose time has come become active, enqueued at that time."""
        due = False
        for seq in list(self._scheduled):
            m = self.messages.get(seq)
            if m is None or not m.scheduled_ms:
                self._scheduled.discard(seq)
            elif m.scheduled_ms <= now:
                self._scheduled.discard(seq)
                m.enqueued_ms = m.scheduled_ms
                m.scheduled_ms = 0
                self._index_expiry(m)
                self.broker.touch(self, m.seq)
                due = True
        if due:
            self.broker.changed()

    def cancel_scheduled(self, seq: int) -> bool:
        m = self.messages.get(seq)
        if m is None or not m.scheduled_ms:
            return False
        self._scheduled.discard(seq)
        del self.messages[seq]
        self.broker.touch(self, seq)
        self.broker.changed()
        return True

    def acquire(
        self, owner: object, session_id: str | None, *, delete: bool
    ) -> StoredMessage | None:
        """Next available message for ``owner`` (FIFO; per session when ``session_id``)."""
        # The session test first: it is cheap, and a session's receiver skips every other
        # session's messages (the pump asks each receiver with credit after every frame).
        per_session = self.requires_session
        for m in self.messages.values():
            if per_session and m.session_id != session_id:
                continue
            if not self._available(m):
                continue
            if delete:
                del self.messages[m.seq]
                self.broker.touch(self, m.seq)
                return m
            m.owner = owner
            m.lock_token = uuid.uuid4()
            # a session's messages are locked by the session's lock
            m.locked_until_ms = (
                self.session_locked_until.get(session_id or "") or now_ms() + self.lock_ms
            )
            self.broker.locks[m.lock_token] = (self, m.seq)
            self.broker.touch(self, m.seq)
            return m
        return None

    @property
    def lock_ms(self) -> int:
        return int(self.config.lock_duration * 1000)

    def lock_session(self, session_id: str, owner: object) -> int:
        """``owner`` holds ``session_id`` from now for LockDuration: until when (epoch ms)."""
        self.session_owners[session_id] = owner
        until = now_ms() + self.lock_ms
        self.session_locked_until[session_id] = until
        return until

    def renew_session(self, session_id: str) -> int | None:
        """Renew a held session's lock (and its messages'): until when, or None if not held."""
        if session_id not in self.session_owners:
            return None
        until = now_ms() + self.lock_ms
        self.session_locked_until[session_id] = until
        for m in self.messages.values():
            if m.session_id == session_id and m.lock_token is not None:
                m.locked_until_ms = until
        return until

    def expire_sessions(self, now: int) -> list[object]:
        """Session locks that ran out: each session is free again, its locked messages
        available with DeliveryCount + 1 (a lost lock); their former owners."""
        lost: list[object] = []
        for sid, until in list(self.session_locked_until.items()):
            if until >= now:
                continue
            del self.session_locked_until[sid]
            owner = self.session_owners.pop(sid, None)
            if owner is None:
                continue
            logger.info("session lock expired on %s session %s", self.path, sid)
            for m in list(self.messages.values()):
                if m.session_id == sid and m.owner is owner:
                    self.release(m, count=True)
            lost.append(owner)
            self.broker.changed()
        return lost

    def next_free_session(self) -> str | None:
        for m in self.messages.values():
            if (
                m.session_id is not None
                and m.session_id not in self.session_owners
                and self._available(m)
            ):
                return m.session_id
        return None

    def by_lock(self, token: uuid.UUID) -> StoredMessage | None:
        entry = self.broker.locks.get(token)
        if entry is None or entry[0] is not self:
            return None
        m = self.messages.get(entry[1])
        if m is None or m.lock_token != token:
            return None
        return m

    def _unlock(self, m: StoredMessage) -> None:
        """Unlock a message that is settled, released, deferred or dead-lettered (each of which
        persists: it is recorded here)."""
        if m.lock_token is not None:
            self.broker.locks.pop(m.lock_token, None)
        m.lock_token = None
        m.owner = None
        m.locked_until_ms = 0
        self.broker.touch(self, m.seq)

    def complete(self, m: StoredMessage) -> None:
        self._unlock(m)
        self.messages.pop(m.seq, None)
        self.broker.changed()

    def release(self, m: StoredMessage, *, count: bool) -> None:
        """Make a locked message available again (abandon / lock expiry / released)."""
        self._unlock(m)
        if count:
            m.delivery_count += 1
            if m.delivery_count >= self.config.max_delivery_count and not self.is_dead_letter:
                self.dead_letter_message(
                    m,
                    reason="MaxDeliveryCountExceeded",
                    description=(
                        f"Message could not be consumed after {self.config.max_delivery_count}"
                        " delivery attempts."
                    ),
                )
                return
        self.broker.changed()

    def defer(self, m: StoredMessage) -> None:
        self._unlock(m)
        m.deferred = True
        self.broker.changed()

    def dead_letter_message(
        self, m: StoredMessage, *, reason: str | None, description: str | None
    ) -> None:
        self._unlock(m)
        self.messages.pop(m.seq, None)
        target = self.dead_letter
        if target is None:
            return
        copy = m.copy_for(target.next_seq())
        copy.delivery_count = m.delivery_count
        props = dict(copy.app_properties or {})
        if reason is not None:
            props["DeadLetterReason"] = reason
        if description is not None:
            props["DeadLetterErrorDescription"] = description
        copy.app_properties = props
        copy.app_properties_raw = b""  # re-encoded on delivery
        copy.annotations["x-opt-deadletter-source"] = self.path
        target.enqueue(copy)

    def release_owner(self, owner: object) -> None:
        """A receiver link went away. Its session locks end, and with them the locks on the
        session's messages; other message locks outlive the link until their expiry, as in
        the service (another receiver can still settle by lock token meanwhile)."""
        for m in list(self.messages.values()):
            if m.owner is not owner:
                continue
            if self.requires_session:
                self.release(m, count=True)
            else:
                m.owner = ORPHANED
        for sid, o in list(self.session_owners.items()):
            if o is owner:
                del self.session_owners[sid]
                self.session_locked_until.pop(sid, None)
        self.broker.changed()

    def expire_lock(self, m: StoredMessage, now: int) -> None:
        """A message lock that ran out: the message is available again, DeliveryCount + 1.
        Messages of a session stay locked while their session is (its lock lapses as a whole);
        in an entity without sessions (a dead-letter queue among them) a message's SessionId
        changes nothing: its lock runs out on its own. A lock restored from the state file
        (owner ORPHANED) runs out like any other."""
        if (
            m.owner is not None
            and (not self.requires_session or m.session_id is None or m.owner is ORPHANED)
            and m.locked_until_ms < now
        ):
            logger.info("lock expired on %s seq %s", self.path, m.seq)
            self.release(m, count=True)


SCHEDULED_ENQUEUE_TIME = "x-opt-scheduled-enqueue-time"
#: A sender entity's key among the sequence counters (a queue's receiver has the same name).
SENDER_PREFIX = "sender:"


@dataclass
class SenderEntity:
    """A topic (fan-out to subscriptions) or a queue (one receiver entity).

    A message with a scheduled enqueue time in the future waits: in the queue itself (peek
    shows it, state *scheduled*), or for a topic in the topic until it is due, then goes to
    each subscription. It keeps the sequence number given at scheduling, which cancels it.
    """

    config: SenderEntityConfig
    targets: list[ReceiverEntity]
    seen: OrderedDict[str, float] = field(default_factory=OrderedDict)
    scheduled: dict[int, StoredMessage] = field(default_factory=dict)
    last_seq: int = 0

    def is_duplicate(self, message_id: str | None) -> bool:
        if not self.config.requires_duplicate_detection or message_id is None:
            return False
        now = time.time()  # wall clock: the history outlives a restart (state file)
        # The history is in the order of its expiries (one window per entity, ids appended as
        # they come): what expired is at its front, so a send drops only what expired since the
        # last one, whatever the history holds (a 1-day window keeps a day of ids).
        seen = self.seen
        while seen:
            first = next(iter(seen))
            if seen[first] >= now:
                break
            seen.popitem(last=False)
        expiry = seen.get(message_id)
        if expiry is not None and expiry >= now:
            return True
        seen.pop(message_id, None)  # an expired one kept behind a later expiry: sent anew
        seen[message_id] = now + self.config.duplicate_window
        if self.targets:
            self.targets[0].broker.record_seen(self.key, message_id, seen[message_id])
        return False

    @property
    def key(self) -> str:
        return self.config.name.lower()

    @property
    def requires_session(self) -> bool:
        return any(t.requires_session for t in self.targets)

    def accept(self, m: StoredMessage) -> int | None:
        """Take one sent message; its sequence number when it was scheduled, None when it was
        enqueued now or dropped as a duplicate."""
        if self.is_duplicate(m.message_id):
            logger.info("duplicate message id %s dropped", m.message_id)
            return None
        due = m.annotations.get(SCHEDULED_ENQUEUE_TIME)
        if isinstance(due, int) and due > now_ms():
            return self.schedule(m, due)
        self.fan_out(m)
        return None

    def schedule(self, m: StoredMessage, due_ms: int) -> int:
        if self.config.is_queue:
            queue = self.targets[0]
            copy = m.copy_for(queue.next_seq())
            copy.scheduled_ms = due_ms
            queue.enqueue(copy)
            return copy.seq
        self.last_seq += 1
        copy = m.copy_for(self.last_seq)
        copy.scheduled_ms = due_ms
        self.scheduled[copy.seq] = copy
        if self.targets:
            broker = self.targets[0].broker
            broker.touch_scheduled(self.key, copy.seq)
            broker.touch_counter(f"{SENDER_PREFIX}{self.key}")
            broker.changed()
        return copy.seq

    def fan_out(self, m: StoredMessage) -> None:
        """A copy to each subscription whose rules take it (any rule matches, or it has none)."""
        facts: Facts | None = None
        for target in self.targets:
            if target.config.receives_nothing:
                continue
            if target.config.rules:
                facts = facts or Facts.of(m.properties_raw, m.app_properties)
                if not accepts(target.config.rules, facts):
                    continue
            target.enqueue(m.copy_for(target.next_seq()))

    def cancel(self, seq: int) -> bool:
        if self.config.is_queue:
            return bool(self.targets) and self.targets[0].cancel_scheduled(seq)
        if self.targets:
            self.targets[0].broker.touch_scheduled(self.key, seq)
        return self.scheduled.pop(seq, None) is not None

    def activate_due(self, now: int) -> None:
        for seq, m in list(self.scheduled.items()):
            if m.scheduled_ms <= now:
                del self.scheduled[seq]
                if self.targets:
                    self.targets[0].broker.touch_scheduled(self.key, seq)
                m.enqueued_ms = m.scheduled_ms
                m.scheduled_ms = 0
                self.fan_out(m)


@dataclass
class Changes:
    """Keys of what changed since the store last wrote."""

    messages: set[tuple[str, int]] = field(default_factory=set)  # (receiver key, seq)
    scheduled: set[tuple[str, int]] = field(default_factory=set)  # (sender key, seq)
    counters: set[str] = field(default_factory=set)  # receiver key, or SENDER_PREFIX + key
    sessions: set[tuple[str, str]] = field(default_factory=set)  # (receiver key, session id)
    seen: list[tuple[str, str, float]] = field(default_factory=list)  # (sender key, id, expiry)
    dropped: set[str] = field(default_factory=set)  # entities gone, with what they held

    def __bool__(self) -> bool:
        return bool(
            self.messages
            or self.scheduled
            or self.counters
            or self.sessions
            or self.seen
            or self.dropped
        )


class Broker:
    """All entities of the namespace."""

    def __init__(self, config: NamespaceConfig) -> None:
        self.namespace = config.name
        self.tier = config.tier
        self.senders: dict[str, SenderEntity] = {}
        self.receivers: dict[str, ReceiverEntity] = {}
        self.locks: dict[uuid.UUID, tuple[ReceiverEntity, int]] = {}
        self._seq = 0
        self.on_change: Callable[[], None] = lambda: None
        #: Called with a queue's or a topic's name and the ids of the entities it took with it
        #: (its subscriptions', its dead-letter queues') when it is deleted or replaced: the
        #: server ends the links attached to them.
        self.on_removed: Callable[[str, set[int]], None] = lambda name, gone: None
        #: What changed since the store last wrote, by key (kept only with a store attached).
        self.recording = False
        self.changes = Changes()
        for entity in config.entities:
            self.add_entity(entity)

    def add_entity(self, entity: SenderEntityConfig) -> None:
        """Create a queue or a topic (with its subscriptions); an existing one is replaced."""
        self.remove_entity(entity.name)
        targets: list[ReceiverEntity] = []
        for sub in entity.subscriptions:
            targets.append(self._add_receiver(entity, sub))
        self.senders[entity.name.lower()] = SenderEntity(config=entity, targets=targets)

    def add_subscription(self, topic: str, sub: ReceiverEntityConfig) -> None:
        sender = self.sender(topic)
        if sender is None or sender.config.is_queue:
            raise KeyError(topic)
        sender.config.subscriptions.append(sub)
        sender.targets.append(self._add_receiver(sender.config, sub))

    def _add_receiver(
        self, entity: SenderEntityConfig, sub: ReceiverEntityConfig
    ) -> ReceiverEntity:
        path = entity.name if entity.is_queue else f"{entity.name}/Subscriptions/{sub.name}"
        if entity.default_ttl and (sub.default_ttl is None or entity.default_ttl < sub.default_ttl):
            # a topic's DefaultMessageTimeToLive bounds its subscriptions'
            sub = dataclasses.replace(sub, default_ttl=entity.default_ttl)
        receiver = ReceiverEntity(path=path, config=sub, broker=self)
        dlq = ReceiverEntity(
            path=path + "/$DeadLetterQueue", config=sub, broker=self, is_dead_letter=True
        )
        receiver.dead_letter = dlq
        self.receivers[path.lower()] = receiver
        self.receivers[dlq.path.lower()] = dlq
        return receiver

    def remove_entity(self, name: str) -> bool:
        """Delete a queue or a topic with its subscriptions and dead-letter queues."""
        sender = self.senders.pop(name.lower(), None)
        if sender is None:
            return False
        if self.recording:
            self.changes.dropped.add(f"{SENDER_PREFIX}{sender.key}")
        gone = {id(sender)}
        for target in sender.targets:
            for receiver in (target, target.dead_letter):
                if receiver is not None:
                    gone.add(id(receiver))
                    self.receivers.pop(receiver.path.lower(), None)
                    if self.recording:
                        self.changes.dropped.add(receiver.key)
        self.on_removed(sender.config.name, gone)
        return True

    # ---- what persists: recorded by key, written by _state.Store -------------------------
    def touch(self, entity: ReceiverEntity, seq: int) -> None:
        if self.recording:
            self.changes.messages.add((entity.key, seq))

    def touch_scheduled(self, sender_key: str, seq: int) -> None:
        if self.recording:
            self.changes.scheduled.add((sender_key, seq))

    def touch_counter(self, key: str) -> None:
        if self.recording:
            self.changes.counters.add(key)

    def touch_session(self, entity: ReceiverEntity, session_id: str) -> None:
        if self.recording:
            self.changes.sessions.add((entity.key, session_id))

    def record_seen(self, sender_key: str, message_id: str, expiry: float) -> None:
        if self.recording:
            self.changes.seen.append((sender_key, message_id, expiry))

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def changed(self) -> None:
        self.on_change()

    def sender(self, path: str) -> SenderEntity | None:
        return self.senders.get(path.lower())

    def receiver(self, path: str) -> ReceiverEntity | None:
        return self.receivers.get(path.lower())

    def next_due_ms(self) -> int | None:
        """When ``expire_locks`` has work next (epoch ms): a message lock's end, a scheduled
        message's time, a session lock's end, a time to live's end; None: nothing timed."""
        dues = [m.scheduled_ms for s in self.senders.values() for m in s.scheduled.values()]
        for entity, seq in self.locks.values():
            m = entity.messages.get(seq)
            if m is not None and m.owner is not None:
                dues.append(m.locked_until_ms)
        for entity in self.receivers.values():
            due = entity.next_due_ms()
            if due is not None:
                dues.append(due)
        return min(dues, default=None)

    def expire_locks(self) -> list[object]:
        """Runs when something is due (``next_due_ms``), at most a few times a second: locks
        run out (the owners of the session locks that did are returned: their links lose their
        sessions), scheduled messages come due, messages past their time to live leave."""
        now = now_ms()
        lost: list[object] = []
        for sender in list(self.senders.values()):
            sender.activate_due(now)
        for entity, seq in list(self.locks.values()):  # the locked messages only
            m = entity.messages.get(seq)
            if m is not None:
                entity.expire_lock(m, now)
        for entity in list(self.receivers.values()):
            lost += entity.expire_sessions(now)
            entity.activate_due(now)
            entity.expire_messages(now)
        return lost
