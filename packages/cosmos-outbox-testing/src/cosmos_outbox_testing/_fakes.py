"""In-memory fakes of the core's ports, each held to the same contract suite as the real adapter
(`cosmos_outbox_testing.contracts`, run on both), so a test on a fake says something true of
production; the async API awaits these sync fakes as they are."""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import threading
import time
from collections.abc import (
    Callable,
    ItemsView,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from datetime import UTC, datetime
from typing import Any

from cosmos_changefeed import ConflictError
from cosmos_changefeed import NotFoundError as MissingError
from cosmos_changefeed import PreconditionFailedError as EtagError
from cosmos_changefeed.testing import InMemoryFeed
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
    """Documents by (partition key, id) on a container of cosmos-changefeed's in-memory feed
    (`feed`: `cosmos_changefeed.testing.InMemoryFeed`, partitioned on `/partitionKey`), which
    keeps them as Cosmos DB does: etags, transactional batches all or none (one change of its
    feed each), 409/404/412, and per-item TTL (container `defaultTtl -1`: a document with a
    positive `ttl` is gone that many seconds after it was last written). Time is `clock()`
    (seconds) plus what `elapse()` added. What it keeps and gives back is JSON, never a caller's
    objects. `documents` is its documents by (partition key, id), as a mapping (deleting from
    it deletes)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._elapsed = 0.0
        self.feed = InMemoryFeed(partition_key_path="/partitionKey", clock=self._datetime)
        self.documents = _Documents(self)
        self._lock = threading.RLock()
        #: raised by the next batch (then forgotten): a store failure for one write
        self.fail_next: OutboxError | None = None
        #: raised by every health check while set: a store that is down
        self.unavailable: OutboxError | None = None
        self.batches = 0

    # -- tests' own access ----------------------------------------------------------------

    def put(self, document: Mapping[str, Any]) -> None:
        """Write outside any unit of work (tests plant documents this way)."""
        self._write([("upsert", _copy(document), None)])

    def elapse(self, seconds: float) -> None:
        """Move the store's time on: documents whose TTL ran out are deleted."""
        with self._lock:
            self._elapsed += seconds
            self.feed.expire()

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
        return self._all(partition_key)

    # -- DocumentStore --------------------------------------------------------------------

    def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]:
        with self._lock:
            if self.fail_next is not None:
                injected, self.fail_next = self.fail_next, None
                raise injected
            self.feed.expire()
            writes: list[tuple[str, dict[str, Any], str | None]] = []
            for op in operations:
                key = {"id": op.document_id, "partitionKey": partition_key}
                if op.kind == "delete":
                    writes.append(("delete", key, op.if_match))
                elif op.kind == "patch":  # of the document as the batch left it, or stored
                    staged = [w[1] for w in writes if w[1]["id"] == op.document_id]
                    current = staged[-1] if staged else self.feed.document(key["id"], partition_key)
                    patched = _patched(current, op.patch) if current is not None else key
                    writes.append(("replace", patched, op.if_match))
                else:  # as Cosmos DB's store: the batch's partition where a document has none
                    writes.append(
                        (
                            op.kind,
                            {"partitionKey": partition_key} | _copy(op.document or {}),
                            op.if_match,
                        )
                    )
            stored = self._write(writes, partition_key)
            self.batches += 1
            return [d["_etag"] if d is not None else None for d in stored]

    def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        with self._lock:
            self.feed.expire()
            return self.feed.document(document_id, partition_key)

    def upsert(self, document: Mapping[str, Any]) -> dict[str, Any]:
        [stored] = self._write([("upsert", _copy(document), None)])
        assert stored is not None
        return stored

    def replace(
        self, document: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        [stored] = self._write([("replace", _copy(document), if_match)])
        assert stored is not None
        return stored

    def delete(self, partition_key: str, document_id: str) -> None:
        self._write([("delete", {"id": document_id, "partitionKey": partition_key}, None)])

    def find(self, type_: str, document_id: str) -> dict[str, Any] | None:
        found = (d for d in self._all() if d["id"] == document_id and d.get("type") == type_)
        return next(found, None)

    def of_type(self, type_: str, *, partition_key: str | None = None) -> list[dict[str, Any]]:
        return [d for d in self._all(partition_key) if d.get("type") == type_]

    def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        rows = sorted(self.of_type(type_), key=lambda d: (d["partitionKey"], d["id"]))
        return _page(rows, "mem", page_size, continuation)

    def query(
        self, query: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[Any]:
        """The query run by cosmos-sql's engine over the documents (of one partition when
        `partition_key` is given), in the order they were first written unless it orders them.
        A part of the language the engine does not serve is refused (InvalidQueryError naming
        it), never answered another way; so is a cross-partition aggregate without VALUE, as
        Cosmos DB's SDK refuses it."""
        from cosmos_sql import QueryUnsupported, run_query

        named = named_parameters(parameters)
        documents = self._all(partition_key)
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
        asked = [query, sorted(named_parameters(parameters).items()), partition_key]
        digest = hashlib.sha256(json.dumps(asked, default=str).encode()).hexdigest()[:16]
        return _page(rows, f"mem-query:{digest}", page_size, continuation)

    def ping(self) -> None:
        if self.unavailable is not None:
            raise self.unavailable

    # -- inside ---------------------------------------------------------------------------

    def _datetime(self) -> datetime:
        return datetime.fromtimestamp(self._clock() + self._elapsed, UTC)

    def _all(self, partition_key: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            self.feed.expire()
            found = self.feed.documents()
        return [d for d in found if partition_key in (None, d["partitionKey"])]

    def _write(
        self,
        writes: Sequence[tuple[str, Mapping[str, Any], str | None]],
        partition_key: str | None = None,
    ) -> list[dict[str, Any] | None]:
        """The writes as one transactional batch of the feed (of `partition_key`, when given);
        its refusals as the outbox's."""
        with self._lock:
            self.feed.expire()
            try:
                return self.feed.batch(writes, partition_key=partition_key)
            except (ConflictError, MissingError, EtagError) as refused:
                index = getattr(refused, "operation_index", 0)
                document_id = str(writes[index][1]["id"])
                failure: OutboxError = (
                    AlreadyExistsError(f"document {document_id} exists")
                    if isinstance(refused, ConflictError)
                    else NotFoundError("document", document_id)
                    if isinstance(refused, MissingError)
                    else PreconditionFailedError("etag mismatch")
                )
                failure.operation_index = index
                raise failure from None


def _page(rows: list[Any], name: str, page_size: int, continuation: str | None) -> Page[Any]:
    """The page of `rows` a token `<name>:<offset>` (None: the first) points at, and the next
    one's token; a token of another name (another query's, or none the store issued) is
    InvalidContinuationError."""
    start = 0
    if continuation is not None:
        prefix, _, offset = continuation.rpartition(":")
        if prefix != name or not offset.isdigit():
            raise InvalidContinuationError(
                "this continuation token is not one the store gave this listing"
            )
        start = int(offset)
    end = start + page_size
    return Page(rows[start:end], f"{name}:{end}" if end < len(rows) else None)


class _Documents(MutableMapping[tuple[str, str], dict[str, Any]]):
    """An `InMemoryStore`'s documents by (partition key, id): read from its feed; a deletion
    deletes the document, a setting writes it."""

    def __init__(self, store: InMemoryStore) -> None:
        self._store = store

    def __getitem__(self, key: tuple[str, str]) -> dict[str, Any]:
        found = self._store.read(*key)
        if found is None:
            raise KeyError(key)
        return found

    def __setitem__(self, key: tuple[str, str], document: dict[str, Any]) -> None:
        self._store.put({**document, "partitionKey": key[0], "id": key[1]})

    def __delitem__(self, key: tuple[str, str]) -> None:
        if self._store.read(*key) is None:
            raise KeyError(key)
        self._store.delete(*key)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter([(d["partitionKey"], d["id"]) for d in self._store._all()])

    def __len__(self) -> int:
        return len(self._store._all())

    def items(self) -> ItemsView[tuple[str, str], dict[str, Any]]:  # one read, not one a key
        return {(d["partitionKey"], d["id"]): d for d in self._store._all()}.items()


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
    change feed (its feed's, read whole): per lease, the changes after its checkpoint (an LSN;
    a batch is one change) that carry an event document, latest versions only, and the
    creation time of the first of them. One lease (`"0"`: an in-memory store is one feed
    range), read from the start until `checkpoint()` moves it, as the trigger does after an
    invocation."""

    def __init__(self, store: InMemoryStore, *, lease: str = "0") -> None:
        self.store = store
        #: each lease's checkpoint: the LSN of the last change it processed
        self.checkpoints: dict[str, int] = {lease: 0}

    def checkpoint(self, lease: str = "0", *, at: int | None = None) -> None:
        """`lease` checkpointed after change `at` (default: the latest)."""
        latest = self.store.feed.latest_since(0)
        self.checkpoints[lease] = max((d["_lsn"] for d in latest), default=0) if at is None else at

    def estimate(self) -> list[LeaseBacklog]:
        found = []
        for lease, done in self.checkpoints.items():
            events = [d for d in self.store.feed.latest_since(done) if d.get("type") == EVENT_TYPE]
            found.append(
                LeaseBacklog(
                    lease=lease,
                    pending=len({d["_lsn"] for d in events}),
                    oldest_created_at=document_created_at(events[0]) if events else None,
                    pending_ids=tuple(str(d.get("id")) for d in events),
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
