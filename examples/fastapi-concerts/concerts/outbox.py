"""The app's outbox: its container (COSMOS_CONTAINER) on the `aio` SDKs, built from the app
settings on first use (no I/O at import)."""

from __future__ import annotations

from typing import Any

from cosmos_outbox.aio import Outbox

outbox = Outbox()


async def read(partition_key: str, document_id: str) -> dict[str, Any] | None:
    """A document as stored now (with its `_etag`), or None: through the outbox's store, so that
    the test kit's in-memory store serves the app's reads as it does its writes."""
    return await outbox.store.read(partition_key, document_id)
