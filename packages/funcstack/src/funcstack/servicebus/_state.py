"""What the local Service Bus endpoint keeps across a restart (``--state-file``), and when it is
written: before the endpoint acknowledges it.

Kept: messages waiting in each queue, subscription and dead-letter queue (deferred and scheduled
ones too, with their delivery counts, and a message lock with its expiry), messages a topic holds
scheduled, every entity's sequence numbers, session state, and the duplicate-detection history.
Not kept: links, sessions' locks (a session's messages are free again after a restart, as after
a lost session lock), nothing else.

Durable before acknowledged, as Service Bus is: a message is written before the ``accepted``
disposition goes to its sender, a settlement before its echo (or the ``$management`` answer),
anything else (a delivery's lock, an expiry) as soon as the event loop is free. The file is a
SQLite database (Python's standard library) in WAL mode with ``synchronous=NORMAL``: each write
is one transaction of the rows that changed (the broker records them by key: ``_broker.Changes``),
so its cost does not depend on how much is kept (measured: 40-70 µs a transaction with 0 or
100,000 messages kept; docs/servicebus.md has the figures and why not a journal). A write is in
the operating system's hands when it returns, so a SIGKILL of the endpoint loses nothing it
acknowledged; an operating-system crash or power loss may lose the last transactions (no fsync
per write: that would cost 1-3 ms each).

A state file of the earlier format (one pickle of the whole broker, written at most once a
second) is read once and converted. The file is this endpoint's own.
"""

from __future__ import annotations

import logging
import pickle
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from funcstack.servicebus._broker import (
    ORPHANED,
    SENDER_PREFIX,
    Broker,
    Changes,
    ReceiverEntity,
    StoredMessage,
    now_ms,
)

logger = logging.getLogger(__name__)

#: 3: messages' annotations and properties as python-qpid-proton decodes them (symbols and
#: strings as str, keeping their AMQP types); 2: as azure-servicebus' codec did (bytes); 1: a
#: pickle of the whole broker. A file of another format is started empty, saying so.
SCHEMA_VERSION = 3
#: Seconds between two sweeps of expired duplicate-detection entries from the file.
SEEN_SWEEP_SECONDS = 60.0
_SQLITE_MAGIC = b"SQLite format 3\x00"

#: Rows with a message (a kilobyte or more) in rowid tables: in a WITHOUT ROWID table such a row
#: overflows to a page of its own (measured: 4 KB a message kept instead of 1.4 KB).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    entity TEXT, seq INTEGER, data BLOB, PRIMARY KEY (entity, seq));
CREATE TABLE IF NOT EXISTS scheduled (
    entity TEXT, seq INTEGER, data BLOB, PRIMARY KEY (entity, seq));
CREATE TABLE IF NOT EXISTS counters (entity TEXT PRIMARY KEY, last_seq INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    entity TEXT, session_id TEXT, state BLOB, updated_ms INTEGER,
    PRIMARY KEY (entity, session_id));
CREATE TABLE IF NOT EXISTS seen (
    entity TEXT, message_id TEXT, expiry REAL, PRIMARY KEY (entity, message_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS seen_by_expiry ON seen (expiry);
"""


_OWNER = list(vars(StoredMessage(0, None, None, b"", None, b"", b"", {}, [], 0))).index("owner")


def _dump(m: StoredMessage) -> bytes:
    """The message's fields in their order (SCHEMA_VERSION names the order)."""
    fields = list(vars(m).values())
    fields[_OWNER] = None  # a link: not kept (a lock restored is ORPHANED's)
    return pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)


def _load(data: bytes) -> StoredMessage:
    return StoredMessage(*pickle.loads(data))  # noqa: S301 - our own state file


class Store:
    """The endpoint's state file: restored once at start, then written change by change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        legacy = _read_legacy(path)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # checkpoints (the WAL copied into the database, then an fsync) are the checkpointer
        # thread's, off the event loop: a write only appends to the WAL
        self._db.execute("PRAGMA wal_autocheckpoint=0")
        self._db.executescript(_SCHEMA)
        version = self._db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        if version is not None and version[0] != str(SCHEMA_VERSION):
            logger.warning(
                "state file %s has format %s, not %s: starting empty",
                path,
                version[0],
                SCHEMA_VERSION,
            )
            for table in ("messages", "scheduled", "counters", "sessions", "seen"):
                self._db.execute(f"DELETE FROM {table}")  # noqa: S608 - our table names
        self._db.execute(
            "INSERT OR REPLACE INTO meta VALUES ('version', ?)", (str(SCHEMA_VERSION),)
        )
        self._legacy = legacy
        self._seen_swept = time.monotonic()
        self._stop = threading.Event()
        #: set by each write (``flush``), and by ``close``: the checkpointer's wake-up
        self._written = threading.Event()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_every, args=(1.0,), name="servicebus-checkpoint", daemon=True
        )
        self._checkpointer.start()
        self.writes = 0

    def _checkpoint_every(self, seconds: float) -> None:
        """Copy the WAL into the database at most every ``seconds`` after a write, from a
        connection of its own (a PASSIVE checkpoint never blocks the writer; sqlite3 releases
        the GIL meanwhile); asleep while nothing is written."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while not self._stop.wait(seconds):
                self._written.wait()
                self._written.clear()
                if self._stop.is_set():
                    break
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:  # busy now: the next round
                    logger.debug("state file checkpoint deferred: %s", exc)
        finally:
            db.close()

    def close(self) -> None:
        """Stop the checkpointer; the WAL goes into the database, and the file is closed."""
        self._stop.set()
        self._written.set()
        self._checkpointer.join(timeout=30)
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()

    # ---- at start ------------------------------------------------------------------------
    def restore(self, broker: Broker) -> int:
        """Restore what the file holds for the entities that exist now (the rows of others are
        deleted), then record every later change; how many messages were restored."""
        if self._legacy is not None:
            restored = _restore_legacy(broker, self._legacy)
            aside = self._legacy.get("_aside")
            self._legacy = None
            broker.recording = True
            _mark_everything(broker)
            self.flush(broker)
            if isinstance(aside, Path):
                aside.unlink(missing_ok=True)  # converted: the old file has served
            logger.info(
                "converted the state file %s (%d messages) to the current format",
                self.path,
                restored,
            )
            return restored
        restored = self._restore(broker)
        broker.recording = True
        return restored

    def _restore(self, broker: Broker) -> int:
        db, now = self._db, now_ms()
        receivers, senders = broker.receivers, broker.senders
        known = set(receivers) | {f"{SENDER_PREFIX}{key}" for key in senders} | set(senders)
        with _transaction(db):
            for table in ("messages", "scheduled", "counters", "sessions", "seen"):
                for (entity,) in db.execute(f"SELECT DISTINCT entity FROM {table}").fetchall():  # noqa: S608
                    if entity not in known:
                        db.execute(f"DELETE FROM {table} WHERE entity = ?", (entity,))  # noqa: S608
            db.execute("DELETE FROM seen WHERE expiry < ?", (time.time(),))
        for entity, last_seq in db.execute("SELECT entity, last_seq FROM counters"):
            if entity.startswith(SENDER_PREFIX):
                sender = senders.get(entity.removeprefix(SENDER_PREFIX))
                if sender is not None:
                    sender.last_seq = last_seq
            elif entity in receivers:
                receivers[entity].last_seq = last_seq
        restored = 0
        for entity, data in db.execute("SELECT entity, data FROM messages ORDER BY entity, seq"):
            receiver = receivers.get(entity)
            if receiver is None:
                continue
            m = _load(data)
            _restore_message(broker, receiver, m, now)
            receiver.last_seq = max(receiver.last_seq, m.seq)
            restored += 1
        for entity, data in db.execute("SELECT entity, data FROM scheduled ORDER BY entity, seq"):
            sender = senders.get(entity)
            if sender is not None:
                m = _load(data)
                sender.scheduled[m.seq] = m
                restored += 1
        for entity, session_id, state, updated in db.execute("SELECT * FROM sessions"):
            receiver = receivers.get(entity)
            if receiver is not None:
                receiver.session_state[session_id] = state
                if updated:
                    receiver.session_updated_ms[session_id] = updated
        for entity, message_id, expiry in db.execute(
            "SELECT entity, message_id, expiry FROM seen ORDER BY expiry"
        ):
            sender = senders.get(entity)
            if sender is not None:
                sender.seen[message_id] = expiry
        logger.info("restored %d messages from %s", restored, self.path)
        return restored

    # ---- as the broker changes -----------------------------------------------------------
    def flush(self, broker: Broker) -> None:
        """Write what changed since the last write, in one transaction (nothing when nothing
        did). Called before the endpoint acknowledges a change."""
        changes = broker.changes
        if not changes:
            return
        broker.changes = Changes()
        db = self._db
        with _transaction(db):
            for entity in changes.dropped:
                for table in ("messages", "scheduled", "counters", "sessions", "seen"):
                    db.execute(f"DELETE FROM {table} WHERE entity = ?", (entity,))  # noqa: S608
                    if entity.startswith(SENDER_PREFIX):
                        db.execute(
                            f"DELETE FROM {table} WHERE entity = ?",  # noqa: S608
                            (entity.removeprefix(SENDER_PREFIX),),
                        )
            upserts: list[tuple[str, int, bytes]] = []
            deletes: list[tuple[str, int]] = []
            for key, seq in changes.messages:
                receiver = broker.receivers.get(key)
                m = receiver.messages.get(seq) if receiver is not None else None
                if m is None:
                    deletes.append((key, seq))
                else:
                    upserts.append((key, seq, _dump(m)))
            if deletes:
                db.executemany("DELETE FROM messages WHERE entity = ? AND seq = ?", deletes)
                # an entity's sequence number is its last message's; once a message is gone,
                # the counter keeps it (a send writes its message only)
                changes.counters.update(key for key, _ in deletes)
            if upserts:
                db.executemany("INSERT OR REPLACE INTO messages VALUES (?, ?, ?)", upserts)
            for key, seq in changes.scheduled:
                sender = broker.senders.get(key)
                m = sender.scheduled.get(seq) if sender is not None else None
                if m is None:
                    db.execute("DELETE FROM scheduled WHERE entity = ? AND seq = ?", (key, seq))
                else:
                    db.execute(
                        "INSERT OR REPLACE INTO scheduled VALUES (?, ?, ?)", (key, seq, _dump(m))
                    )
            for key in changes.counters:
                last = _last_seq(broker, key)
                if last is not None:
                    db.execute("INSERT OR REPLACE INTO counters VALUES (?, ?)", (key, last))
            for key, session_id in changes.sessions:
                receiver = broker.receivers.get(key)
                if receiver is not None:
                    db.execute(
                        "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?)",
                        (
                            key,
                            session_id,
                            receiver.session_state.get(session_id),
                            receiver.session_updated_ms.get(session_id),
                        ),
                    )
            if changes.seen:
                db.executemany("INSERT OR REPLACE INTO seen VALUES (?, ?, ?)", changes.seen)
            if time.monotonic() - self._seen_swept > SEEN_SWEEP_SECONDS:
                self._seen_swept = time.monotonic()
                db.execute("DELETE FROM seen WHERE expiry < ?", (time.time(),))
        self.writes += 1
        self._written.set()  # the WAL grew: the checkpointer copies it within a second


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """BEGIN ... COMMIT (ROLLBACK on an error) on an autocommit connection."""
    db.execute("BEGIN")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _last_seq(broker: Broker, key: str) -> int | None:
    if key.startswith(SENDER_PREFIX):
        sender = broker.senders.get(key.removeprefix(SENDER_PREFIX))
        return sender.last_seq if sender is not None else None
    receiver = broker.receivers.get(key)
    return receiver.last_seq if receiver is not None else None


def _restore_message(broker: Broker, entity: ReceiverEntity, m: StoredMessage, now: int) -> None:
    """A message as kept: a lock that outlives the restart stays until its expiry (nobody holds
    it: another receiver can settle it by its token); a session's lock does not."""
    if m.lock_token is not None and m.locked_until_ms > now and not entity.requires_session:
        m.owner = ORPHANED
        broker.locks[m.lock_token] = (entity, m.seq)
    else:
        m.lock_token, m.owner, m.locked_until_ms = None, None, 0
    entity.put(m)


def _mark_everything(broker: Broker) -> None:
    """Record the whole broker as changed (a converted state file is written whole)."""
    changes = broker.changes
    for key, receiver in broker.receivers.items():
        changes.counters.add(key)
        changes.messages.update((key, seq) for seq in receiver.messages)
        changes.sessions.update((key, sid) for sid in receiver.session_state)
    for key, sender in broker.senders.items():
        changes.counters.add(f"{SENDER_PREFIX}{key}")
        changes.scheduled.update((key, seq) for seq in sender.scheduled)
        changes.seen.extend((key, message_id, expiry) for message_id, expiry in sender.seen.items())


# ---- the earlier format: read once, converted -------------------------------------------------


def _read_legacy(path: Path) -> dict[str, Any] | None:
    """The earlier state file (a pickle of the whole broker, format 1): its data, and the file
    moved out of the way; None when ``path`` is absent or already a database."""
    if not path.is_file():
        return None
    with path.open("rb") as file:
        head = file.read(len(_SQLITE_MAGIC))
    if head == _SQLITE_MAGIC or not head:
        return None
    data: Any
    try:
        data = pickle.loads(path.read_bytes())  # noqa: S301 - our own state file
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError) as exc:
        logger.warning("state file %s unreadable (%s): starting empty", path, exc)
        data = None
    if not isinstance(data, dict) or data.get("version") != 1:
        if data is not None:
            logger.warning("state file %s has another version: starting empty", path)
        data = None
    aside = path.with_name(path.name + ".v1")
    path.replace(aside)  # the database takes its name; the old file goes once converted
    if data is None:
        aside.unlink(missing_ok=True)
        return None
    legacy: dict[str, Any] = data
    legacy["_aside"] = aside
    return legacy


def _restore_legacy(broker: Broker, data: dict[str, Any]) -> int:
    """Restore a format-1 state file for the entities that exist now (others are dropped)."""
    restored = 0
    for key, saved in data["receivers"].items():
        entity = broker.receivers.get(key)
        if entity is None:
            continue
        entity.last_seq = saved["last_seq"]
        entity.session_state.update(saved["session_state"])
        for m in saved["messages"]:
            if m.lock_token is not None:
                m.owner = ORPHANED
                broker.locks[m.lock_token] = (entity, m.seq)
            entity.put(m)
            restored += 1
    for key, seen in data["senders"].items():
        sender = broker.senders.get(key)
        if sender is not None:
            # oldest expiry first: the order the history is pruned in
            sender.seen.update(sorted(seen.items(), key=lambda item: item[1]))
    for key, saved in data.get("scheduled", {}).items():
        sender = broker.senders.get(key)
        if sender is not None:
            sender.last_seq = saved["last_seq"]
            sender.scheduled.update((m.seq, m) for m in saved["messages"])
            restored += len(saved["messages"])
    return restored
