"""The sync API over the async one (the public face: `cosmos_outbox.bridge`): async beside sync,
written once. The outbox's logic is written once, as coroutines over the async ports
(`cosmos_outbox.ports.Async*`): that is the async API (`cosmos_outbox.aio`). The sync API runs
the same coroutines with `run_sync` over sync adapters made awaitable by `as_async`: a sync
adapter's calls complete without suspending, so a coroutine over them runs to its end in the
caller's thread, with no event loop. Only I/O differs. A port method declared `stays_sync`
(`cosmos_outbox.ports`) is handed on as it is."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

if TYPE_CHECKING:
    from cosmos_outbox.ports import (
        AsyncBacklogEstimator,
        AsyncBatchStore,
        AsyncDeadLetterQueues,
        AsyncDocumentQueries,
        AsyncDocumentStore,
        AsyncDocumentWrites,
        AsyncMessagePublisher,
        AsyncPayloadStore,
        AsyncScheduleQueue,
        BacklogEstimator,
        BatchStore,
        DeadLetterQueues,
        DocumentQueries,
        DocumentStore,
        DocumentWrites,
        MessagePublisher,
        PayloadStore,
        ScheduleQueue,
    )

T = TypeVar("T")


class SuspendedError(RuntimeError):
    """A coroutine run by the sync API waited on I/O: something async reached a sync path."""


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to its end in this thread, without an event loop. It must not suspend
    (it awaits only sync adapters made awaitable): if it does, it is closed (its `finally`
    blocks run) and SuspendedError is raised."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise SuspendedError(
        "an awaitable of the sync API waited on I/O: an async callable or adapter was given to "
        "the sync API; use cosmos_outbox.aio for async code"
    )


async def resolved(value: T | Awaitable[T]) -> T:
    """`value`, awaited when it is awaitable (a user's callable may be either)."""
    if inspect.isawaitable(value):
        return await value
    return value


def is_async_port(port: object) -> bool:
    """Whether `port`'s public methods are coroutine functions (an async adapter)."""
    return any(
        inspect.iscoroutinefunction(getattr(type(port), name, None))
        for name in dir(type(port))
        if not name.startswith("_")
    )


class _Awaitable:
    """A sync adapter seen through the async port: each public method returns a coroutine that
    calls it (and completes without suspending); attributes pass through. What a method returns
    that is awaitable is awaited, never handed on unawaited (a test's stand-in that waits)."""

    def __init__(self, port: object) -> None:
        self._port = port

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._port, name)
        if name.startswith("_") or not callable(attribute) or isinstance(attribute, type):
            return attribute

        # made on every call (the port's method as it is now: a test may have replaced it),
        # so kept to a bare closure: functools.wraps would cost more than the call itself
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await resolved(attribute(*args, **kwargs))

        return call

    def __repr__(self) -> str:
        return f"as_async({self._port!r})"


@functools.cache
def _stays_sync() -> frozenset[str]:
    """The port methods declared `stays_sync` (`cosmos_outbox.ports`), read once."""
    from cosmos_outbox.ports import sync_methods

    return sync_methods()


class _SyncView(_Awaitable):
    def __getattr__(self, name: str) -> Any:
        if name in _stays_sync():
            return getattr(self._port, name)
        return super().__getattr__(name)


def _awaited(port: object) -> Any:
    """`port` itself when it is an async adapter, else a view of the sync one whose methods are
    awaitable (those the ports declare `stays_sync` stay as they are)."""
    return port if isinstance(port, _Awaitable) or is_async_port(port) else _SyncView(port)


@overload
def as_async(port: DocumentStore | AsyncDocumentStore) -> AsyncDocumentStore: ...
@overload
def as_async(port: BatchStore | AsyncBatchStore) -> AsyncBatchStore: ...
@overload
def as_async(port: DocumentWrites | AsyncDocumentWrites) -> AsyncDocumentWrites: ...
@overload
def as_async(port: DocumentQueries | AsyncDocumentQueries) -> AsyncDocumentQueries: ...
@overload
def as_async(port: MessagePublisher | AsyncMessagePublisher) -> AsyncMessagePublisher: ...
@overload
def as_async(port: PayloadStore | AsyncPayloadStore) -> AsyncPayloadStore: ...
@overload
def as_async(port: BacklogEstimator | AsyncBacklogEstimator) -> AsyncBacklogEstimator: ...
@overload
def as_async(port: ScheduleQueue | AsyncScheduleQueue) -> AsyncScheduleQueue: ...
@overload
def as_async(port: DeadLetterQueues | AsyncDeadLetterQueues) -> AsyncDeadLetterQueues: ...


def as_async(port: object) -> object:
    """A port as its async port: an async adapter as it is, a sync one awaitable."""
    return _awaited(port)
