"""The app's outbox: its container (COSMOS_CONTAINER) on the `aio` SDKs, built from the app
settings on first use (no I/O at import)."""

from __future__ import annotations

from cosmos_outbox.aio import Outbox

outbox = Outbox()
