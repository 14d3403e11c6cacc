"""The unit of work, over the write side of a container (`cosmos_outbox.ports.AsyncBatchStore`):
which aggregates it loaded or added, the etag of each, and the batches a commit writes: per changed
aggregate, one transactional batch in its partition (`aggregate_partition`), assembled as every
batch of the write path is (`cosmos_outbox._write.batch`): the aggregate's document (its stream's
head, conditioned on the etag it was read with), its events, the scheduled events its change
cancels (`Aggregate.cancel_scheduled`: `cosmos_outbox._write.cancels`), and the Idempotency-Key's
record when one is remembered for it. Nothing is written unless `commit()` runs.

An aggregate's document (the aggregate's whole state: its fields, camelCase, minus the id;
the etag and the other system properties stay here, never in the domain):

    {"id", "partitionKey": <aggregate id>, "type": <aggregate type>, "data": {...}, "ttl": -1}

This is the async API's; the sync API runs it over a sync store (`cosmos_outbox._sync_over_async`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

from cosmos_outbox._domain import Aggregate, Event, read_back
from cosmos_outbox._mapper import aggregate_event_document, aggregate_partition, stored_body
from cosmos_outbox._renamed import deprecated
from cosmos_outbox._write.batch import Batch, envelope_at_most, json_bytes, text_at_most
from cosmos_outbox._write.cancels import cancel_operation, cancel_refused
from cosmos_outbox._write.idempotency import IdempotencyRecord, read_record, record_operation
from cosmos_outbox._write.scope import Uncommitted
from cosmos_outbox._write.streams import head_operation
from cosmos_outbox.errors import NotFoundError, PreconditionFailedError, UnrecordedChangeError
from cosmos_outbox.ports import AsyncBatchStore, BatchOperation

A = TypeVar("A", bound="Aggregate")

__all__ = [
    "Repository",
    "UnitOfWork",
    "aggregate_batch",
    "aggregate_document",
    "aggregate_from_document",
    "commit_operations",
]

#: What an aggregate's batch holds, and what to do when it is too large (the limits' error).
_WHAT = (
    "the aggregate, the events it recorded, the idempotency record",
    "record fewer or smaller events in one change",
)


def aggregate_document(aggregate: Aggregate) -> dict[str, Any]:
    """The stored document of an aggregate (see the module)."""
    return {
        "id": aggregate.id,
        "partitionKey": aggregate_partition(aggregate.id),
        "type": aggregate.aggregate_type,
        "data": aggregate.model_dump(mode="json", by_alias=True, exclude={"id"}),
        "ttl": -1,
    }


def aggregate_from_document(kind: type[A], document: Mapping[str, Any]) -> A:
    """The aggregate a stored document holds. NotFoundError when it is another kind of document
    (an event or a quarantined event with that id)."""
    if document.get("type") != kind.aggregate_type:
        raise NotFoundError(kind.aggregate_type, str(document.get("id")))
    return read_back(kind.model_validate({**document["data"], "id": document["id"]}))


def aggregate_batch(
    aggregate: Aggregate,
    events: list[Event],
    *,
    etag: str | None,
    event_ttl_seconds: int,
    traceparent: str | None,
    record: BatchOperation | None = None,
    cancels: Sequence[BatchOperation] = (),
) -> Batch:
    """What one change of an aggregate writes, as one batch in its partition: the aggregate
    (created when `etag` is None, else replaced on its condition: the head of its events'
    stream, `cosmos_outbox._write.streams`), a create per event (given the request's
    `traceparent` when it has none), the `cancels` of scheduled events it cancels, and the
    Idempotency-Key's `record`."""
    document = aggregate_document(aggregate)
    source = aggregate.source()
    documents = []
    bound = json_bytes(document, "aggregate", aggregate.id)
    for event in events:
        if traceparent and event.traceparent is None:
            event = event.model_copy(update={"traceparent": traceparent})
        stored = aggregate_event_document(event, source=source, ttl_seconds=event_ttl_seconds)
        documents.append(stored)
        bound += text_at_most(stored_body(stored)) + envelope_at_most(
            aggregate_partition(event.aggregate_id),
            event.aggregate_id,
            event.aggregate_type,
            event.action,
            source,
            event.traceparent or "",
        )
    if record is not None:
        bound += json_bytes(record.document, "the idempotency record")
    for cancel in cancels:
        bound += json_bytes(cancel.document, "the cancel of", cancel.document_id)
    return Batch.assemble(
        aggregate_partition(aggregate.id),
        (),
        head_operation(document, etag),
        [*(BatchOperation("create", event) for event in documents), *cancels],
        record,
        bound,
        _WHAT,
    )


def commit_operations(
    aggregate: Aggregate,
    events: list[Event],
    *,
    etag: str | None,
    event_ttl_seconds: int,
    traceparent: str | None,
) -> list[BatchOperation]:
    """What one change of an aggregate writes (`aggregate_batch`), as operations."""
    return aggregate_batch(
        aggregate,
        events,
        etag=etag,
        event_ttl_seconds=event_ttl_seconds,
        traceparent=traceparent,
    ).operations


class Repository(Generic[A]):
    """Aggregates of one type in one unit of work. Remembers the etag of each it loaded or
    wrote, and the state each was read with (a change must record its event)."""

    def __init__(self, store: AsyncBatchStore, kind: type[A]) -> None:
        self.kind = kind
        self._store = store
        self.tracked: dict[str, A] = {}
        self.new: set[str] = set()
        self.etags: dict[str, str] = {}
        #: each loaded aggregate's state as read (to refuse a change that records no event)
        self.loaded: dict[str, dict[str, Any]] = {}

    def add(self, aggregate: A) -> None:
        """Track a new aggregate: it is created at the commit."""
        self.tracked[aggregate.id] = aggregate
        self.new.add(aggregate.id)

    async def get(self, aggregate_id: str) -> A:
        """Load an aggregate (NotFoundError when there is none of this type with this id)."""
        document = await self._store.read(aggregate_partition(aggregate_id), aggregate_id)
        if document is None:
            raise NotFoundError(self.kind.aggregate_type, aggregate_id)
        aggregate = aggregate_from_document(self.kind, document)
        self.tracked[aggregate.id] = aggregate
        self.etags[aggregate.id] = str(document["_etag"])
        self.loaded[aggregate.id] = _state(aggregate)
        return aggregate

    def etag(self, aggregate_id: str) -> str:
        """The etag of the aggregate as last read or written in this unit of work."""
        return self.etags[aggregate_id]

    def pending(self) -> list[tuple[A, list[Event], str | None]]:
        """Each aggregate to write, the events it raised, and the etag to condition on (None
        for a new one). Unchanged aggregates are skipped. Every state change has its event:
        a loaded aggregate whose state changed without one, or a new aggregate that recorded
        none, raises UnrecordedChangeError before anything is written."""
        planned = []
        for aggregate_id, aggregate in self.tracked.items():
            events = aggregate.events
            new = aggregate_id in self.new
            if not events:
                changed = [] if new else _changed(self.loaded[aggregate_id], _state(aggregate))
                if new or changed:
                    raise UnrecordedChangeError(aggregate.aggregate_type, aggregate_id, changed)
                if not aggregate.cancels:
                    continue  # unchanged: nothing to write (a change that only cancels writes)
            planned.append((aggregate, events, None if new else self.etags[aggregate_id]))
        return planned

    def written(self, aggregate_id: str, etag: str) -> None:
        self.new.discard(aggregate_id)
        self.etags[aggregate_id] = etag
        self.loaded[aggregate_id] = _state(self.tracked[aggregate_id])

    def forget(self) -> None:
        for aggregate in self.tracked.values():
            aggregate.collect_events()
        self.tracked.clear()
        self.new.clear()
        self.loaded.clear()


class UnitOfWork(Uncommitted):
    """Nothing is written unless `commit()` runs; a commit writes each changed aggregate and the
    events it raised in one atomic batch, conditioned on the etag it was loaded with. Used as
    `async with`: leaving the block forgets what was not committed."""

    def __init__(
        self, store: AsyncBatchStore, *, event_ttl_seconds: int, idempotency_ttl_seconds: int
    ) -> None:
        self.store = store
        self.event_ttl_seconds = event_ttl_seconds
        self.idempotency_ttl_seconds = idempotency_ttl_seconds
        self._repositories: dict[type[Aggregate], Repository[Any]] = {}
        self._remembered: IdempotencyRecord | None = None

    def repository(self, kind: type[A]) -> Repository[A]:
        """The repository of one aggregate type (the same one for the whole unit of work)."""
        if kind not in self._repositories:
            self._repositories[kind] = Repository(self.store, kind)
        return cast(Repository[A], self._repositories[kind])

    def remember(self, record: IdempotencyRecord) -> None:
        """Create `record` (an Idempotency-Key's) at the next commit, in the batch of the
        aggregate whose partition it is in (`record.aggregate_id`), so it commits with the
        change or not at all; when that aggregate has nothing to write, the record is written
        alone. A record of the same id already there fails the batch: AlreadyExistsError,
        nothing written."""
        self._remembered = record

    def claim(self, record: IdempotencyRecord) -> None:
        """Deprecated (removed in 0.5): `remember`."""
        deprecated("UnitOfWork.claim", "UnitOfWork.remember")
        self.remember(record)

    async def commit(self, *, traceparent: str | None = None) -> None:
        """Write the tracked changes atomically, one batch per aggregate. Raises
        PreconditionFailedError when an aggregate changed since it was loaded,
        AlreadyExistsError on an id collision, UnrecordedChangeError (before any write) when a
        change recorded no event, BatchTooLargeError (before any write of that aggregate) when
        its batch passes Cosmos DB's limits."""
        remembered, self._remembered = self._remembered, None
        batches: list[tuple[Repository[Any], Aggregate, Batch, list[str]]] = []
        for repository in self._repositories.values():
            for aggregate, events, etag in repository.pending():
                record = None
                partition = aggregate_partition(aggregate.id)
                if remembered is not None and remembered.aggregate_id == partition:
                    record, remembered = self._record(remembered), None
                cancels: list[BatchOperation] = []
                for event_id in aggregate.cancels:
                    cancel = await cancel_operation(self.store, partition, event_id)
                    if cancel is not None:
                        cancels.append(cancel)
                batch = aggregate_batch(
                    aggregate,
                    events,
                    etag=etag,
                    event_ttl_seconds=self.event_ttl_seconds,
                    traceparent=traceparent,
                    record=record,
                    cancels=cancels,
                )
                batch.check()
                batches.append((repository, aggregate, batch, [c.document_id for c in cancels]))
        # all checked (every change recorded its event, every batch within the limits), then
        # written
        for repository, aggregate, batch, cancelled in batches:
            aggregate.collect_events()
            etags = await self._send(batch, cancelled)
            repository.written(aggregate.id, _etag(etags))
        if remembered is not None:  # its aggregate has nothing to write: the record alone
            await self.store.execute_batch(remembered.aggregate_id, [self._record(remembered)])

    async def _send(self, batch: Batch, cancels: list[str]) -> list[str | None]:
        """Write `batch`; refused at one of its `cancels` because another batch cancelled that
        event first, it is sent again without it (released since: TooLateToCancelError)."""
        while True:
            try:
                return await batch.send(self.store)
            except (PreconditionFailedError, NotFoundError) as exc:
                index = exc.operation_index
                refused = batch.operations[index] if index is not None else None
                if refused is None or refused.kind != "replace":
                    raise
                event_id = refused.document_id
                if event_id not in cancels or not await cancel_refused(
                    self.store, batch.partition_key, event_id
                ):
                    raise
                assert index is not None
                del batch.operations[index]
                cancels.remove(event_id)

    def _record(self, record: IdempotencyRecord) -> BatchOperation:
        return record_operation(record, ttl_seconds=self.idempotency_ttl_seconds)

    async def recorded(self, aggregate_id: str, record_id: str) -> IdempotencyRecord | None:
        """The idempotency record `record_id` in the aggregate's partition; None when there is
        none (never written, or expired)."""
        return await read_record(self.store, aggregate_partition(aggregate_id), record_id)

    def rollback(self) -> None:
        """Forget every uncommitted change."""
        self._remembered = None
        for repository in self._repositories.values():
            repository.forget()

    async def ping(self) -> None:
        """The store answers and its container exists (TransientStoreError if not)."""
        await self.store.ping()


def _etag(etags: list[str | None]) -> str:
    """The etag the batch's first operation (the aggregate) left."""
    if not etags or not etags[0]:
        raise PreconditionFailedError("the store returned no etag for the written aggregate")
    return etags[0]


def _state(aggregate: Aggregate) -> dict[str, Any]:
    """What of an aggregate is stored (its fields as JSON), to tell whether a change altered it."""
    return aggregate.model_dump(mode="json")


def _changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
