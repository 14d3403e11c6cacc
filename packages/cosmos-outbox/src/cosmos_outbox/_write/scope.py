"""Nothing is written unless `commit()` runs: what the transaction and the unit of work share as
context managers, async (`async with`) and sync (`with`). Leaving the block forgets what was not
committed (`rollback`); an exception in the block propagates."""

from __future__ import annotations

from typing import Self

__all__ = ["Uncommitted"]


class Uncommitted:
    """Work staged until `commit()`: `rollback()` forgets it, and so does leaving a `with` or
    an `async with` block (the async API's objects are used with the one, the sync API's with
    the other). Not an `abc.ABC`: a transaction is made for every request, and an ABC's
    instance costs a tenth of a microsecond more to make."""

    def rollback(self) -> None:
        """Forget what was staged and not committed (each subclass says how)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.rollback()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.rollback()
