"""The use cases every aggregate has: create it, read it, change it. Each runs in one unit of
work and commits at most one transactional batch: the aggregate and the events its change
raised. A change is conditional on the etag the aggregate was read with, so two racing writers
never lose an update (one gets PreconditionFailedError), and may also be conditional on what
the caller sent (`precondition`: the HTTP layer's If-Match / If-None-Match).

With an Idempotency-Key (`cosmos_outbox._write.idempotency`: the write path's one protocol),
`create_idempotent` and `change_idempotent` write the key's record in the same batch, and
answer a retry of an earlier request with the same key from its record (`Recorded`) instead of
writing again; the record is read only when the write fails, never on the success path."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from cosmos_outbox._domain import Aggregate, DomainError, assigned_id
from cosmos_outbox._mapper import aggregate_partition
from cosmos_outbox._sync_over_async import resolved
from cosmos_outbox._write.idempotency import (
    MAX_GENERATIONS,
    IdempotencyKey,
    Recorded,
    recorded,
    weak_etag,
)
from cosmos_outbox._write.unit_of_work import UnitOfWork
from cosmos_outbox.errors import (
    AlreadyExistsError,
    IdempotencyKeyReusedError,
    NotFoundError,
    PreconditionFailedError,
)

A = TypeVar("A", bound="Aggregate")

__all__ = ["AggregateService", "Versioned"]

logger = logging.getLogger("cosmos_outbox.aggregates")


@dataclass(frozen=True)
class Versioned(Generic[A]):
    """An aggregate and the etag of the stored version it was read from or written as."""

    aggregate: A
    etag: str


#: A change of an aggregate: a plain or an async function (awaited).
Change: TypeAlias = Callable[[A], object | Awaitable[object]]
#: What makes a new aggregate: a plain or an async function (awaited).
Build: TypeAlias = Callable[[], A | Awaitable[A]]


class AggregateService(Generic[A]):
    """Create, read and change aggregates of one type. An aggregate that is not `live` (a soft
    delete) reads as missing: NotFoundError, as for one that never existed. This is the async
    API's (`cosmos_outbox.aggregates.aio`); the sync API's runs it
    (`cosmos_outbox.aggregates.AggregateService`)."""

    def __init__(self, kind: type[A], unit_of_work: Callable[[], UnitOfWork]) -> None:
        self.kind = kind
        self._uow = unit_of_work

    async def create(self, aggregate: A, *, traceparent: str | None = None) -> Versioned[A]:
        """Write a new aggregate and the events it recorded, in one batch. Raises
        AlreadyExistsError when its id is taken."""
        async with self._uow() as uow:
            repository = uow.repository(self.kind)
            repository.add(aggregate)
            await uow.commit(traceparent=traceparent)
            return Versioned(aggregate, repository.etag(aggregate.id))

    async def get(self, aggregate_id: str) -> Versioned[A]:
        """The live aggregate and its etag. Raises NotFoundError."""
        async with self._uow() as uow:
            aggregate = await self._live(uow, aggregate_id)
            return Versioned(aggregate, uow.repository(self.kind).etag(aggregate_id))

    async def change(
        self,
        aggregate_id: str,
        change: Change[A],
        *,
        precondition: Callable[[str], bool] | None = None,
        traceparent: str | None = None,
    ) -> Versioned[A]:
        """Load the live aggregate, check `precondition` against its etag (False:
        PreconditionFailedError), apply `change` (a DomainError refuses it), and commit what it
        raised in one batch conditioned on the etag read. A change that leaves the aggregate as
        it was writes nothing and answers the etag read; one that alters it without recording
        an event is refused (UnrecordedChangeError), nothing written."""
        return await self._change(
            aggregate_id, change, precondition=precondition, traceparent=traceparent
        )

    async def _change(
        self,
        aggregate_id: str,
        change: Change[A],
        *,
        precondition: Callable[[str], bool] | None,
        traceparent: str | None,
        key: IdempotencyKey[A] | None = None,
    ) -> Versioned[A]:
        """`change`'s load, precondition, change and one conditioned batch; with `key`, its
        record in the same batch."""
        async with self._uow() as uow:
            aggregate = await self._live(uow, aggregate_id)
            repository = uow.repository(self.kind)
            if precondition is not None and not precondition(repository.etag(aggregate_id)):
                raise PreconditionFailedError(
                    f"{self.kind.aggregate_type} {aggregate_id}: a precondition failed",
                    aggregate_type=self.kind.aggregate_type,
                )
            await resolved(change(aggregate))
            if key is not None:
                uow.remember(key.record(aggregate))
            await uow.commit(traceparent=traceparent)
            return Versioned(aggregate, repository.etag(aggregate_id))

    async def create_idempotent(
        self,
        build: Build[A],
        *,
        key: IdempotencyKey[A],
        traceparent: str | None = None,
    ) -> Versioned[A] | Recorded:
        """Write the aggregate `build()` makes (its id derived from the key: made inside
        `assigned_id`), its events and the key's record, in one batch. When the batch conflicts
        (the id or the record is there: an earlier request with this key committed), answer
        from that request's record; 422 (IdempotencyKeyReusedError) when it was another request.
        An id whose record expired was taken by an earlier use of the key: the key then behaves
        as new and takes the next derived id (up to MAX_GENERATIONS)."""
        for generation in range(MAX_GENERATIONS):
            derived = key.aggregate_id(generation)
            with assigned_id(derived):
                aggregate = await resolved(build())
            try:
                async with self._uow() as uow:
                    repository = uow.repository(self.kind)
                    repository.add(aggregate)
                    uow.remember(key.record(aggregate))
                    await uow.commit(traceparent=traceparent)
                    return Versioned(aggregate, repository.etag(aggregate.id))
            except AlreadyExistsError:
                found = await self._recorded(aggregate.id, key)
                if found is not None:
                    return found
                if aggregate.id != derived:
                    raise  # the aggregate chose its own id, and it is taken
                logger.info(
                    "idempotency key reused after its record expired: next id",
                    extra={
                        "idempotency.record": key.record_id,
                        "idempotency.generation": generation + 1,
                    },
                )
        raise AlreadyExistsError(
            f"every {self.kind.aggregate_type} id this Idempotency-Key derives is taken"
        )

    async def change_idempotent(
        self,
        aggregate_id: str,
        change: Change[A],
        *,
        key: IdempotencyKey[A],
        precondition: Callable[[str], bool] | None = None,
        traceparent: str | None = None,
    ) -> Versioned[A] | Recorded:
        """`change`, with the key's record written in the same batch (alone when the change
        raises no event: the answer is recorded all the same). When the change is refused
        (missing, a failed precondition, a business rule, a racing writer, the record already
        there), an earlier request with the same key may have made it: its record answers
        instead; 422 when that was another request; else the refusal stands."""
        try:
            return await self._change(
                aggregate_id,
                change,
                precondition=precondition,
                traceparent=traceparent,
                key=key,
            )
        except (NotFoundError, PreconditionFailedError, AlreadyExistsError, DomainError):
            found = await self._recorded(aggregate_id, key)
            if found is None:
                raise
            return found

    async def _recorded(self, aggregate_id: str, key: IdempotencyKey[A]) -> Recorded | None:
        """The answer recorded for `key` in the aggregate's partition (the write path's one
        look-up, `recorded`): None when there is none; IdempotencyKeyReusedError when it was
        recorded for another request."""
        fields = {
            "idempotency.record": key.record_id,
            "aggregate.type": self.kind.aggregate_type,
            "aggregate.id": aggregate_id,
        }
        async with self._uow() as uow:
            try:
                record = await recorded(uow.store, aggregate_partition(aggregate_id), key)
            except IdempotencyKeyReusedError:
                logger.info("idempotency key reused for another request: 422", extra=fields)
                raise
            if record is None:
                return None
            repository = uow.repository(self.kind)
            try:
                current = await repository.get(aggregate_id)
                etag = (
                    repository.etag(aggregate_id)
                    if current.version == record.version
                    else weak_etag(record.version)
                )
            except NotFoundError:
                etag = weak_etag(record.version)
            logger.info("idempotent retry answered from its record", extra=fields)
            return Recorded(record, etag)

    async def _live(self, uow: UnitOfWork, aggregate_id: str) -> A:
        aggregate = await uow.repository(self.kind).get(aggregate_id)
        if not aggregate.live:
            raise NotFoundError(self.kind.aggregate_type, aggregate_id)
        return aggregate
