"""The Idempotency-Key protocol, one for the whole write path (the IETF httpapi draft "The
Idempotency-Key HTTP Header Field"; the HTTP side is `cosmos_outbox.http._idempotency_key`):
what a write made with a key leaves in the store, and how a retry is answered from it.

- **The key** (`IdempotencyKey`): where it is unique (`scope`: the route and the caller, or a
  transaction's entity), the key, the fingerprint of the request that used it, and how the answer
  is made from what was written.
- **Its record** (`IdempotencyRecord`, stored as `idempotencyRecord`: the fingerprint, the
  version written and the answer's status, Location and body) is **one more create in the same
  transactional batch** as the change and its events (`record_operation`), in the changed
  partition, with its own TTL. A retry's batch conflicts on it (or, for an aggregate's create, on
  the aggregate's id, derived from the key), so the change and its record commit together or not
  at all. No read of the record on the success path.
- **A retry** is answered from the record (`recorded`: the one look-up, before the work
  (`Transaction.replay`) or after a refused batch (the transaction's commit, the aggregate
  service); the key with another request is IdempotencyKeyReusedError, said here only).

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
from cosmos_outbox._mapper import aggregate_partition, parse_time
from cosmos_outbox.errors import IdempotencyKeyReusedError
from cosmos_outbox.ports import AsyncBatchStore, BatchOperation

A = TypeVar("A", bound="Aggregate")

__all__ = [
    "IDEMPOTENCY_TYPE",
    "MAX_GENERATIONS",
    "RECORD_PREFIX",
    "Answer",
    "IdempotencyKey",
    "IdempotencyRecord",
    "Recorded",
    "derived_id",
    "fingerprint",
    "idempotency_record",
    "read_record",
    "record_document",
    "record_id",
    "record_operation",
    "recorded",
    "weak_etag",
]

IDEMPOTENCY_TYPE = "idempotencyRecord"
#: The ids of idempotency records: `idem-<sha256 hex of the scope and the key>`.
RECORD_PREFIX = "idem-"
#: The namespace of the aggregate ids a create derives from its key (uuid5).
ID_NAMESPACE = uuid.UUID("5d1c3c9e-6a0f-5b7e-9d2a-1f4e8c7b3a60")
#: How many ids one key may take for creates: a key whose record expired takes the next one
#: (generation 1, 2, ...), so it behaves as new; past this many, its creates answer 409.
MAX_GENERATIONS = 8
#: What the record's `request` keeps of a request given as text (what it was, for people).
_REQUEST_TEXT = 200


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
    """A key as stored: the request's fingerprint, the version written (an aggregate's; 0 for a
    transaction's) and the answer, in the partition of the change (`aggregate_id`: an
    aggregate's own, or a transaction's partition key)."""

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
class IdempotencyKey(Generic[A]):
    """An Idempotency-Key as one request used it. `scope` is where the key is unique (the route,
    and the caller when known; a transaction's entity); `fingerprint` tells two requests apart;
    `answer` makes the answer from the aggregate as written (a transaction records the answer
    it is given instead); `request` says what the request was, for people."""

    scope: str
    value: str = field(repr=False)
    fingerprint: str
    answer: Callable[[A], Answer] = field(default=lambda _: Answer(200), repr=False)
    request: str = ""
    #: the last answer made, and of which aggregate (made once: for the record, then replied)
    _made: list[tuple[A, Answer]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    @classmethod
    def of(cls, value: str, *, request: Mapping[str, Any] | str, scope: str) -> IdempotencyKey[A]:
        """The key of a request given as data (its fingerprint) or as text (its fingerprint, and
        its beginning kept in the record for people)."""
        if isinstance(request, Mapping):
            return cls(scope=scope, value=value, fingerprint=fingerprint(request))
        return cls(
            scope=scope,
            value=value,
            fingerprint=fingerprint({"request": request}),
            request=str(request)[:_REQUEST_TEXT],
        )

    @property
    def record_id(self) -> str:
        return record_id(self.scope, self.value)

    def aggregate_id(self, generation: int = 0) -> str:
        """The id a create with this key gives its aggregate (see `derived_id`)."""
        return derived_id(self.scope, self.value, generation)

    def answer_for(self, aggregate: A) -> Answer:
        """`answer(aggregate)`, made once per aggregate: the answer recorded is the one given."""
        if not self._made or self._made[0][0] is not aggregate:
            self._made[:] = [(aggregate, self.answer(aggregate))]
        return self._made[0][1]

    def record(self, aggregate: A) -> IdempotencyRecord:
        """The record of this key for `aggregate` as it is about to be written."""
        return self.record_in(
            aggregate_partition(aggregate.id),
            aggregate_type=aggregate.aggregate_type,
            version=aggregate.version,
            answer=self.answer_for(aggregate),
        )

    def record_in(
        self, partition_key: str, *, aggregate_type: str, version: int, answer: Answer
    ) -> IdempotencyRecord:
        """The record of this key in `partition_key`, answering `answer`."""
        return IdempotencyRecord(
            record_id=self.record_id,
            aggregate_type=aggregate_type,
            aggregate_id=partition_key,
            fingerprint=self.fingerprint,
            version=version,
            answer=answer,
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


# -- the record, stored ------------------------------------------------------------------------


def record_document(record: IdempotencyRecord, *, ttl_seconds: int) -> dict[str, Any]:
    """The stored record of a key, in the partition of its change, expiring after
    `ttl_seconds`:

        {"id": "idem-<sha256>", "partitionKey", "type": "idempotencyRecord", "aggregateType",
         "request", "fingerprint", "version", "answer": {"status", "location"?, "body"?},
         "createdAt", "ttl"}

    The key is not in it (the id is its hash); the relay skips it as it skips aggregates."""
    given = {"location": record.answer.location, "body": record.answer.body}
    answer = {"status": record.answer.status, **{k: v for k, v in given.items() if v is not None}}
    return {
        "id": record.record_id,
        "partitionKey": record.aggregate_id,
        "type": IDEMPOTENCY_TYPE,
        "aggregateType": record.aggregate_type,
        "request": record.request,
        "fingerprint": record.fingerprint,
        "version": record.version,
        "answer": answer,
        "createdAt": record.created_at.isoformat(),
        "ttl": ttl_seconds,
    }


def record_operation(record: IdempotencyRecord, *, ttl_seconds: int) -> BatchOperation:
    """The create of a record: a second use of the same key fails on it (409), and so does the
    whole batch of its change."""
    return BatchOperation("create", record_document(record, ttl_seconds=ttl_seconds))


def idempotency_record(document: Mapping[str, Any]) -> IdempotencyRecord | None:
    """A stored record, typed; None for a document that is not one (or not readable as one)."""
    answer = document.get("answer")
    if document.get("type") != IDEMPOTENCY_TYPE or not isinstance(answer, Mapping):
        return None
    status, version = answer.get("status"), document.get("version")
    printed = document.get("fingerprint")
    location = answer.get("location")
    if type(status) is not int or type(version) is not int or not isinstance(printed, str):
        return None
    return IdempotencyRecord(
        record_id=str(document.get("id")),
        aggregate_type=str(document.get("aggregateType", "")),
        aggregate_id=str(document.get("partitionKey")),
        fingerprint=printed,
        version=version,
        answer=Answer(
            status=status,
            body=answer.get("body"),
            location=location if isinstance(location, str) else None,
        ),
        request=str(document.get("request", "")),
        created_at=parse_time(document.get("createdAt")) or datetime.now(UTC),
    )


# -- a retry, answered -------------------------------------------------------------------------


async def read_record(
    store: AsyncBatchStore, partition_key: str, record_id: str
) -> IdempotencyRecord | None:
    """The record `record_id` in `partition_key`; None when there is none (never written, or
    expired)."""
    document = await store.read(partition_key, record_id)
    return idempotency_record(document) if document is not None else None


async def recorded(
    store: AsyncBatchStore, partition_key: str, key: IdempotencyKey[Any]
) -> IdempotencyRecord | None:
    """What an earlier request with `key` recorded in `partition_key` (one point read): None
    for a key not used there (or expired); IdempotencyKeyReusedError when it was used for
    another request."""
    record = await read_record(store, partition_key, key.record_id)
    if record is not None and record.fingerprint != key.fingerprint:
        raise IdempotencyKeyReusedError("this Idempotency-Key was used for another request")
    return record
