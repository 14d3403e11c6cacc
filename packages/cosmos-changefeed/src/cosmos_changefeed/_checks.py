"""What a processor (or an estimator) refuses when it is made, worded once for both flavours:
a callable of the wrong kind (an ``async def`` handler given to the sync processor, a plain one
to the aio processor), a callable that cannot take the arguments it will be given, a container
or a lease store of the other flavour, the monitored container holding its own leases. Pure
(``inspect`` only); the options' own checks are ``_options.ProcessorOptions``'.

Each message says what is wrong, with what, and the fix (httpx's and pydantic's habit), so that
a stranger's mistake stops at the constructor instead of losing a change at run time: a sync
processor given an ``async def`` handler would call it, get a coroutine it never awaits, and
checkpoint the batch as handled.

``awaited_nothing`` and ``not_awaitable`` are the same refusal at run time, for what only a
call shows (a plain function that returns a coroutine): the batch fails, is not checkpointed,
and is never set aside (``HandlerKindError``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Literal

Flavour = Literal["sync", "aio"]

#: What each flavour is called in a message, and the other one.
_PROCESSOR = {
    "sync": "cosmos_changefeed.ChangeFeedProcessor",
    "aio": "cosmos_changefeed.aio.ChangeFeedProcessor",
}


class HandlerKindError(TypeError):
    """A handler of the wrong kind, seen when it was called: a sync processor's handler that
    returned an awaitable, an aio processor's that returned something else. Its batch is not
    checkpointed, and never set aside: the mistake is the code's, not the batch's."""


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` gives a coroutine by its declaration: an ``async def`` function or
    method, a ``functools.partial`` of one, an object whose ``__call__`` is ``async def``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return False
    if isinstance(fn, type):
        return False
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - the class's, not the instance's
    return call is not None and inspect.iscoroutinefunction(call)


def check_callable(
    fn: object,
    name: str,
    *,
    flavour: Flavour,
    takes: str,
    arity: int,
    awaited: bool,
) -> None:
    """Refuse ``fn`` (the option ``name``) unless it is a callable of ``arity`` positional
    arguments (``takes`` names them) and, when ``awaited``, of the flavour's kind: a coroutine
    function in aio, a plain callable in sync. A hook that is not ``awaited`` is a plain
    callable in both flavours."""
    if not callable(fn):
        raise TypeError(f"{name} must be a callable taking {takes}, not {type(fn).__name__}")
    label = _label(fn)
    is_async = is_async_callable(fn)
    if is_async and (flavour == "sync" or not awaited):
        where = (
            f"{_PROCESSOR['sync']} calls it on a thread and never awaits it: its changes would "
            f"be checkpointed unhandled. Use {_PROCESSOR['aio']} (with azure.cosmos.aio's "
            "containers), or make it a plain `def`"
            if flavour == "sync"
            else f"{_PROCESSOR['aio']} calls it without awaiting it (a notification): make it "
            "a plain `def` (start a task from it if it has to await)"
        )
        raise TypeError(f"{name}: {label} is a coroutine function (async def); {where}")
    if awaited and flavour == "aio" and not is_async:
        raise TypeError(
            f"{name}: {label} is not a coroutine function; {_PROCESSOR['aio']} awaits what it "
            f"returns. Make it `async def`, or use {_PROCESSOR['sync']} (a thread per lease) "
            "for a plain function"
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return
    try:
        signature.bind(*([None] * arity))
    except TypeError:
        raise TypeError(
            f"{name}: {label}{signature} cannot be called with {takes} "
            f"({arity} positional argument{'s' if arity != 1 else ''})"
        ) from None


def awaited_nothing(result: object, name: str = "handler") -> None:
    """In the sync processor: refuse a result that is awaitable (a plain function that returned
    a coroutine). The coroutine is closed, unrun, so that Python does not warn of it later."""
    if not inspect.isawaitable(result):
        return
    if inspect.iscoroutine(result):
        result.close()
    raise HandlerKindError(
        f"the {name} returned {type(result).__name__}, an awaitable, which "
        f"{_PROCESSOR['sync']} does not await: the batch is not checkpointed. Use "
        f"{_PROCESSOR['aio']} for a handler that returns an awaitable"
    )


def not_awaitable(result: object, name: str = "handler") -> None:
    """In the aio processor: refuse a result that cannot be awaited."""
    if inspect.isawaitable(result):
        return
    raise HandlerKindError(
        f"the {name} returned {type(result).__name__}, not an awaitable: "
        f"{_PROCESSOR['aio']} awaits what its {name} returns (make it `async def`; or use "
        f"{_PROCESSOR['sync']} for a plain function)"
    )


def check_container(
    container: object, role: str, *, flavour: Flavour, ports: tuple[type, ...] = ()
) -> None:
    """Refuse a ``container`` of the other flavour (azure.cosmos's sync ``ContainerProxy`` to
    the aio processor, or the aio one to the sync processor), or of neither; an instance of one
    of ``ports`` (the flavour's ``LeaseStore`` for the lease container) is taken as it is."""
    if ports and isinstance(container, ports):
        return
    module = type(container).__module__
    is_aio = module.startswith("azure.cosmos.aio")
    is_sync = module.startswith("azure.cosmos") and not is_aio
    if type(container).__name__ == "ContainerProxy" and (is_sync or is_aio):
        if is_aio == (flavour == "aio"):
            return
        theirs = "azure.cosmos.aio" if is_aio else "azure.cosmos (sync)"
        raise TypeError(
            f"the {role} is {theirs}'s ContainerProxy, which {_PROCESSOR[flavour]} cannot "
            f"use: use {_PROCESSOR['aio' if is_aio else 'sync']}, or the "
            f"{'azure.cosmos' if is_aio else 'azure.cosmos.aio'} client's container"
        )
    other = _other_store(container, flavour)
    if other is not None:
        raise TypeError(f"the {role} is {other}")
    kinds = " or ".join(
        ["a ContainerProxy"]
        + [f"a {port.__module__.split('._')[0]}.{port.__name__}" for port in ports]
    )
    raise TypeError(f"the {role} must be {kinds}, not {type(container).__name__}")


def check_containers(
    monitored: object,
    leases: object,
    flavour: Flavour,
    feed_ports: tuple[type, ...],
    lease_ports: tuple[type, ...],
) -> None:
    """Both containers of a processor or an estimator: each of the flavour's kind (or one of
    its ports), and not the same container."""
    check_container(monitored, "monitored container", flavour=flavour, ports=feed_ports)
    check_container(leases, "lease container", flavour=flavour, ports=lease_ports)
    check_apart(monitored, leases)


def _other_store(container: object, flavour: Flavour) -> str | None:
    """What a lease store of the other flavour is, in a message; None when it is not one."""
    for cls in type(container).__mro__:
        if cls.__name__ == "LeaseStore" and cls.__module__.startswith("cosmos_changefeed"):
            mine = cls.__module__.startswith("cosmos_changefeed.aio") == (flavour == "aio")
            if mine:
                return None
            theirs = "aio" if flavour == "sync" else "sync"
            return (
                f"a {theirs} lease store ({type(container).__name__}), which "
                f"{_PROCESSOR[flavour]} cannot drive: use the "
                f"{'cosmos_changefeed.aio' if theirs == 'aio' else 'cosmos_changefeed'} one"
            )
    return None


def check_apart(monitored: Any, leases: Any) -> None:
    """Refuse a lease container that is the monitored container: each lease update would be
    a change of the feed it reads (the Functions trigger refuses it too)."""
    link = getattr(monitored, "container_link", None)
    same_account = getattr(monitored, "client_connection", None) is getattr(
        leases, "client_connection", object()
    ) or _endpoint(monitored) == _endpoint(leases)
    if link is not None and link == getattr(leases, "container_link", None) and same_account:
        raise ValueError(
            f"the lease container is the monitored container ({link}): its lease updates "
            "would be changes of the feed it reads; give the leases a container of their own"
        )


def _endpoint(container: Any) -> str | None:
    connection = getattr(container, "client_connection", None)
    return str(getattr(connection, "url_connection", "")) or None


def _label(fn: object) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return str(name)
