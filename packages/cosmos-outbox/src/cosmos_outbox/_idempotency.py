"""Idempotency records: what a write made with an `Idempotency-Key` leaves in the store, so that
a retry of it answers what it answered without writing again (the IETF httpapi draft "The
Idempotency-Key HTTP Header Field"; the HTTP side is `cosmos_outbox.http._idempotency_key`).

A `Claim` is a key claimed by one request: its scope (the route, and the caller when known),
the fingerprint of the request, and how to make the answer from the aggregate as written. The
unit of work writes its record (`IdempotencyRecord`: the fingerprint, the aggregate's version
and the answer's status, Location and body) as **one more create in the same transactional
batch** as the change and its events, in the aggregate's partition, with its own TTL. A retry's
batch conflicts on the record (or, for a create, on the aggregate's id, derived from the key), so
the change and the claim commit together or not at all; the retry then reads the record and
answers from it (`Recorded`). No read of the record on the success path.

The key itself is never stored nor logged: the record's id is a hash of the scope and the key.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from cosmos_outbox._domain import Aggregate

A = TypeVar("A", bound="Aggregate")

__all__ = [
    "MAX_GENERATIONS",
    "RECORD_PREFIX",
    "Answer",
    "Claim",
    "IdempotencyRecord",
    "Recorded",
    "derived_id",
    "fingerprint",
    "record_id",
    "weak_etag",
]

#: The ids of idempotency records: `idem-<sha256 hex of the scope and the key>`.
RECORD_PREFIX = "idem-"
#: The namespace of the aggregate ids a create derives from its key (uuid5).
ID_NAMESPACE = uuid.UUID("5d1c3c9e-6a0f-5b7e-9d2a-1f4e8c7b3a60")
#: How many ids one key may take for creates: a key whose record expired takes the next one
#: (generation 1, 2, ...), so it behaves as new; past this many, its creates answer 409.
MAX_GENERATIONS = 8


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def record_id(scope: str, key: str) -> str:
    """The id of the record of `key` in `scope` (the key is not recoverable from it)."""
    return RECORD_PREFIX + hashlib.sha256(_canonical([scope, key])).hexdigest()


def derived_id(scope: str, key: str, generation: int = 0) -> str:
    """The id of the aggregate a create with `key` in `scope` makes (uuid5: the same for every
    retry, so the retry's batch targets the same partition and conflicts)."""
    return str(uuid.uuid5(ID_NAMESPACE, _canonical([scope, key, generation]).decode()))


def fingerprint(request: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a request (sorted keys, no whitespace, UTF-8):
    the same for two requests that mean the same, whatever their formatting."""
    return hashlib.sha256(_canonical(request)).hexdigest()


@dataclass(frozen=True)
class Answer:
    """What a write answered: its status, and its Location and JSON body when it had them. The
    ETag is the store's, known only once the batch has committed: it is not part of it."""

    status: int
    body: Any = None
    location: str | None = None


@dataclass(frozen=True)
class IdempotencyRecord:
    """A claimed key, as stored: the request's fingerprint, the aggregate's version after the
    write, and the answer."""

    record_id: str
    aggregate_type: str
    aggregate_id: str
    fingerprint: str
    version: int
    answer: Answer
    #: what the request was (`POST contacts`), for the people who read the store
    request: str = ""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class Claim(Generic[A]):
    """A key claimed by one request. `scope` is where the key is unique (the route, and the
    caller when known); `answer` makes the answer from the aggregate as written."""

    scope: str
    key: str = field(repr=False)
    fingerprint: str
    answer: Callable[[A], Answer]
    request: str = ""
    #: the last answer made, and of which aggregate (made once: for the record, then replied)
    _made: list[tuple[A, Answer]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    @property
    def record_id(self) -> str:
        return record_id(self.scope, self.key)

    def aggregate_id(self, generation: int = 0) -> str:
        """The id a create with this key gives its aggregate (see `derived_id`)."""
        return derived_id(self.scope, self.key, generation)

    def answer_for(self, aggregate: A) -> Answer:
        """`answer(aggregate)`, made once per aggregate: the answer recorded is the one given."""
        if not self._made or self._made[0][0] is not aggregate:
            self._made[:] = [(aggregate, self.answer(aggregate))]
        return self._made[0][1]

    def record(self, aggregate: A) -> IdempotencyRecord:
        """The record of this claim for `aggregate` as it is about to be written."""
        return IdempotencyRecord(
            record_id=self.record_id,
            aggregate_type=aggregate.aggregate_type,
            aggregate_id=aggregate.id,
            fingerprint=self.fingerprint,
            version=aggregate.version,
            answer=self.answer_for(aggregate),
            request=self.request,
        )


@dataclass(frozen=True)
class Recorded:
    """A retry's answer: the record an earlier request with the same key and the same request
    left, and the ETag to answer with: the aggregate's etag when it is still at the recorded
    version (then it is the very etag that write answered), else a weak validator of the
    recorded version (`W/"<version>"`), which no If-Match matches, as the first answer's etag
    would not either."""

    record: IdempotencyRecord
    etag: str

    @property
    def answer(self) -> Answer:
        return self.record.answer


def weak_etag(version: int) -> str:
    return f'W/"{version}"'
