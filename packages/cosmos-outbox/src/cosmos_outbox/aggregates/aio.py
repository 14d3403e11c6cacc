"""The building blocks' async API, as `cosmos_outbox.aio` is the outbox's: the unit of work, its
repositories and the aggregate service, awaited (the sync API runs the same coroutines)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmos_outbox._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers read; at run time: `_EXPORTS`
    from cosmos_outbox._write.service import AggregateService as AggregateService
    from cosmos_outbox._write.unit_of_work import Repository as Repository
    from cosmos_outbox._write.unit_of_work import UnitOfWork as UnitOfWork

_EXPORTS = {
    "UnitOfWork": "cosmos_outbox._write.unit_of_work",
    "Repository": "cosmos_outbox._write.unit_of_work",
    "AggregateService": "cosmos_outbox._write.service",
}

__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
