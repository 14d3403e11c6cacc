"""cosmos-outbox's async API, in the shape of the Azure SDKs' `aio` namespaces: the root's names
for what exists in both, awaited (each package with async adapters has its own `aio` beside
it: `cosmos_outbox.cosmos.aio`, `.servicebus.aio`, `.blob.aio`, `.subscriber.aio`). An app
whose functions are `async def` (FastAPI on Functions, the SDKs' `aio` clients) builds its
outbox from here:

    from cosmos_outbox.aio import Outbox

    outbox = Outbox([Order])           # async def functions, on the aio clients
    async with outbox.unit_of_work() as uow: ...

The logic is the sync API's, written once: the sync API runs these same coroutines over sync
adapters (`cosmos_outbox._sync_bridge`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cosmos_outbox._renamed import renamed

if TYPE_CHECKING:
    from cosmos_outbox._outbox import AsyncOutbox as Outbox
    from cosmos_outbox._service import AggregateService
    from cosmos_outbox._session import Session
    from cosmos_outbox._unit_of_work import Repository, UnitOfWork

_WHERE = {
    "AggregateService": ("cosmos_outbox._service", "AggregateService"),
    "Outbox": ("cosmos_outbox._outbox", "AsyncOutbox"),
    "Repository": ("cosmos_outbox._unit_of_work", "Repository"),
    "Session": ("cosmos_outbox._session", "Session"),
    "UnitOfWork": ("cosmos_outbox._unit_of_work", "UnitOfWork"),
}

__all__ = ["AggregateService", "Outbox", "Repository", "Session", "UnitOfWork"]

#: Renamed in 0.3: the subscriber's async classes are in `cosmos_outbox.subscriber.aio`, beside
#: the sync ones' names (kept here for a release, deprecated).
_RENAMED = {
    "Dispatcher": "cosmos_outbox.subscriber.aio.Dispatcher",
    "Projector": "cosmos_outbox.subscriber.aio.Projector",
}


def __getattr__(name: str) -> Any:
    found = _WHERE.get(name)
    if found is None:
        return renamed(__name__, name, _RENAMED)
    value = getattr(importlib.import_module(found[0]), found[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
