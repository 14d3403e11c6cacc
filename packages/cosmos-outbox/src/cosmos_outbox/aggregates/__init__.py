"""The building blocks: aggregates, the events they record, and the unit of work and service that
write them with their events in one transactional batch (the same write path as a
`Transaction`'s: `cosmos_outbox._write`). The route helper that serves them over HTTP is
`cosmos_outbox.http`'s (`AggregateRoutes`, `Outbox.routes`); their async API is
`cosmos_outbox.aggregates.aio`.

    from cosmos_outbox.aggregates import Aggregate, DomainError, Event, Text

A part of the package with its own promise (README "The package's shape"): its names follow
semantic versioning as the outbox's do; an app that only writes its own documents in a
`Transaction` never needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmos_outbox._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers read; at run time: `_EXPORTS`
    from cosmos_outbox._domain import EVENTS as EVENTS
    from cosmos_outbox._domain import Aggregate as Aggregate
    from cosmos_outbox._domain import DomainError as DomainError
    from cosmos_outbox._domain import Event as Event
    from cosmos_outbox._write.idempotency import Answer as Answer
    from cosmos_outbox._write.idempotency import IdempotencyKey as IdempotencyKey
    from cosmos_outbox._write.idempotency import Recorded as Recorded
    from cosmos_outbox._write.service import Versioned as Versioned
    from cosmos_outbox._write.sync import AggregateService as AggregateService
    from cosmos_outbox._write.sync import UnitOfWork as UnitOfWork
    from cosmos_outbox.errors import UnrecordedChangeError as UnrecordedChangeError
    from cosmos_outbox.text import Text as Text

_EXPORTS = {
    "Aggregate": "cosmos_outbox._domain",
    "DomainError": "cosmos_outbox._domain",
    "Event": "cosmos_outbox._domain",
    "Text": "cosmos_outbox.text",
    "UnitOfWork": "cosmos_outbox._write.sync",
    "AggregateService": "cosmos_outbox._write.sync",
    "UnrecordedChangeError": "cosmos_outbox.errors",
    # the catalogue of every imported aggregate's events
    "EVENTS": "cosmos_outbox._domain",
    # what an idempotent write takes and gives (`AggregateService.create_idempotent`, ...)
    "IdempotencyKey": "cosmos_outbox._write.idempotency",
    "Answer": "cosmos_outbox._write.idempotency",
    "Recorded": "cosmos_outbox._write.idempotency",
    "Versioned": "cosmos_outbox._write.service",
}

__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
