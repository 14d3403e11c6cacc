"""The sync bridge: async beside sync, written once (`cosmos_outbox._sync_over_async` says how).
The outbox's logic is coroutines over the async ports; the sync API runs them with `run_sync`
over sync adapters seen through `as_async` (a sync adapter's calls complete without suspending,
so the coroutine runs to its end in the caller's thread, no event loop). For an adapter or a
test kit of your own: `as_async(port)` is a port as its async port (an async adapter as it is, a
sync one awaitable; the methods `cosmos_outbox.ports` declares `stays_sync` stay as they are),
`run_sync(coroutine)` runs one to its end, `SuspendedError` says it waited on I/O."""

from __future__ import annotations

from cosmos_outbox._sync_over_async import SuspendedError, as_async, run_sync

__all__ = ["SuspendedError", "as_async", "run_sync"]
