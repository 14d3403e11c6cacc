"""The write path's ports, generic over aggregates: the unit of work and its repositories, and
one page of a listing. Fakes subclass them in tests and adapters in `infra/` implement them;
one contract suite holds both to the same behaviour. The outbox's own ports (publisher,
quarantine, event store, backlog) are in `cosmos_outbox.relay.ports`."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from types import TracebackType

from cosmos_outbox.domain import Aggregate
from cosmos_outbox.idempotency import IdempotencyRecord


@dataclass(frozen=True)
class Page[T]:
    """One page of a listing, and the store's token of the next page (None on the last)."""

    items: list[T]
    continuation_token: str | None


class Repository[A: Aggregate](abc.ABC):
    """Aggregates of one type in one unit of work. Remembers the etag of each it loaded or wrote."""

    @abc.abstractmethod
    def add(self, aggregate: A) -> None:
        """Track a new aggregate; it is created on commit."""

    @abc.abstractmethod
    def get(self, aggregate_id: str) -> A:
        """Load an aggregate. Raises NotFoundError."""

    @abc.abstractmethod
    def etag(self, aggregate_id: str) -> str:
        """The etag of the aggregate as last read or written in this unit of work."""


class UnitOfWork(abc.ABC):
    """Nothing is written unless `commit()` runs; a commit writes each changed aggregate and the
    events it raised in one atomic batch, conditioned on the etag it was loaded with."""

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.rollback()

    @abc.abstractmethod
    def repository[A: Aggregate](self, kind: type[A]) -> Repository[A]:
        """The repository of one aggregate type (the same one for the whole unit of work)."""

    @abc.abstractmethod
    def commit(self, *, traceparent: str | None = None) -> None:
        """Write the tracked changes atomically, one batch per aggregate. Raises
        PreconditionFailedError when an aggregate changed since it was loaded,
        AlreadyExistsError on an id collision."""

    @abc.abstractmethod
    def claim(self, record: IdempotencyRecord) -> None:
        """Create `record` (an Idempotency-Key's) at the next commit, in the batch of its
        aggregate (`record.aggregate_id`), so it commits with the change or not at all; when
        that aggregate has nothing to write, the record is written alone. A record of the same
        id already there fails the batch: AlreadyExistsError, nothing written."""

    @abc.abstractmethod
    def recorded(self, aggregate_id: str, record_id: str) -> IdempotencyRecord | None:
        """The idempotency record `record_id` in the aggregate's partition; None when there is
        none (never written, or expired)."""

    @abc.abstractmethod
    def rollback(self) -> None:
        """Forget every uncommitted change."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Check the store is reachable and the container exists (health). Raises
        TransientStoreError if not."""


__all__ = ["Page", "Repository", "UnitOfWork"]
