"""cosmos-outbox's async API, in the shape of the Azure SDKs' `aio` namespaces: the same names
as the sync API, awaited. An app whose functions are `async def` (FastAPI on Functions, the
SDKs' `aio` clients) builds its outbox from here:

    from cosmos_outbox.aio import Outbox

    outbox = Outbox([Order])           # async def functions, on the aio clients
    async with outbox.unit_of_work() as uow: ...

The logic is the sync API's, written once: the sync API runs these same coroutines over sync
adapters (`cosmos_outbox._aio`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cosmos_outbox._outbox import AsyncOutbox as Outbox
    from cosmos_outbox._service import AggregateService
    from cosmos_outbox._session import Session
    from cosmos_outbox._unit_of_work import Repository, UnitOfWork
    from cosmos_outbox.subscriber._dispatch import AsyncDispatcher as Dispatcher
    from cosmos_outbox.subscriber._projector import AsyncProjector as Projector

_WHERE = {
    "AggregateService": ("cosmos_outbox._service", "AggregateService"),
    "Dispatcher": ("cosmos_outbox.subscriber._dispatch", "AsyncDispatcher"),
    "Projector": ("cosmos_outbox.subscriber._projector", "AsyncProjector"),
    "Outbox": ("cosmos_outbox._outbox", "AsyncOutbox"),
    "Repository": ("cosmos_outbox._unit_of_work", "Repository"),
    "Session": ("cosmos_outbox._session", "Session"),
    "UnitOfWork": ("cosmos_outbox._unit_of_work", "UnitOfWork"),
}

__all__ = ["AggregateService", "Dispatcher", "Outbox", "Projector", "Repository", "Session",
           "UnitOfWork"]


def __getattr__(name: str) -> Any:
    found = _WHERE.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(found[0]), found[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
