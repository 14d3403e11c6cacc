"""The consuming side, async: the same names as `cosmos_outbox.subscriber`, for `async def`
functions on the SDKs' `aio` clients: the projector (`Projector`) and the tolerant dispatch
(`Dispatcher`)."""

from __future__ import annotations

from cosmos_outbox.subscriber._dispatch import AsyncDispatcher as Dispatcher
from cosmos_outbox.subscriber._projector import AsyncProjector as Projector

__all__ = ["Dispatcher", "Projector"]
