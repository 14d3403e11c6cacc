"""A transactional batch, assembled: the one place both doors of the write path (a transaction's
commit, a unit of work's commit of an aggregate) put their writes in order and have Cosmos DB's
limits checked before the round trip.

    [your operations ...] [the stream's head] [its events ...] [the Idempotency-Key's record]

- **The order**: the caller's own operations (a transaction's documents; none for an
  aggregate), then the head of the stream its events are numbered in (an aggregate's document, a
  transaction's sequence: `cosmos_outbox._write.streams`), the events, and the key's record.
  The index of the head is kept: a conflict there is the stream moving on (`at_head`).
- **The limits** (Cosmos DB's transactional batch): at most 100 operations and 2 MB of request,
  as the SDK sends it (compact JSON, a character outside ASCII escaped). They are checked here
  only (`check`), before the round trip: BatchTooLargeError, nothing written. The size is kept as
  a bound (`bound`, counted by the caller as it staged: `json_bytes`, `escaped_at_most`,
  `envelope_at_most`), and the batch is measured only when the bound could be over the limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii
from typing import Any

from cosmos_outbox.errors import BatchTooLargeError, OutboxError
from cosmos_outbox.ports import AsyncBatchStore, BatchOperation

__all__ = [
    "CHARACTER_BYTES",
    "ENVELOPE_BYTES",
    "MAX_BATCH_BYTES",
    "MAX_OPERATIONS",
    "Batch",
    "envelope_at_most",
    "escaped_at_most",
    "json_bytes",
    "text_at_most",
]

#: A transactional batch's limits (Cosmos DB): operations, and bytes of the request.
MAX_OPERATIONS = 100
MAX_BATCH_BYTES = 2 * 1024 * 1024
#: JSON as the SDK sends a batch: compact, a character outside ASCII escaped (`\u00e9`), its
#: default; what a batch's size is measured in. (A client made to send item writes as compact
#: UTF-8 sends no more than that.) NaN and the infinities are not JSON: Cosmos DB refuses them.
#: No circular reference check: a document that holds itself fails with RecursionError.
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False, check_circular=False)
#: The most bytes a character of a string takes in the SDK's JSON: one outside the Basic
#: Multilingual Plane is two escapes (`\ud83d\ude00`).
CHARACTER_BYTES = 12
#: What an outbox document (an event's envelope, a sequence, a record) holds besides its
#: strings: the keys, two ids, a time, the numbers.
ENVELOPE_BYTES = 512


def json_bytes(value: Any, what: str, name: object = None) -> int:
    """At most how many bytes `value` is as the SDK sends it (compact JSON, in ASCII), checked to
    be JSON as `json` checks it (the SDK's serialiser): a value that is not is refused, naming
    `what` (and `name`), TypeError. A bound, not a measure (`_at_most`): what is staged is
    counted without being serialised (json's public encoder builds its C encoder anew on every
    call, more than the rest of staging a small document), and a batch whose bound passes the
    limit is measured (`Batch.check`)."""
    try:
        return _at_most(value)
    except (TypeError, ValueError, RecursionError) as exc:
        named = what if name is None else f"{what} {name!r}"
        raise TypeError(f"{named} is not JSON: {exc}") from None


#: Below this many characters a string is counted at its longest escape (`CHARACTER_BYTES` a
#: character) without being escaped; a longer one is escaped and counted exactly.
_SHORT = 64
#: The longest an integer of 64 bits, or a float (`float.__repr__`), is in JSON.
_NUMBER_BYTES = 24
_LARGEST = 10**19


def _at_most(value: Any) -> int:
    """At most how many bytes `value` is in compact ASCII JSON; TypeError or ValueError as
    `json.JSONEncoder(allow_nan=False)` raises them for a value it refuses (RecursionError for
    one that holds itself). A dict's and a list's items are counted in the loop, their strings
    and numbers without a call."""
    kind = type(value)
    if kind is dict or (kind is not str and isinstance(value, dict)):
        # the braces, then a colon and a comma (one fewer, counted anyway) an item
        total = 2 + 2 * len(value)
        for key, item in value.items():
            if type(key) is str:
                total += CHARACTER_BYTES * len(key) + 2 if len(key) < _SHORT else _text(key)
            else:
                total += _key(key)
            itemkind = type(item)
            if itemkind is str:
                total += CHARACTER_BYTES * len(item) + 2 if len(item) < _SHORT else _text(item)
            elif itemkind is int and -_LARGEST < item < _LARGEST:
                total += _NUMBER_BYTES
            else:
                total += _at_most(item)
        return total
    if kind is list or kind is tuple or (kind is not str and isinstance(value, (list, tuple))):
        # the brackets, a comma an item (one fewer, counted anyway)
        return 2 + len(value) + sum(map(_at_most, value))
    if kind is str or isinstance(value, str):
        return CHARACTER_BYTES * len(value) + 2 if len(value) < _SHORT else _text(value)
    if value is None or value is True or value is False:
        return 5
    if isinstance(value, int):
        return _NUMBER_BYTES if -_LARGEST < value < _LARGEST else len(int.__repr__(value))
    if isinstance(value, float):
        if value != value or value in (_INFINITY, -_INFINITY):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        return _NUMBER_BYTES
    raise TypeError(f"Object of type {kind.__name__} is not JSON serializable")


_INFINITY = float("inf")


def text_at_most(text: str) -> int:
    """At most how many bytes a string is in ASCII JSON, quotes included: a short one counted at
    its longest escape, a longer one escaped (exact)."""
    return CHARACTER_BYTES * len(text) + 2 if len(text) < _SHORT else _text(text)


def _text(text: str) -> int:
    """How many bytes a string is in ASCII JSON, quotes included (escaped: exact)."""
    return len(encode_basestring_ascii(text))


def _key(key: Any) -> int:
    """At most how many bytes a key that is not a string is (json writes it as one)."""
    if key is None or isinstance(key, (bool, int, float)):
        if isinstance(key, float) and (key != key or key in (_INFINITY, -_INFINITY)):
            raise ValueError(f"Out of range float values are not JSON compliant: {key!r}")
        return 2 + (_at_most(key) if isinstance(key, int) and not isinstance(key, bool) else 24)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def escaped_at_most(text: str) -> int:
    """At most how many bytes `text` is in the SDK's JSON."""
    return CHARACTER_BYTES * len(text)


def envelope_at_most(*texts: str) -> int:
    """At most how many bytes an outbox document holding `texts` (its partition, ids, names) is,
    besides what else it holds of its own (an event's body, a record's answer)."""
    return ENVELOPE_BYTES + CHARACTER_BYTES * sum(map(len, texts))


class Batch:
    """One transactional batch of one partition (see the module): its operations in order, at
    most how many bytes they are (`bound`), what they are and what to do when they are too many
    (`what`: the limits' error says them) and the index of its stream's head (None: no events,
    no head)."""

    __slots__ = ("bound", "head", "operations", "partition_key", "what")

    def __init__(
        self,
        partition_key: str,
        operations: list[BatchOperation],
        bound: int,
        what: tuple[str, str],
        head: int | None = None,
    ) -> None:
        self.partition_key = partition_key
        self.operations = operations
        self.bound = bound
        self.what = what
        self.head = head

    @classmethod
    def assemble(
        cls,
        partition_key: str,
        operations: Iterable[BatchOperation],
        head: BatchOperation | None,
        events: Iterable[BatchOperation],
        record: BatchOperation | None,
        bound: int,
        what: tuple[str, str],
    ) -> Batch:
        """The batch in its order: `operations`, the stream's `head`, its `events` (their
        creates), the Idempotency-Key's `record`. `bound`: at most how many bytes their
        documents are; `what` they are and what to do when they are too many."""
        batch = list(operations)
        at = None
        if head is not None:
            at = len(batch)
            batch.append(head)
        batch += events
        if record is not None:
            batch.append(record)
        # + the list's brackets and commas, as its size is measured
        return cls(partition_key, batch, bound + len(batch) + 2, what, at)

    def check(self) -> None:
        """Cosmos DB's limits, before the round trip: BatchTooLargeError naming the one passed.
        The batch is measured only when its bound is over the limit."""
        if len(self.operations) > MAX_OPERATIONS or self.bound > MAX_BATCH_BYTES:
            self._measure()

    def _measure(self) -> None:
        operations = self.operations
        if len(operations) > MAX_OPERATIONS:
            contents, advice = self.what
            raise BatchTooLargeError(
                f"the batch holds {len(operations)} operations ({contents}); a transactional "
                f"batch takes at most {MAX_OPERATIONS}: {advice}"
            )
        # the documents as the SDK sends them (ASCII: a character a byte)
        size = len(
            _COMPACT.encode(
                [op.document if op.document is not None else op.patch for op in operations]
            )
        )
        if size > MAX_BATCH_BYTES:
            contents, advice = self.what
            raise BatchTooLargeError(
                f"the batch is {size} bytes ({contents}); a transactional batch takes at most "
                f"{MAX_BATCH_BYTES}: {advice}"
            )

    async def send(self, store: AsyncBatchStore) -> list[str | None]:
        """`check` the limits, then write the batch: all or nothing. The etag each operation
        left (None for a delete). Raises the store's errors (a conflict names its operation:
        `OutboxError.operation_index`)."""
        self.check()
        return await store.execute_batch(self.partition_key, self.operations)

    def at_head(self, error: OutboxError) -> bool:
        """Whether a refused batch was refused at its stream's head: the stream moved on (its
        head's etag is stale, or a racing writer created it first)."""
        return self.head is not None and error.operation_index == self.head
