"""The sync API's write path: thin shells that run the async one (`unit_of_work`, `service`,
`transaction`) over sync adapters (`cosmos_outbox._sync_bridge.run_sync`). No logic here: each
method calls its coroutine and runs it to its end in the caller's thread."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Generic, TypeAlias, TypeVar, cast

from pydantic import BaseModel

from cosmos_outbox._callables import refuse_async
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._renamed import deprecated
from cosmos_outbox._sync_bridge import run_sync
from cosmos_outbox._write import service, transaction, unit_of_work
from cosmos_outbox._write.idempotency import IdempotencyKey, IdempotencyRecord, Recorded
from cosmos_outbox._write.scope import Uncommitted
from cosmos_outbox._write.service import Versioned

A = TypeVar("A", bound="Aggregate")

__all__ = ["AggregateService", "Repository", "Runner", "Transaction", "UnitOfWork"]

#: What runs a coroutine to its end: `run_sync` (the default: over sync adapters, in the
#: caller's thread), or a test's runner on an event loop (to drive async adapters the same way).
Runner: TypeAlias = Callable[[Coroutine[Any, Any, Any]], Any]


class Repository(Generic[A]):
    """Aggregates of one type in one unit of work (sync)."""

    def __init__(self, core: unit_of_work.Repository[A], *, run: Runner = run_sync) -> None:
        self._core = core
        self._run = run

    @property
    def kind(self) -> type[A]:
        return self._core.kind

    def add(self, aggregate: A) -> None:
        """Track a new aggregate: it is created at the commit."""
        self._core.add(aggregate)

    def get(self, aggregate_id: str) -> A:
        """Load an aggregate (NotFoundError when there is none of this type with this id)."""
        return cast(A, self._run(self._core.get(aggregate_id)))

    def etag(self, aggregate_id: str) -> str:
        """The etag of the aggregate as last read or written in this unit of work."""
        return self._core.etag(aggregate_id)


class UnitOfWork(Uncommitted):
    """Nothing is written unless `commit()` runs; a commit writes each changed aggregate and the
    events it raised in one atomic transactional batch in its partition, conditioned on the
    etag it was read with. Used as `with`: leaving the block forgets what was not committed.

        with outbox.unit_of_work() as uow:
            order = uow.repository(Order).get(order_id)
            order.cancel()
            uow.commit()
    """

    def __init__(self, core: unit_of_work.UnitOfWork, *, run: Runner = run_sync) -> None:
        self.core = core
        self._run = run
        self._repositories: dict[type[Aggregate], Repository[Any]] = {}

    def repository(self, kind: type[A]) -> Repository[A]:
        """The repository of one aggregate type (the same one for the whole unit of work)."""
        if kind not in self._repositories:
            self._repositories[kind] = Repository(self.core.repository(kind), run=self._run)
        return cast(Repository[A], self._repositories[kind])

    def remember(self, record: IdempotencyRecord) -> None:
        """Write an Idempotency-Key's record in the batch of its aggregate at the next commit
        (`cosmos_outbox.aio.UnitOfWork.remember`)."""
        self.core.remember(record)

    def claim(self, record: IdempotencyRecord) -> None:
        """Deprecated (removed in 0.5): `remember`."""
        deprecated("UnitOfWork.claim", "UnitOfWork.remember")
        self.remember(record)

    def commit(self, *, traceparent: str | None = None) -> None:
        """Write the tracked changes, one transactional batch per aggregate
        (`cosmos_outbox.aio.UnitOfWork.commit`)."""
        self._run(self.core.commit(traceparent=traceparent))

    def recorded(self, aggregate_id: str, record_id: str) -> IdempotencyRecord | None:
        return cast(
            IdempotencyRecord | None, self._run(self.core.recorded(aggregate_id, record_id))
        )

    def rollback(self) -> None:
        """Forget every uncommitted change."""
        self.core.rollback()

    def ping(self) -> None:
        self._run(self.core.ping())


class AggregateService(Generic[A]):
    """Create, read and change aggregates of one type, each in one unit of work and at most one
    transactional batch (`cosmos_outbox.aio.AggregateService` says how). Its callables are plain
    functions: a coroutine function is refused when it is given (use the async API)."""

    def __init__(self, core: service.AggregateService[A], *, run: Runner = run_sync) -> None:
        self._core = core
        self._run = run

    @property
    def kind(self) -> type[A]:
        return self._core.kind

    def create(self, aggregate: A, *, traceparent: str | None = None) -> Versioned[A]:
        return cast(Versioned[A], self._run(self._core.create(aggregate, traceparent=traceparent)))

    def get(self, aggregate_id: str) -> Versioned[A]:
        return cast(Versioned[A], self._run(self._core.get(aggregate_id)))

    def change(
        self,
        aggregate_id: str,
        change: Callable[[A], object],
        *,
        precondition: Callable[[str], bool] | None = None,
        traceparent: str | None = None,
    ) -> Versioned[A]:
        refuse_async(change, "the change")
        return cast(
            Versioned[A],
            self._run(
                self._core.change(
                    aggregate_id, change, precondition=precondition, traceparent=traceparent
                )
            ),
        )

    def create_idempotent(
        self, build: Callable[[], A], *, key: IdempotencyKey[A], traceparent: str | None = None
    ) -> Versioned[A] | Recorded:
        refuse_async(build, "build")
        return cast(
            Versioned[A] | Recorded,
            self._run(self._core.create_idempotent(build, key=key, traceparent=traceparent)),
        )

    def change_idempotent(
        self,
        aggregate_id: str,
        change: Callable[[A], object],
        *,
        key: IdempotencyKey[A],
        precondition: Callable[[str], bool] | None = None,
        traceparent: str | None = None,
    ) -> Versioned[A] | Recorded:
        refuse_async(change, "the change")
        return cast(
            Versioned[A] | Recorded,
            self._run(
                self._core.change_idempotent(
                    aggregate_id,
                    change,
                    key=key,
                    precondition=precondition,
                    traceparent=traceparent,
                )
            ),
        )


class Transaction(Uncommitted):
    """A transaction on one partition of the outbox's container: your own documents and the
    events you publish, committed in one transactional batch (`cosmos_outbox.aio.Transaction`
    says how). Used as `with`: leaving the block forgets what was not committed.

        with outbox.transaction(customer_id, entity="booking") as tx:
            tx.upsert(booking)
            tx.publish("BookingConfirmed", {"bookingId": booking["id"]})
            tx.commit()
    """

    def __init__(self, core: transaction.Transaction, *, run: Runner = run_sync) -> None:
        self.core = core
        self._run = run

    @property
    def partition_key(self) -> str:
        return self.core.partition_key

    def create(self, document: Mapping[str, Any] | BaseModel) -> None:
        """Create a document (the commit fails, AlreadyExistsError, if its id is taken)."""
        self.core.create(document)

    def upsert(self, document: Mapping[str, Any] | BaseModel) -> None:
        """Create or replace a document."""
        self.core.upsert(document)

    def replace(
        self, document: Mapping[str, Any] | BaseModel, *, if_match: str | None = None
    ) -> None:
        """Replace a document if its etag is still `if_match` (else the whole batch fails)."""
        self.core.replace(document, if_match=if_match)

    def patch(
        self,
        document_id: str,
        operations: Sequence[Mapping[str, Any]],
        *,
        if_match: str | None = None,
    ) -> None:
        """Change parts of a document (Cosmos DB's patch operations)."""
        self.core.patch(document_id, operations, if_match=if_match)

    def delete(self, document_id: str, *, if_match: str | None = None) -> None:
        """Delete a document (NotFoundError at the commit when missing)."""
        self.core.delete(document_id, if_match=if_match)

    def read(self, document_id: str) -> dict[str, Any] | None:
        """A document of this partition as stored now (with its `_etag`), or None."""
        return cast(dict[str, Any] | None, self._run(self.core.read(document_id)))

    def publish(
        self,
        event: str | BaseModel,
        data: Mapping[str, Any] | BaseModel | None = None,
        *,
        subject: str | None = None,
        properties: Mapping[str, str | int] | None = None,
    ) -> str:
        """Publish an event with the commit (`cosmos_outbox.aio.Transaction.publish`); its id."""
        return self.core.publish(event, data, subject=subject, properties=properties)

    def replay(
        self, key: str, *, request: Mapping[str, Any] | str, scope: str = ""
    ) -> transaction.Committed | None:
        """The answer the first request with this Idempotency-Key recorded, or None for a new
        key: call it before your own checks (`cosmos_outbox.aio.Transaction.replay`)."""
        return cast(
            transaction.Committed | None,
            self._run(self.core.replay(key, request=request, scope=scope)),
        )

    def remember(
        self, key: str, *, request: Mapping[str, Any] | str, answer: Any = None, scope: str = ""
    ) -> None:
        """Record this request's Idempotency-Key and its answer with the commit
        (`cosmos_outbox.aio.Transaction.remember`)."""
        self.core.remember(key, request=request, answer=answer, scope=scope)

    def claim(
        self, key: str, *, request: Mapping[str, Any] | str, answer: Any = None, scope: str = ""
    ) -> None:
        """Deprecated (removed in 0.5): `remember`."""
        deprecated("Transaction.claim", "Transaction.remember")
        self.remember(key, request=request, answer=answer, scope=scope)

    def commit(self) -> transaction.Committed:
        """Write it all in one transactional batch (`cosmos_outbox.aio.Transaction.commit`);
        with nothing staged, no round trip and an empty `Committed`."""
        return cast(transaction.Committed, self._run(self.core.commit()))

    def rollback(self) -> None:
        """Forget what was staged and not committed."""
        self.core.rollback()
