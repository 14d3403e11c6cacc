"""The use cases every aggregate has: create it, read it, change it. Each runs in one unit of
work and commits at most one transactional batch: the aggregate and the events its change
raised. A change is conditional on the etag the aggregate was read with, so two racing writers
never lose an update (one gets PreconditionFailedError), and may also be conditional on what
the caller sent (`precondition`: the HTTP layer's If-Match / If-None-Match)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cosmos_outbox.domain import Aggregate
from cosmos_outbox.errors import NotFoundError, PreconditionFailedError
from cosmos_outbox.ports import UnitOfWork

__all__ = ["AggregateService", "Versioned"]


@dataclass(frozen=True)
class Versioned[A: Aggregate]:
    """An aggregate and the etag of the stored version it was read from or written as."""

    aggregate: A
    etag: str


class AggregateService[A: Aggregate]:
    """Create, read and change aggregates of one type. An aggregate that is not `live` (a soft
    delete) reads as missing: NotFoundError, as for one that never existed."""

    def __init__(self, kind: type[A], unit_of_work: Callable[[], UnitOfWork]) -> None:
        self.kind = kind
        self._uow = unit_of_work

    def create(self, aggregate: A, *, traceparent: str | None = None) -> Versioned[A]:
        """Write a new aggregate and the events it recorded, in one batch. Raises
        AlreadyExistsError when its id is taken."""
        with self._uow() as uow:
            repository = uow.repository(self.kind)
            repository.add(aggregate)
            uow.commit(traceparent=traceparent)
            return Versioned(aggregate, repository.etag(aggregate.id))

    def get(self, aggregate_id: str) -> Versioned[A]:
        """The live aggregate and its etag. Raises NotFoundError."""
        with self._uow() as uow:
            aggregate = self._live(uow, aggregate_id)
            return Versioned(aggregate, uow.repository(self.kind).etag(aggregate_id))

    def change(
        self,
        aggregate_id: str,
        change: Callable[[A], object],
        *,
        precondition: Callable[[str], bool] | None = None,
        traceparent: str | None = None,
    ) -> Versioned[A]:
        """Load the live aggregate, check `precondition` against its etag (False:
        PreconditionFailedError), apply `change` (a DomainError refuses it), and commit what it
        raised in one batch conditioned on the etag read. A change that raises no event writes
        nothing and answers the etag read."""
        with self._uow() as uow:
            aggregate = self._live(uow, aggregate_id)
            repository = uow.repository(self.kind)
            if precondition is not None and not precondition(repository.etag(aggregate_id)):
                raise PreconditionFailedError(
                    f"{self.kind.aggregate_type} {aggregate_id}: a precondition failed",
                    aggregate_type=self.kind.aggregate_type)
            change(aggregate)
            uow.commit(traceparent=traceparent)
            return Versioned(aggregate, repository.etag(aggregate_id))

    def _live(self, uow: UnitOfWork, aggregate_id: str) -> A:
        aggregate = uow.repository(self.kind).get(aggregate_id)
        if not aggregate.live:
            raise NotFoundError(self.kind.aggregate_type, aggregate_id)
        return aggregate
