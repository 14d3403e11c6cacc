"""No coroutine is ever dropped: a coroutine function given where a plain function is called (the
sync API's route helper and service) is refused when it is declared, naming it. (An awaitable a
plain function returns is awaited: `cosmos_outbox._sync_over_async.resolved`; in a sync function,
one that waits on I/O is refused and closed: `run_sync`.)"""

from __future__ import annotations

import inspect


def is_async(fn: object) -> bool:
    """Whether calling `fn` makes an awaitable: a coroutine function, a partial of one, or an
    object whose `__call__` is one."""
    call = getattr(fn, "__call__", None)  # noqa: B004
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def name_of(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def refuse_async(fn: object, what: str) -> None:
    """Raise TypeError, naming `fn`, when `fn` is async: a sync path cannot await it."""
    if is_async(fn):
        raise TypeError(
            f"{what} {name_of(fn)} is a coroutine function (async def): the sync "
            "API runs it in a sync function, which cannot wait on its I/O; pass a "
            "plain function, or build the outbox from cosmos_outbox.aio"
        )
