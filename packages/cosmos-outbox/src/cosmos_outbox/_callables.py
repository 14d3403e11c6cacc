"""No coroutine is ever dropped: a coroutine function given where a plain function is called
is refused when it is declared, and an awaitable a plain function returns is refused (closed,
so it never runs half-way) when it is returned."""

from __future__ import annotations

import inspect
from collections.abc import Callable


def is_async(fn: object) -> bool:
    """Whether calling `fn` makes an awaitable: a coroutine function, a partial of one, or an
    object whose `__call__` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004


def name_of(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def refuse_async(fn: object, what: str) -> None:
    """Raise TypeError, naming `fn`, when `fn` is async: a sync path cannot await it."""
    if is_async(fn):
        raise TypeError(f"{what} {name_of(fn)} is a coroutine function (async def): this path "
                        "calls it synchronously and would drop the coroutine; pass a plain "
                        "function")


def not_awaitable[T](result: T, fn: object, what: str) -> T:
    """`result` when it is not awaitable; else TypeError naming `fn` (a coroutine is closed
    first, so it never runs)."""
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()
        raise TypeError(f"{what} {name_of(fn)} returned an awaitable ({type(result).__name__}): "
                        "this path calls it synchronously and cannot await it; pass a plain "
                        "function")
    return result


def call_sync[**P, R](fn: Callable[P, R], what: str, /, *args: P.args,
                      **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)`, refusing an awaitable result (`not_awaitable`)."""
    return not_awaitable(fn(*args, **kwargs), fn, what)
