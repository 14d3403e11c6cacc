"""A function the worker indexes, from its body written once as a coroutine: the body itself as
an `async def` function (run on the worker's event loop), or a plain function that runs it in
its thread (`cosmos_outbox._sync_over_async.run_sync`: over sync adapters it never suspends). The
binding parameters are the body's (`functools.wraps`: the worker reads them from its signature)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from cosmos_outbox._sync_over_async import run_sync

P = ParamSpec("P")
R = TypeVar("R")


def shell(asynchronous: bool) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Any]]:
    """`@shell(asynchronous)` on a coroutine function: itself when `asynchronous`, else a
    plain function running it."""

    def wrap(body: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Any]:
        if asynchronous:
            return body

        @functools.wraps(body)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            return run_sync(body(*args, **kwargs))

        return run

    return wrap
