"""In-memory fakes of the package's ports. Each is held to the same contract suite as the real
adapter (`cosmos_outbox_testing.contracts`, run on both), so a test on a fake says something
true of production. The store keeps documents as Cosmos DB does (JSON, etags, per-item TTL,
atomic batches, pages with continuation tokens); the async API awaits these sync fakes as they
are. The store runs an app's Cosmos DB SQL queries with the test kit's query engine
(`cosmos_outbox_testing._sql`), refusing by name what it does not serve."""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from cosmos_outbox.documents import EVENT_TYPE, document_created_at
from cosmos_outbox.errors import (
    AlreadyExistsError,
    InvalidContinuationError,
    InvalidQueryError,
    NotFoundError,
    OutboxError,
    PayloadNotFoundError,
    PayloadReferenceError,
    PayloadStoreError,
    PreconditionFailedError,
)
from cosmos_outbox.ports import (
    BacklogEstimator,
    BatchOperation,
    DocumentStore,
    LeaseBacklog,
    MessageBatch,
    MessagePublisher,
    OutboxMessage,
    Page,
    PayloadStore,
    QueryParameters,
    Release,
    ScheduleQueue,
    named_parameters,
)


class InMemoryStore(DocumentStore):
    """Documents by (partition key, id) with etags; batches are atomic like Cosmos DB's. A
    document with a positive `ttl` expires that many seconds after it was written, as with
    Cosmos DB's per-item TTL (container `defaultTtl -1`): it is then gone for reads and writes.
    Time is `clock()` plus what `elapse()` added. What it keeps and gives back is JSON, never a
    caller's objects."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.documents: dict[tuple[str, str], dict[str, Any]] = {}
        #: when each document with a TTL expires, and the same as a heap (soonest first; an
        #: entry that no longer matches `_expiries` is stale and skipped)
        self._expiries: dict[tuple[str, str], float] = {}
        self._due: list[tuple[float, tuple[str, str]]] = []
        self._clock = clock
        self._elapsed = 0.0
        self._etags = itertools.count(1)
        self._lock = threading.RLock()
        #: raised by the next batch (then forgotten): a store failure for one write
        self.fail_next: OutboxError | None = None
        #: raised by every health check while set: a store that is down
        self.unavailable: OutboxError | None = None
        self.batches = 0
        #: the change feed: each write's documents (a batch is one change), in order; the
        #: change's number is its index + 1 (Cosmos DB's LSN)
        self.changes: list[tuple[dict[str, Any], ...]] = []

    # -- tests' own access ----------------------------------------------------------------

    def put(self, document: Mapping[str, Any]) -> None:
        """Write outside any unit of work (tests plant documents this way)."""
        with self._lock:
            stored = _copy(document)
            self._store(stored)
            self.changes.append((stored,))

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

    def in_partition(self, partition_key: str) -> list[dict[str, Any]]:
        with self._lock:
            self._expire()
            return [_copy(d) for (pk, _), d in self.documents.items() if pk == partition_key]

    # -- DocumentStore --------------------------------------------------------------------

    def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]:
        with self._lock:
            if self.fail_next is not None:
                injected, self.fail_next = self.fail_next, None
                raise injected
            self._expire()
            staged = dict(self.documents)
            written: list[tuple[str, dict[str, Any] | None]] = []
            for index, op in enumerate(operations):
                key = (partition_key, op.document_id)
                current = staged.get(key)
                if (
                    op.document is not None
                    and op.document.get("partitionKey", partition_key) != partition_key
                ):
                    raise ValueError("batch operations must share the partition key")
                failure: OutboxError | None = None
                if op.kind == "create" and current is not None:
                    failure = AlreadyExistsError(f"document {op.document_id} exists")
                elif op.kind in ("replace", "patch", "delete") and current is None:
                    failure = NotFoundError("document", op.document_id)
                elif op.kind in ("replace", "patch", "delete") and (
                    op.if_match is not None
                    and current is not None
                    and current["_etag"] != op.if_match
                ):
                    failure = PreconditionFailedError("etag mismatch")
                if failure is not None:
                    failure.operation_index = index
                    raise failure
                if op.kind == "delete":
                    staged.pop(key)
                    written.append((op.document_id, None))
                    continue
                document = (
                    _patched(current, op.patch)
                    if op.kind == "patch" and current
                    else _copy(op.document or {})
                )
                # as Cosmos DB's store: the batch's partition where a document has none
                document.setdefault("partitionKey", partition_key)
                staged[key] = document
                written.append((op.document_id, document))
            self.batches += 1
            etags: list[str | None] = []
            for document_id, stored in written:
                if stored is None:
                    self._forget((partition_key, document_id))
                    etags.append(None)
                else:
                    etags.append(self._store(stored))
            self.changes.append(tuple(d for _, d in written if d is not None))
            return etags

    def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        with self._lock:
            self._expire()
            doc = self.documents.get((partition_key, document_id))
            return _copy(doc) if doc else None

    def upsert(self, document: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._expire()
            stored = _copy(document)
            self._store(stored)
            self.changes.append((stored,))
            return _copy(stored)

    def replace(
        self, document: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        with self._lock:
            self._expire()
            key = (str(document["partitionKey"]), str(document["id"]))
            current = self.documents.get(key)
            if current is None:
                raise NotFoundError("document", key[1])
            if if_match is not None and current["_etag"] != if_match:
                raise PreconditionFailedError("etag mismatch")
            stored = _copy(document)
            self._store(stored)
            self.changes.append((stored,))
            return _copy(stored)

    def delete(self, partition_key: str, document_id: str) -> None:
        with self._lock:
            self._expire()
            if (partition_key, document_id) not in self.documents:
                raise NotFoundError("document", document_id)
            self._forget((partition_key, document_id))

    def find(self, type_: str, document_id: str) -> dict[str, Any] | None:
        with self._lock:
            self._expire()
            return next(
                (
                    _copy(d)
                    for (_, doc_id), d in self.documents.items()
                    if doc_id == document_id and d.get("type") == type_
                ),
                None,
            )

    def of_type(self, type_: str, *, partition_key: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            self._expire()
            return [
                _copy(d)
                for (pk, _), d in self.documents.items()
                if d.get("type") == type_ and partition_key in (None, pk)
            ]

    def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        rows = sorted(self.of_type(type_), key=lambda d: (d["partitionKey"], d["id"]))
        start = 0
        if continuation is not None:
            if not continuation.startswith("mem:") or not continuation[4:].isdigit():
                raise InvalidContinuationError("bad continuation token")
            start = int(continuation[4:])
        page = rows[start : start + page_size]
        end = start + len(page)
        return Page(page, f"mem:{end}" if end < len(rows) else None)

    def query(
        self, query: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[Any]:
        """The query run by the test kit's engine over the documents (of one partition when
        `partition_key` is given), in the order they were first written unless it orders them.
        A part of the language the engine does not serve is refused (InvalidQueryError naming
        it), never answered another way; so is a cross-partition aggregate without VALUE, as
        Cosmos DB's SDK refuses it."""
        from cosmos_outbox_testing._sql import QueryUnsupported, run_query

        named = named_parameters(parameters)
        with self._lock:
            self._expire()
            documents = [
                _copy(d)
                for (pk, _), d in self.documents.items()
                if partition_key is None or pk == partition_key
            ]
        try:
            return run_query(query, named, documents, cross_partition=partition_key is None)
        except QueryUnsupported as refused:
            raise InvalidQueryError(
                f"the test kit's in-memory store cannot run {query!r}: {refused}"
            ) from None

    def query_page(
        self,
        query: str,
        parameters: QueryParameters = None,
        *,
        partition_key: str | None = None,
        page_size: int,
        continuation: str | None = None,
    ) -> Page[Any]:
        """A page of `query`'s results; its token names the query it pages (another query's
        token, or one the store did not issue, is InvalidContinuationError)."""
        if page_size < 1:
            raise ValueError("page_size is at least 1")
        rows = self.query(query, parameters, partition_key=partition_key)
        digest = hashlib.sha256(
            json.dumps(
                [query, sorted(named_parameters(parameters).items()), partition_key], default=str
            ).encode()
        ).hexdigest()[:16]
        start = 0
        if continuation is not None:
            prefix, _, offset = continuation.rpartition(":")
            if prefix != f"mem-query:{digest}" or not offset.isdigit():
                raise InvalidContinuationError("this continuation token is not one of this query's")
            start = int(offset)
        end = start + page_size
        return Page(rows[start:end], f"mem-query:{digest}:{end}" if end < len(rows) else None)

    def ping(self) -> None:
        if self.unavailable is not None:
            raise self.unavailable

    # -- inside ---------------------------------------------------------------------------

    def _now(self) -> float:
        return self._clock() + self._elapsed

    def _expire(self) -> None:
        now = self._now()
        while self._due and self._due[0][0] <= now:
            at, key = heapq.heappop(self._due)
            if self._expiries.get(key) == at:
                del self._expiries[key]
                self.documents.pop(key, None)

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

    def _forget(self, key: tuple[str, str]) -> None:
        self._expiries.pop(key, None)
        self.documents.pop(key, None)


def _copy(document: Mapping[str, Any]) -> dict[str, Any]:
    """What Cosmos DB keeps of a document and gives back: its JSON, never the caller's objects
    (a write of something that is not JSON fails, as it does there)."""
    copied: dict[str, Any] = json.loads(json.dumps(document))
    return copied


def _patched(
    document: Mapping[str, Any], operations: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """`document` after Cosmos DB's partial-document update operations (`add`, `set`, `replace`,
    `remove`, `incr`, on top-level or nested paths `/a/b`)."""
    patched = _copy(document)
    for operation in operations:
        *parents, leaf = [p for p in str(operation["path"]).split("/") if p]
        target: Any = patched
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        op, value = operation["op"], operation.get("value")
        if op in ("add", "set"):
            if isinstance(target, list) and op == "add":
                target.insert(len(target) if leaf == "-" else int(leaf), value)
            else:
                target[leaf] = value
        elif op == "replace":
            if leaf not in target:
                raise ValueError(f"patch replace: no {operation['path']}")
            target[leaf] = value
        elif op == "remove":
            del target[leaf]
        elif op == "incr":
            target[leaf] = target.get(leaf, 0) + value
        else:
            raise ValueError(f"unknown patch operation {op!r}")
    return _copy(patched)


class SizeLimitedBatch(MessageBatch):
    """Counts body bytes plus a fixed per-message overhead against a limit, like the SDK."""

    OVERHEAD = 64

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.messages: list[OutboxMessage] = []
        self.size = 0

    @classmethod
    def size_of(cls, message: OutboxMessage) -> int:
        return (
            len(message.body) + len(message.message_id) + len(message.dataref or "") + cls.OVERHEAD
        )

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
        #: False: the container is missing (`check` says so; the relay does not start)
        self.exists = True
        self._container = container
        self._lock = threading.Lock()

    def reference(self, name: str) -> str:
        return self._prefix + name

    def check(self) -> None:
        if not self.exists:
            raise PayloadStoreError(
                f"the claim check's payload container {self._container} does not exist: create it"
            )

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
        name = reference[len(self._prefix) :]
        if "?" in name or "#" in name or any(p in ("", ".", "..") for p in name.split("/")):
            raise PayloadReferenceError(reference, "not a payload name")
        with self._lock:
            if self.unavailable:
                raise PayloadStoreError(f"reading payload {reference} failed: unavailable")
            body = self.bodies.get(name)
        if body is None:
            raise PayloadNotFoundError(reference)
        return body


class InMemoryBacklogEstimator(BacklogEstimator):
    """The relay's backlog on an `InMemoryStore`, as the Cosmos DB estimator reads it from the
    change feed: per lease, the changes after its checkpoint that carry an event document (a
    change is a write: a batch is one), and the creation time of the first of them. One lease
    (`"0"`: an in-memory store is one feed range), read from the start until `checkpoint()`
    moves it, as the trigger does after an invocation."""

    def __init__(self, store: InMemoryStore, *, lease: str = "0") -> None:
        self.store = store
        #: each lease's checkpoint: the number of changes it has processed
        self.checkpoints: dict[str, int] = {lease: 0}

    def checkpoint(self, lease: str = "0", *, at: int | None = None) -> None:
        """`lease` checkpointed after change `at` (default: the latest)."""
        with self.store._lock:
            self.checkpoints[lease] = len(self.store.changes) if at is None else at

    def estimate(self) -> list[LeaseBacklog]:
        with self.store._lock:
            changes = list(self.store.changes)
        found = []
        for lease, done in self.checkpoints.items():
            pending = [
                change
                for change in changes[done:]
                if any(d.get("type") == EVENT_TYPE for d in change)
            ]
            oldest = None
            if pending:
                first = next(d for d in pending[0] if d.get("type") == EVENT_TYPE)
                oldest = document_created_at(first)
            ids = tuple(
                str(d.get("id"))
                for change in pending
                for d in change
                if d.get("type") == EVENT_TYPE
            )
            found.append(
                LeaseBacklog(
                    lease=lease,
                    pending=len(pending),
                    oldest_created_at=oldest,
                    pending_ids=ids,
                    pending_ids_complete=True,
                )
            )
        return found


class FixedBacklog(BacklogEstimator):
    """A backlog estimator that reports what a test sets."""

    def __init__(self, leases: list[LeaseBacklog] | None = None) -> None:
        self.leases = leases or []

    def estimate(self) -> list[LeaseBacklog]:
        return list(self.leases)


class InMemoryScheduleQueue(ScheduleQueue):
    """The schedule queue, in memory: each release scheduled is handed back (`due(now)`) once
    its time has come, never before, soonest first, once. A test reads what was scheduled and
    for when (`scheduled`: every release, in the order scheduled; `waiting`: those not handed
    back yet), and makes scheduling fail (`unavailable`: `schedule` raises while set)."""

    def __init__(self) -> None:
        self.scheduled: list[Release] = []
        self.unavailable = False
        self._waiting: list[tuple[datetime, int, Release]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()

    def schedule(self, releases: Sequence[Release]) -> None:
        with self._lock:
            if self.unavailable:
                raise ConnectionError("schedule queue unavailable")
            for release in releases:
                self.scheduled.append(release)
                heapq.heappush(self._waiting, (release.at, next(self._order), release))

    def due(self, now: datetime) -> list[Release]:
        """The releases whose time has come by `now` (handed back once: taken off the queue)."""
        with self._lock:
            found = []
            while self._waiting and self._waiting[0][0] <= now:
                found.append(heapq.heappop(self._waiting)[2])
            return found

    @property
    def waiting(self) -> list[Release]:
        """The releases not handed back yet, soonest first."""
        with self._lock:
            return [release for _, _, release in sorted(self._waiting)]

    def next_at(self) -> datetime | None:
        """When the soonest release waiting is due (None: none waits)."""
        with self._lock:
            return self._waiting[0][0] if self._waiting else None
