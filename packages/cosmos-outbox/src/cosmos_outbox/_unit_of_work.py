"""The bookkeeping every unit of work and repository implementation shares (the Cosmos adapter
and the tests' in-memory fake): which aggregates a unit of work loaded or added, the etag of
each, and which batches a commit writes (the aggregate, its events and the claimed
idempotency record, one batch per partition). An implementation only executes one batch and
reads one document."""

from __future__ import annotations

import abc
from typing import Any, cast

from cosmos_outbox._documents import (
    WriteOperation,
    claim_operation,
    commit_operations,
    idempotency_record,
)
from cosmos_outbox._domain import Aggregate, Event
from cosmos_outbox._idempotency import IdempotencyRecord
from cosmos_outbox.errors import UnrecordedChangeError
from cosmos_outbox.ports import Repository, UnitOfWork


class TrackingRepository[A: Aggregate](Repository[A]):
    """Tracks what this unit of work loaded or added, and the etag each was read or written
    with. Subclasses only read."""

    def __init__(self, kind: type[A]) -> None:
        self.kind = kind
        self.tracked: dict[str, A] = {}
        self.new: set[str] = set()
        self.etags: dict[str, str] = {}
        #: each loaded aggregate's state as read (to refuse a change that records no event)
        self.loaded: dict[str, dict[str, Any]] = {}

    def add(self, aggregate: A) -> None:
        self.tracked[aggregate.id] = aggregate
        self.new.add(aggregate.id)

    def get(self, aggregate_id: str) -> A:
        aggregate, etag = self.read(aggregate_id)
        self.tracked[aggregate.id] = aggregate
        self.etags[aggregate.id] = etag
        self.loaded[aggregate.id] = _state(aggregate)
        return aggregate

    @abc.abstractmethod
    def read(self, aggregate_id: str) -> tuple[A, str]:
        """The stored aggregate and its etag. Raises NotFoundError."""

    def etag(self, aggregate_id: str) -> str:
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


def _state(aggregate: Aggregate) -> dict[str, Any]:
    """What of an aggregate is stored (its fields as JSON), to tell whether a change altered it."""
    return aggregate.model_dump(mode="json")


def _changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted(name for name in before.keys() | after.keys()
                  if before.get(name) != after.get(name))


class TrackingUnitOfWork(UnitOfWork):
    """A unit of work over one store: `_repository` makes a repository, `_execute` runs one
    transactional batch in one partition (all or nothing; the first operation's etag back),
    `_read` reads one document (None when missing)."""

    def __init__(self, *, event_ttl_seconds: int, idempotency_ttl_seconds: int) -> None:
        self.event_ttl_seconds = event_ttl_seconds
        self.idempotency_ttl_seconds = idempotency_ttl_seconds
        self._repositories: dict[type[Aggregate], TrackingRepository[Any]] = {}
        self._claimed: IdempotencyRecord | None = None

    @abc.abstractmethod
    def _repository[A: Aggregate](self, kind: type[A]) -> TrackingRepository[A]: ...

    @abc.abstractmethod
    def _execute(self, aggregate_type: str, partition_key: str,
                 operations: list[WriteOperation]) -> str:
        """Run one atomic batch; the etag the first operation wrote. Raises the application
        errors (AlreadyExistsError, PreconditionFailedError, ...)."""

    @abc.abstractmethod
    def _read(self, partition_key: str, document_id: str) -> dict[str, Any] | None: ...

    def repository[A: Aggregate](self, kind: type[A]) -> Repository[A]:
        if kind not in self._repositories:
            self._repositories[kind] = self._repository(kind)
        return cast(Repository[A], self._repositories[kind])

    def claim(self, record: IdempotencyRecord) -> None:
        self._claimed = record

    def commit(self, *, traceparent: str | None = None) -> None:
        claim, self._claimed = self._claimed, None
        pending = [(repository, repository.pending())
                   for repository in self._repositories.values()]  # all checked, then written
        for repository, writes in pending:
            for aggregate, events, etag in writes:
                aggregate.collect_events()
                planned = commit_operations(
                    aggregate, events, etag=etag, event_ttl_seconds=self.event_ttl_seconds,
                    traceparent=traceparent)
                if claim is not None and claim.aggregate_id == aggregate.id:
                    planned.append(self._claim(claim))
                    claim = None
                written = self._execute(aggregate.aggregate_type, aggregate.id, planned)
                repository.written(aggregate.id, written)
        if claim is not None:  # its aggregate has nothing to write: the record alone
            self._execute(claim.aggregate_type, claim.aggregate_id, [self._claim(claim)])

    def _claim(self, record: IdempotencyRecord) -> WriteOperation:
        return claim_operation(record, ttl_seconds=self.idempotency_ttl_seconds)

    def recorded(self, aggregate_id: str, record_id: str) -> IdempotencyRecord | None:
        document = self._read(aggregate_id, record_id)
        return idempotency_record(document) if document is not None else None

    def rollback(self) -> None:
        self._claimed = None
        for repository in self._repositories.values():
            repository.forget()
