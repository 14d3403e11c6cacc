"""The context a handler is given under manual checkpoints (``checkpoint="manual"``): the
batch's ``LeaseContext`` and ``checkpoint()``, which stores the batch's position in its lease
(.NET's ``checkpointAsync``). One per flavour: the sync one's ``checkpoint()`` returns once the
lease is written, the aio one's is awaited. What the processor does with it is
``_checkpoints``'; ``LeaseLostError`` when the lease is no longer this instance's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from cosmos_changefeed._options import LeaseContext


@dataclass(frozen=True)
class ManualCheckpointContext(LeaseContext):
    """A batch's context under manual checkpoints (sync): ``checkpoint()`` stores its
    position (``continuation``) in the lease."""

    _write: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)

    def checkpoint(self) -> None:
        """Store this batch's position in the lease (a no-op once a later batch's is):
        after a crash or a stop, the lease's next owner starts after this batch."""
        self._write()


@dataclass(frozen=True)
class AsyncManualCheckpointContext(LeaseContext):
    """A batch's context under manual checkpoints (aio; ``cosmos_changefeed.aio``'s
    ``ManualCheckpointContext``): ``await context.checkpoint()``."""

    _write: Callable[[], Awaitable[None]] = field(default=lambda: _nothing(), repr=False)

    async def checkpoint(self) -> None:
        """Store this batch's position in the lease (see the sync context's)."""
        await self._write()


async def _nothing() -> None:
    return None


C = TypeVar("C", ManualCheckpointContext, AsyncManualCheckpointContext)


def with_checkpoint(context: LeaseContext, kind: type[C], write: Callable[[], Any]) -> C:
    """``context`` as a ``kind`` whose ``checkpoint()`` calls ``write``."""
    values = {f.name: getattr(context, f.name) for f in fields(LeaseContext)}
    return kind(**values, _write=write)
