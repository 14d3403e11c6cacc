"""How events are numbered: one decision for the whole write path.

An event's number (its `version`) is its place in its stream, 1, 2, 3, ... with no gap and no
repeat; a stream is one aggregate's events, or the events a transaction publishes for one entity
and session id. The stream's **head** (the number of its last event) is a document of the
stream's partition written in the same batch as the events, created when the stream is new and
else replaced on the condition of the etag it was read with (`head_operation`): of two writers
racing on one stream only one commits, so no two events ever take one number, and a batch that
fails writes no number at all (no gap).

- **An aggregate** is its own stream's head: its document, whose `version` is the number of its
  last event (`Aggregate.record` numbers an event as it is recorded, from the version the
  aggregate was read at). A stale head is the app's concern: PreconditionFailedError (412).
- **A transaction's** stream has a sequence document (`outboxSequence`: `next`, the number its
  next event takes) from which it numbers its events at commit (`numbered`). A process remembers
  the sequences it wrote last (`Sequences`), so a commit needs no read; when another process
  wrote since, the batch is refused at the head, the sequence is read (`read_head`) and the same
  batch sent again: a stale head is the outbox's own concern, never the app's.

**A scheduled event takes no number**: its `version` is 0 (`cosmos_outbox._mapper`: it has a
due time), it is delivered when due, which may be long after the events numbered after it, and
a subscriber must never hold those behind it. It moves no head: a transaction that publishes only
scheduled events writes no sequence, and an aggregate's version does not move for one.

Why two holders of one rule, and not one sequence for both: an aggregate's version is part of
its state (the etag that guards a change guards its numbering with it, at no cost) and it is
what subscribers order by; a transaction has no state of the outbox's to number from. The stored
documents and the messages are those of 0.3 (README "Versioning").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeAlias

from cosmos_outbox._mapper import scheduled, stamp
from cosmos_outbox.ports import AsyncBatchStore, BatchOperation

__all__ = [
    "SEQUENCE_TYPE",
    "Head",
    "Sequences",
    "head_operation",
    "numbered",
    "read_head",
    "sequence_document",
    "sequence_id",
]

SEQUENCE_TYPE = "outboxSequence"
#: How many transactions' sequences a process remembers.
_CACHED_SEQUENCES = 10_000
#: A stream's head as last known: the number of its last event and the head document's etag.
Head: TypeAlias = tuple[int, str]
#: Which transaction's stream a sequence is: (entity, session id).
Stream: TypeAlias = tuple[str, str]


def head_operation(document: dict[str, Any], known: str | None) -> BatchOperation:
    """The write of a stream's head: its create when the stream is new (`known` None), else its
    replace on the condition of the etag it was read with."""
    if known is None:
        return BatchOperation("create", document)
    return BatchOperation("replace", document, if_match=known)


def sequence_id(entity: str, session_id: str) -> str:
    return f"outbox-sequence-{entity}-{session_id}"


def sequence_document(partition_key: str, stream: Stream, last: int, events: int) -> dict[str, Any]:
    """A transaction's sequence after `events` more events, its last one `last` before:

    {"id": "outbox-sequence-<entity>-<session id>", "partitionKey", "type": "outboxSequence",
     "entity", "sessionId", "next": <the number the next event takes>, "ttl": -1}"""
    entity, session_id = stream
    return {
        "id": sequence_id(entity, session_id),
        "partitionKey": partition_key,
        "type": SEQUENCE_TYPE,
        "entity": entity,
        "sessionId": session_id,
        "next": last + events + 1,
        "ttl": -1,
    }


def numbered(events: Iterable[dict[str, Any]], after: int, at: str) -> list[BatchOperation]:
    """A transaction's events as the creates of its batch, each given its number, `after` + 1
    on (a scheduled event none: 0), and its time."""
    creates = []
    version = after
    for event in events:
        if scheduled(event):
            stamp(event, 0, at)
        else:
            version += 1
            stamp(event, version, at)
        creates.append(BatchOperation("create", event))
    return creates


class Sequences:
    """The heads of the sequences this process wrote last (a transaction's streams), by stream.
    Emptied when it holds `_CACHED_SEQUENCES` (a stream's next commit then reads its sequence:
    one read). Without a lock: each call is one or two operations on a dict, and a lost race
    costs at most such a read; the etag keeps the numbering right."""

    def __init__(self) -> None:
        self._known: dict[Stream, Head] = {}

    def get(self, stream: Stream) -> Head | None:
        return self._known.get(stream)

    def put(self, stream: Stream, head: Head) -> None:
        known = self._known
        if len(known) >= _CACHED_SEQUENCES and stream not in known:
            known.clear()
        known[stream] = head

    def forget(self, stream: Stream) -> None:
        self._known.pop(stream, None)


async def read_head(
    store: AsyncBatchStore, partition_key: str, stream: Stream, sequences: Sequences
) -> Head | None:
    """A transaction's stream's head as stored now (remembered in `sequences`); None for a new
    stream."""
    document = await store.read(partition_key, sequence_id(*stream))
    if document is None:
        sequences.forget(stream)
        return None
    head = (int(document["next"]) - 1, str(document["_etag"]))
    sequences.put(stream, head)
    return head
