"""In-memory fakes of the package's ports. Each is held to the same contract suite as the real
adapter (`cosmos_outbox.testing._contracts`, run on both), so a test on a fake says something
true of production. The fakes write and read the same documents as the Cosmos DB adapters
(`cosmos_outbox._documents`)."""

from __future__ import annotations

import heapq
import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from cosmos_outbox._documents import (
    EVENT_TYPE,
    QUARANTINE_TYPE,
    QUARANTINED_EVENT,
    WriteOperation,
    aggregate_from_document,
    quarantine_document,
    quarantine_id,
    quarantined_event,
    read_feed,
    replayed_document,
    selected,
)
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._records import NotAnEvent, OutboxMessage, OutboxRecord, Unreadable
from cosmos_outbox._unit_of_work import TrackingRepository, TrackingUnitOfWork
from cosmos_outbox.errors import (
    AlreadyExistsError,
    ApplicationError,
    InvalidContinuationError,
    NotFoundError,
    PayloadNotFoundError,
    PayloadReferenceError,
    PayloadStoreError,
    PreconditionFailedError,
)
from cosmos_outbox.ports import (
    BacklogEstimator,
    EventStore,
    LeaseBacklog,
    MessageBatch,
    MessagePublisher,
    Page,
    PayloadStore,
    Quarantine,
    QuarantinedEvent,
)
from cosmos_outbox.settings import DEFAULT_EVENT_TTL_SECONDS, DEFAULT_IDEMPOTENCY_TTL_SECONDS


class InMemoryStore:
    """Documents by (partition key, id) with etags; batches are atomic like Cosmos'. A document
    with a positive `ttl` expires that many seconds after it was written, as with Cosmos DB's
    per-item TTL (container `defaultTtl -1`): it is then gone for reads and writes. Time is
    `clock()` plus what `elapse()` added."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.documents: dict[tuple[str, str], dict[str, Any]] = {}
        #: when each document with a TTL expires, and the same as a heap (soonest first; an
        #: entry that no longer matches `_expiries` is stale and skipped)
        self._expiries: dict[tuple[str, str], float] = {}
        self._due: list[tuple[float, tuple[str, str]]] = []
        self._clock = clock
        self._elapsed = 0.0
        self._etags = itertools.count(1)
        self._lock = threading.Lock()
        #: raised by the next batch (then forgotten): a store failure for one write
        self.fail_next: ApplicationError | None = None
        #: raised by every health check while set: a store that is down
        self.unavailable: ApplicationError | None = None
        self.batches = 0

    def put(self, document: dict[str, Any]) -> None:
        """Write outside any unit of work (tests plant documents this way)."""
        with self._lock:
            self._store(_copy(document))

    def read(self, partition_key: str, doc_id: str) -> dict[str, Any] | None:
        with self._lock:
            self._expire()
            doc = self.documents.get((partition_key, doc_id))
            return _copy(doc) if doc else None

    def elapse(self, seconds: float) -> None:
        """Move the store's time on: documents whose TTL ran out are deleted."""
        with self._lock:
            self._elapsed += seconds
            self._expire()

    def outlive(self, partition_key: str, doc_id: str) -> None:
        """Move the store's time on until the document's TTL has run out (it is then gone)."""
        document = self.read(partition_key, doc_id)
        if document is None:
            raise NotFoundError("document", doc_id)
        ttl = document.get("ttl")
        if type(ttl) is not int or ttl <= 0:
            raise ValueError(f"document {doc_id} has no TTL: it never expires")
        self.elapse(ttl)

    def _now(self) -> float:
        return self._clock() + self._elapsed

    def _expire(self) -> None:
        now = self._now()
        while self._due and self._due[0][0] <= now:
            at, key = heapq.heappop(self._due)
            if self._expiries.get(key) == at:
                del self._expiries[key]
                self.documents.pop(key, None)

    def batch(self, partition_key: str, operations: list[WriteOperation]) -> list[str]:
        with self._lock:
            if self.fail_next is not None:
                failure, self.fail_next = self.fail_next, None
                raise failure
            self._expire()
            for kind, doc, etag in operations:
                key = (partition_key, doc["id"])
                if doc["partitionKey"] != partition_key:
                    raise ValueError("batch operations must share the partition key")
                current = self.documents.get(key)
                if kind == "create" and current is not None:
                    raise AlreadyExistsError(f"document {doc['id']} exists")
                if kind == "replace":
                    if current is None:
                        raise NotFoundError("document", doc["id"])
                    if etag is not None and current["_etag"] != etag:
                        raise PreconditionFailedError(
                            "etag mismatch", aggregate_type=str(doc.get("type", "document")))
            self.batches += 1
            return [self._store(_copy(doc)) for _, doc, _ in operations]

    def _store(self, doc: dict[str, Any]) -> str:
        doc["_etag"] = f'"{next(self._etags):08x}-0000-0000-0000-000000000000"'
        key = (doc["partitionKey"], doc["id"])
        self.documents[key] = doc
        ttl = doc.get("ttl")
        if type(ttl) is int and ttl > 0:
            self._expiries[key] = at = self._now() + ttl
            heapq.heappush(self._due, (at, key))
        else:
            self._expiries.pop(key, None)
        return str(doc["_etag"])

    def delete(self, partition_key: str, doc_id: str) -> None:
        with self._lock:
            self._expire()
            self._expiries.pop((partition_key, doc_id), None)
            if self.documents.pop((partition_key, doc_id), None) is None:
                raise NotFoundError("document", doc_id)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            self._expire()
            return [_copy(d) for d in self.documents.values() if d.get("type") == kind]


def _copy(document: Mapping[str, Any]) -> dict[str, Any]:
    """What Cosmos DB keeps of a document and gives back: its JSON, never the caller's objects
    (a write of something that is not JSON fails, as it does there)."""
    copied: dict[str, Any] = json.loads(json.dumps(document))
    return copied


class InMemoryRepository[A: Aggregate](TrackingRepository[A]):
    def __init__(self, store: InMemoryStore, kind: type[A]) -> None:
        super().__init__(kind)
        self._store = store

    def read(self, aggregate_id: str) -> tuple[A, str]:
        doc = self._store.read(aggregate_id, aggregate_id)
        if doc is None:
            raise NotFoundError(self.kind.aggregate_type, aggregate_id)
        return aggregate_from_document(self.kind, doc), doc["_etag"]


class InMemoryUnitOfWork(TrackingUnitOfWork):
    def __init__(self, store: InMemoryStore, *,
                 event_ttl_seconds: int = DEFAULT_EVENT_TTL_SECONDS,
                 idempotency_ttl_seconds: int = DEFAULT_IDEMPOTENCY_TTL_SECONDS) -> None:
        super().__init__(event_ttl_seconds=event_ttl_seconds,
                         idempotency_ttl_seconds=idempotency_ttl_seconds)
        self.store = store

    @property
    def ttl(self) -> int:
        return self.event_ttl_seconds

    def _repository[A: Aggregate](self, kind: type[A]) -> TrackingRepository[A]:
        return InMemoryRepository(self.store, kind)

    def _execute(self, aggregate_type: str, partition_key: str,
                 operations: list[WriteOperation]) -> str:
        return self.store.batch(partition_key, operations)[0]

    def _read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        return self.store.read(partition_key, document_id)

    def ping(self) -> None:
        if self.store.unavailable is not None:
            raise self.store.unavailable


def uow_factory(store: InMemoryStore, **kwargs: Any) -> Callable[[], InMemoryUnitOfWork]:
    return lambda: InMemoryUnitOfWork(store, **kwargs)


class SizeLimitedBatch(MessageBatch):
    """Counts body bytes plus a fixed per-message overhead against a limit, like the SDK."""

    OVERHEAD = 64

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.messages: list[OutboxMessage] = []
        self.size = 0

    @classmethod
    def size_of(cls, message: OutboxMessage) -> int:
        return (len(message.body) + len(message.message_id) + len(message.dataref or "")
                + cls.OVERHEAD)

    def try_add(self, message: OutboxMessage) -> bool:
        size = self.size_of(message)
        if self.size + size > self.limit:
            return False
        self.messages.append(message)
        self.size += size
        return True

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def max_size_in_bytes(self) -> int:
        return self.limit


class FakePublisher(MessagePublisher):
    """Records sent batches; fails the n-th send when told to (after earlier ones went out)."""

    def __init__(self, *, max_batch_bytes: int = 4096, fail_on_send: int | None = None) -> None:
        #: the limit the current link announced; `entity_limit`, when set, is what a fresh
        #: link would announce (the entity's limit was raised since this one opened)
        self.max_batch_bytes = max_batch_bytes
        self.entity_limit: int | None = None
        self.refreshes = 0
        self.sent: list[list[OutboxMessage]] = []
        self.fail_on_send = fail_on_send
        self.attempts = 0

    def create_batch(self) -> MessageBatch:
        return SizeLimitedBatch(self.max_batch_bytes)

    def send(self, batch: MessageBatch) -> None:
        assert isinstance(batch, SizeLimitedBatch)
        self.attempts += 1
        if self.fail_on_send is not None and self.attempts == self.fail_on_send:
            raise ConnectionError("broker unavailable")
        self.sent.append(list(batch.messages))

    def refresh(self) -> bool:
        """As the real publisher: a fresh link is opened (counted) only when one could take
        more than the current link, i.e. when the entity's limit was raised (`entity_limit`)."""
        if self.entity_limit is None or self.entity_limit <= self.max_batch_bytes:
            return False
        self.refreshes += 1
        self.max_batch_bytes = self.entity_limit
        return True

    @property
    def messages(self) -> list[OutboxMessage]:
        return [m for batch in self.sent for m in batch]


class InMemoryPayloadStore(PayloadStore):
    """Payloads by name, in memory; references are `memory://<store>/<container>/<name>`. A test
    makes it fail (`unavailable`: every call raises PayloadStoreError while set) and reads what
    was stored (`bodies`, `content_types`, `puts`)."""

    _stores = itertools.count(1)

    def __init__(self, container: str = "outbox-payloads") -> None:
        self._prefix = f"memory://store-{next(self._stores)}/{container}/"
        self.bodies: dict[str, bytes] = {}
        self.content_types: dict[str, str] = {}
        self.puts = 0
        self.unavailable = False
        self._lock = threading.Lock()

    def reference(self, name: str) -> str:
        return self._prefix + name

    def put(self, name: str, body: bytes, *, content_type: str) -> None:
        with self._lock:
            if self.unavailable:
                raise PayloadStoreError(f"storing payload {name} failed: store unavailable")
            self.bodies[name] = bytes(body)
            self.content_types[name] = content_type
            self.puts += 1

    def get(self, reference: str) -> bytes:
        if not reference.startswith(self._prefix):
            raise PayloadReferenceError(reference, "not in this store's container")
        name = reference[len(self._prefix):]
        if "?" in name or "#" in name or any(p in ("", ".", "..") for p in name.split("/")):
            raise PayloadReferenceError(reference, "not a payload name")
        with self._lock:
            if self.unavailable:
                raise PayloadStoreError(f"reading payload {reference} failed: unavailable")
            body = self.bodies.get(name)
        if body is None:
            raise PayloadNotFoundError(reference)
        return body


class InMemoryQuarantine(Quarantine):
    """Quarantine records as documents of an in-memory store (its own unless given), written
    and read with the same document functions as the Cosmos adapter."""

    def __init__(self, store: InMemoryStore | None = None) -> None:
        self.store = store if store is not None else InMemoryStore()

    @property
    def documents(self) -> dict[str, dict[str, Any]]:
        return {d["id"]: d for d in self.store.of_type(QUARANTINE_TYPE)}

    def put(self, event: OutboxRecord | Unreadable, *, reason: str) -> None:
        fresh = quarantine_document(event.document, reason=reason)
        self.store.put(quarantine_document(event.document, reason=reason,
                                           previous=self.documents.get(fresh["id"])))

    def _document(self, event_id: str) -> dict[str, Any]:
        doc = self.documents.get(quarantine_id(event_id))
        if doc is None:
            raise NotFoundError(QUARANTINED_EVENT, event_id)
        return doc

    def get(self, event_id: str) -> QuarantinedEvent:
        return quarantined_event(self._document(event_id))

    def list_page(self, *, page_size: int,
                  continuation: str | None) -> Page[QuarantinedEvent]:
        rows = sorted(self.documents.values(), key=lambda d: d["id"])
        start = 0
        if continuation is not None:
            if not continuation.startswith("mem:") or not continuation[4:].isdigit():
                raise InvalidContinuationError("bad continuation token")
            start = int(continuation[4:])
        page = rows[start : start + page_size]
        end = start + len(page)
        return Page([quarantined_event(d) for d in page],
                    f"mem:{end}" if end < len(rows) else None)

    def count(self) -> int:
        return sum(1 for d in self.documents.values() if d.get("status") != "resolved")

    def replayed(self, entry: QuarantinedEvent, *, resolved: bool, reason: str,
                 ttl_seconds: int) -> QuarantinedEvent:
        current = self._document(entry.event_id)
        updated = replayed_document(current, entry, resolved=resolved, reason=reason,
                                    ttl_seconds=ttl_seconds, now=datetime.now(UTC))
        self.store.put(updated)
        return quarantined_event(updated)

    def discard(self, entry: QuarantinedEvent) -> None:
        self._document(entry.event_id)
        self.store.delete(entry.aggregate_id, quarantine_id(entry.event_id))


class InMemoryEventStore(EventStore):
    def __init__(self, store: InMemoryStore) -> None:
        self.store = store

    def events_since(
        self, since: datetime, *, aggregate_type: str | None = None,
        aggregate_id: str | None = None,
    ) -> list[OutboxRecord | Unreadable]:
        documents = [d for d in self.store.of_type(EVENT_TYPE)
                     if (aggregate_id is None or d["partitionKey"] == aggregate_id)
                     and selected(d, since, aggregate_type)]
        return [i for i in read_feed(documents) if not isinstance(i, NotAnEvent)]


class FixedBacklog(BacklogEstimator):
    """A backlog estimator that reports what a test sets."""

    def __init__(self, leases: list[LeaseBacklog] | None = None) -> None:
        self.leases = leases or []

    def estimate(self) -> list[LeaseBacklog]:
        return list(self.leases)

