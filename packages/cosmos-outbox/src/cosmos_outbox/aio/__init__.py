"""cosmos-outbox's async API, in the shape of the Azure SDKs' `aio` namespaces: the root's names
for what exists in both, awaited (each package with async adapters has its own `aio` beside
it: `cosmos_outbox.aggregates.aio`, `.cosmos.aio`, `.servicebus.aio`, `.blob.aio`,
`.subscriber.aio`). An app whose functions are `async def` (FastAPI on Functions, the SDKs'
`aio` clients) builds its outbox from here:

    from cosmos_outbox.aio import Outbox

    outbox = Outbox()                  # async def functions, on the aio clients
    async with outbox.transaction(customer_id, entity="customer") as tx: ...

The logic is the sync API's, written once: the sync API runs these same coroutines over sync
adapters (`cosmos_outbox._sync_over_async`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmos_outbox._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers read; at run time: `_EXPORTS`
    from cosmos_outbox._outbox import AsyncOutbox
    from cosmos_outbox._write.transaction import Transaction as Transaction

    Outbox = AsyncOutbox

_EXPORTS = {
    "Outbox": "cosmos_outbox._outbox:AsyncOutbox",
    "Transaction": "cosmos_outbox._write.transaction",
}

#: Names of 0.3 that moved, kept here until 0.5 (DeprecationWarning naming the new place).
_MOVED = {
    "Session": "cosmos_outbox.aio.Transaction",
    "UnitOfWork": "cosmos_outbox.aggregates.aio.UnitOfWork",
    "Repository": "cosmos_outbox.aggregates.aio.Repository",
    "AggregateService": "cosmos_outbox.aggregates.aio.AggregateService",
}

__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, renamed=_MOVED)
