"""The unit of work, over a document store (`cosmos_outbox.ports.AsyncDocumentStore`): which
aggregates it loaded or added, the etag of each, and the batches a commit writes (the aggregate,
its events and the claimed idempotency record, one transactional batch per aggregate, in its
partition, conditioned on the etag it was read with). Nothing is written unless `commit()`
runs. This is the async API's; the sync API runs it over a sync store
(`cosmos_outbox._sync_bridge`).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Generic, TypeVar, cast

from cosmos_outbox._documents import (
    aggregate_from_document,
    claim_operation,
    commit_operations,
    idempotency_record,
)
from cosmos_outbox._domain import Aggregate, Event
from cosmos_outbox._idempotency import IdempotencyRecord
from cosmos_outbox.errors import NotFoundError, PreconditionFailedError, UnrecordedChangeError
from cosmos_outbox.ports import AsyncDocumentStore, BatchOperation

A = TypeVar("A", bound="Aggregate")


class Repository(Generic[A]):
    """Aggregates of one type in one unit of work. Remembers the etag of each it loaded or
    wrote, and the state each was read with (a change must record its event)."""

    def __init__(self, store: AsyncDocumentStore, kind: type[A]) -> None:
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
        document = await self._store.read(aggregate_id, aggregate_id)
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
                continue
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


class UnitOfWork:
    """Nothing is written unless `commit()` runs; a commit writes each changed aggregate and the
    events it raised in one atomic batch, conditioned on the etag it was loaded with. Used as
    `async with`: leaving the block forgets what was not committed."""

    def __init__(
        self, store: AsyncDocumentStore, *, event_ttl_seconds: int, idempotency_ttl_seconds: int
    ) -> None:
        self.store = store
        self.event_ttl_seconds = event_ttl_seconds
        self.idempotency_ttl_seconds = idempotency_ttl_seconds
        self._repositories: dict[type[Aggregate], Repository[Any]] = {}
        self._claimed: IdempotencyRecord | None = None

    async def __aenter__(self) -> UnitOfWork:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.rollback()

    def repository(self, kind: type[A]) -> Repository[A]:
        """The repository of one aggregate type (the same one for the whole unit of work)."""
        if kind not in self._repositories:
            self._repositories[kind] = Repository(self.store, kind)
        return cast(Repository[A], self._repositories[kind])

    def claim(self, record: IdempotencyRecord) -> None:
        """Create `record` (an Idempotency-Key's) at the next commit, in the batch of its
        aggregate (`record.aggregate_id`), so it commits with the change or not at all; when
        that aggregate has nothing to write, the record is written alone. A record of the same
        id already there fails the batch: AlreadyExistsError, nothing written."""
        self._claimed = record

    async def commit(self, *, traceparent: str | None = None) -> None:
        """Write the tracked changes atomically, one batch per aggregate. Raises
        PreconditionFailedError when an aggregate changed since it was loaded,
        AlreadyExistsError on an id collision, UnrecordedChangeError (before any write) when a
        change recorded no event."""
        claim, self._claimed = self._claimed, None
        pending = [
            (repository, repository.pending()) for repository in self._repositories.values()
        ]  # all checked, then written
        for repository, writes in pending:
            for aggregate, events, etag in writes:
                aggregate.collect_events()
                planned = commit_operations(
                    aggregate,
                    events,
                    etag=etag,
                    event_ttl_seconds=self.event_ttl_seconds,
                    traceparent=traceparent,
                )
                if claim is not None and claim.aggregate_id == aggregate.id:
                    planned.append(self._claim(claim))
                    claim = None
                etags = await self.store.execute_batch(aggregate.id, planned)
                repository.written(aggregate.id, _etag(etags))
        if claim is not None:  # its aggregate has nothing to write: the record alone
            await self.store.execute_batch(claim.aggregate_id, [self._claim(claim)])

    def _claim(self, record: IdempotencyRecord) -> BatchOperation:
        return claim_operation(record, ttl_seconds=self.idempotency_ttl_seconds)

    async def recorded(self, aggregate_id: str, record_id: str) -> IdempotencyRecord | None:
        """The idempotency record `record_id` in the aggregate's partition; None when there is
        none (never written, or expired)."""
        document = await self.store.read(aggregate_id, record_id)
        return idempotency_record(document) if document is not None else None

    def rollback(self) -> None:
        """Forget every uncommitted change."""
        self._claimed = None
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
