"""The sync API's write path: thin shells that run the async one (`unit_of_work`, `service`,
`transaction`) over sync adapters (`cosmos_outbox._sync_over_async.run_sync`). No logic here: each
method calls its coroutine and runs it to its end in the caller's thread. A shell's method is
the async method itself where it can be (`_passed`: one that does no I/O; `_ran`: a coroutine,
run to its end), so its parameters are written once, in the async API: an option added there is
the sync API's too."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeAlias, TypeVar, cast

from cosmos_outbox._callables import refuse_async
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._renamed import deprecated
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox._write import service, transaction, unit_of_work
from cosmos_outbox._write.idempotency import IdempotencyKey, IdempotencyRecord, Recorded
from cosmos_outbox._write.scope import Uncommitted
from cosmos_outbox._write.service import Versioned

A = TypeVar("A", bound="Aggregate")
P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["AggregateService", "Repository", "Runner", "Transaction", "UnitOfWork"]

#: What runs a coroutine to its end: `run_sync` (the default: over sync adapters, in the
#: caller's thread), or a test's runner on an event loop (to drive async adapters the same way).
Runner: TypeAlias = Callable[[Coroutine[Any, Any, Any]], Any]


def _passed(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A shell's method that does no I/O: the async API's `method`, called on the shell's
    `core` (its name, parameters and docstring)."""
    name = method.__name__

    @functools.wraps(method)
    def passed(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast(R, getattr(self.core, name)(*args, **kwargs))

    return passed


def _ran(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Any, P], R]:
    """A shell's method that does I/O: the async API's coroutine `method`, on the shell's
    `core`, run to its end by the shell's runner."""
    name = method.__name__

    @functools.wraps(method)
    def ran(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast(R, self._run(getattr(self.core, name)(*args, **kwargs)))

    return ran


class _OfKind(Protocol):
    kind: type[Any]


C = TypeVar("C", bound=_OfKind)


class _Shell(Generic[A, C]):
    """A shell over an async core `C` of aggregates of one type (`kind`), and what runs the
    core's coroutines."""

    def __init__(self, core: C, *, run: Runner = run_sync) -> None:
        self._core = core
        self._run = run

    @property
    def kind(self) -> type[A]:
        return cast("type[A]", self._core.kind)


class Repository(_Shell[A, unit_of_work.Repository[A]]):
    """Aggregates of one type in one unit of work (sync)."""

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

    remember = _passed(unit_of_work.UnitOfWork.remember)
    commit = _ran(unit_of_work.UnitOfWork.commit)
    recorded = _ran(unit_of_work.UnitOfWork.recorded)
    rollback = _passed(unit_of_work.UnitOfWork.rollback)
    ping = _ran(unit_of_work.UnitOfWork.ping)

    def claim(self, record: IdempotencyRecord) -> None:
        """Deprecated (removed in 0.5): `remember`."""
        deprecated("UnitOfWork.claim", "UnitOfWork.remember")
        self.remember(record)


class AggregateService(_Shell[A, service.AggregateService[A]]):
    """Create, read and change aggregates of one type, each in one unit of work and at most one
    transactional batch (`cosmos_outbox.aio.AggregateService` says how). Its callables are plain
    functions: a coroutine function is refused when it is given (use the async API)."""

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
    says how; its methods are these, those that do I/O run to their end here). Used as
    `with`: leaving the block forgets what was not committed.

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

    create = _passed(transaction.Transaction.create)
    upsert = _passed(transaction.Transaction.upsert)
    replace = _passed(transaction.Transaction.replace)
    patch = _passed(transaction.Transaction.patch)
    delete = _passed(transaction.Transaction.delete)
    read = _ran(transaction.Transaction.read)
    publish = _passed(transaction.Transaction.publish)
    cancel = _ran(transaction.Transaction.cancel)
    replay = _ran(transaction.Transaction.replay)
    remember = _passed(transaction.Transaction.remember)
    commit = _ran(transaction.Transaction.commit)
    rollback = _passed(transaction.Transaction.rollback)

    def claim(self, key: str, *, request: Any, answer: Any = None, scope: str = "") -> None:
        """Deprecated (removed in 0.5): `remember`."""
        deprecated("Transaction.claim", "Transaction.remember")
        self.remember(key, request=request, answer=answer, scope=scope)
