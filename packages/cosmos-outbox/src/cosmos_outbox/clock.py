"""What time it is for the outbox: when a scheduled event is due (`deliver_after`), whether a
release has come, and the time an aggregate's event is recorded at. The wall clock (UTC, aware),
unless a test's clock stands in for it inside `using(clock)` (the test kit's `in_memory`:
`memory.clock.advance(...)` moves it on, so a test delivers an event due in 15 minutes without
waiting for them). One clock for the process, not one per context: an app's functions run on
threads and event loops of their own, and each reads the time the test set."""

from __future__ import annotations

from cosmos_outbox._clock import now, using

__all__ = ["now", "using"]
