"""Keep the broker's state across restarts in one file (``--state-file``): undelivered and
deferred messages with their delivery counts, locks with their expiry, per-entity sequence
numbers, session state, scheduled messages (in queues and held by topics) and the
duplicate-detection history.

Written atomically (temp file + rename) at most once a second while something changed, and at
shutdown; a crash loses at most the last second. The file is this endpoint's own, read back
only by it (pickle of plain data).
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
from pathlib import Path
from typing import Any

from funcstack.servicebus._broker import ORPHANED, Broker, now_ms

logger = logging.getLogger(__name__)
VERSION = 1


def snapshot(broker: Broker) -> dict[str, Any]:
    now = now_ms()
    receivers: dict[str, Any] = {}
    for key, entity in broker.receivers.items():
        messages = []
        for m in entity.messages.values():
            locked = m.owner is not None and m.locked_until_ms > now and not entity.requires_session
            messages.append(dataclasses.replace(
                m, owner=None, lock_token=m.lock_token if locked else None,
                locked_until_ms=m.locked_until_ms if locked else 0,
            ))
        receivers[key] = {
            "last_seq": entity.last_seq, "messages": messages,
            "session_state": dict(entity.session_state),
        }
    senders = {key: dict(sender.seen) for key, sender in broker.senders.items()}
    scheduled = {
        key: {"last_seq": sender.last_seq, "messages": list(sender.scheduled.values())}
        for key, sender in broker.senders.items()
        if sender.last_seq
    }
    return {"version": VERSION, "receivers": receivers, "senders": senders,
            "scheduled": scheduled}


def save(broker: Broker, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(pickle.dumps(snapshot(broker)))
    tmp.replace(path)


def load(broker: Broker, path: Path) -> None:
    """Restore what the file holds for the entities that exist now (others are dropped)."""
    if not path.exists():
        return
    try:
        data = pickle.loads(path.read_bytes())  # noqa: S301 - our own state file
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        logger.warning("state file %s unreadable (%s): starting empty", path, exc)
        return
    if data.get("version") != VERSION:
        logger.warning("state file %s has another version: starting empty", path)
        return
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
            entity.messages[m.seq] = m
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
    logger.info("restored %d messages from %s", restored, path)
