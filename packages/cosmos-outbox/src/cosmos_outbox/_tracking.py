"""The bookkeeping every unit of work and repository implementation shares (the Cosmos adapter
and the tests' in-memory fake): which aggregates a unit of work loaded or added, the etag of
each, and which batches a commit writes (the aggregate, its events and the claimed
idempotency record, one batch per partition). An implementation only executes one batch and
reads one document."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import Any, cast

from cosmos_outbox.documents import (
    WriteOperation,
    claim_operation,
    commit_operations,
    idempotency_record,
)
from cosmos_outbox.domain import Aggregate, DomainEvent
from cosmos_outbox.idempotency import IdempotencyRecord
from cosmos_outbox.ports import Repository, UnitOfWork


class TrackingRepository[A: Aggregate](Repository[A]):
    """Tracks what this unit of work loaded or added, and the etag each was read or written
    with. Subclasses only read."""

    def __init__(self, kind: type[A]) -> None:
        self.kind = kind
        self.tracked: dict[str, A] = {}
        self.new: set[str] = set()
        self.etags: dict[str, str] = {}

    def add(self, aggregate: A) -> None:
        self.tracked[aggregate.id] = aggregate
        self.new.add(aggregate.id)

    def get(self, aggregate_id: str) -> A:
        aggregate, etag = self.read(aggregate_id)
        self.tracked[aggregate.id] = aggregate
        self.etags[aggregate.id] = etag
        return aggregate

    @abc.abstractmethod
    def read(self, aggregate_id: str) -> tuple[A, str]:
        """The stored aggregate and its etag. Raises NotFoundError."""

    def etag(self, aggregate_id: str) -> str:
        return self.etags[aggregate_id]

    def pending(self) -> Iterator[tuple[A, list[DomainEvent], str | None]]:
        """Each aggregate to write, the events it raised, and the etag to condition on (None
        for a new one). Unchanged aggregates are skipped."""
        for aggregate_id, aggregate in self.tracked.items():
            events = aggregate.collect_events()
            if events or aggregate_id in self.new:
                etag = None if aggregate_id in self.new else self.etags[aggregate_id]
                yield aggregate, events, etag

    def written(self, aggregate_id: str, etag: str) -> None:
        self.new.discard(aggregate_id)
        self.etags[aggregate_id] = etag

    def forget(self) -> None:
        for aggregate in self.tracked.values():
            aggregate.collect_events()
        self.tracked.clear()
        self.new.clear()


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
        for repository in self._repositories.values():
            for aggregate, events, etag in repository.pending():
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
