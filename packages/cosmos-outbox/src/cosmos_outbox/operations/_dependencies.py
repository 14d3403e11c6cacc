"""The dependencies an operators' read or action waits on, named: each wait is bounded on its own
(`answered`), so that an answer says which dependency did not answer ("Service Bus did not
answer within 3 s"), and a read made of parts (the journey, the status) shows the parts that did
(`Unanswered` says which did not). In the sync API (coroutines run without an event loop, over
sync adapters) a wait runs on a thread of its own, as the routes' bound does
(`cosmos_outbox.http.bounded`): past it the thread is left to finish. Within a route's bound, the
waits share its time (`bounded.Budget`): each takes at most what is left of it, and a dependency
that did not answer once in that call is not waited on again (it is named at once)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar, cast

from cosmos_outbox._model import Model
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.errors import DependencyUnavailableError
from cosmos_outbox.http import bounded
from cosmos_outbox.telemetry import error_type

__all__ = ["COSMOS_DB", "SERVICE_BUS", "Unanswered", "answered", "unanswered"]

T = TypeVar("T")

#: The outbox's container (its documents, the relay's leases through the estimator).
COSMOS_DB = "Cosmos DB"
#: The namespace: the topic, the watched subscriptions' dead-letter queues, the schedule queue.
SERVICE_BUS = "Service Bus"


class Unanswered(Model):
    """A part of an answer that could not be read: which dependency did not answer, and how."""

    dependency: str
    #: what could not be read ("dead letters at all-events", "the relay's leases", ...)
    part: str
    error: str


def wait_seconds() -> float:
    """How long one wait may take: three quarters of the bound of the call it is part of (so
    that the route can still answer what it has)."""
    return max(0.2, bounded.bound_in_force() * 0.75)


async def answered(
    dependency: str, work: Coroutine[Any, Any, T], *, seconds: float | None = None
) -> T:
    """`work`'s result, if `dependency` answers within `seconds` (default `wait_seconds()`);
    else DependencyUnavailableError naming it. Errors of `work` are raised as they are."""
    limit = wait_seconds() if seconds is None else seconds
    shared = bounded.budget()
    if shared is not None:
        if dependency in shared.silent:
            work.close()
            raise DependencyUnavailableError(
                dependency, f"{shared.silent[dependency]} (not asked again in this call)"
            )
        limit = max(0.05, min(limit, shared.left()))
    try:
        return await _answered(dependency, work, limit)
    except DependencyUnavailableError as exc:
        if shared is not None:
            shared.silent.setdefault(dependency, exc.detail)
        raise


async def _answered(dependency: str, work: Coroutine[Any, Any, T], limit: float) -> T:
    with bounded.waiting_on(dependency):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return _on_a_thread(dependency, work, limit)
        # not `asyncio.wait_for`: past its timeout it waits for the cancelled call to end, and
        # a client cancelled while its peer is frozen may take that long closing its links
        # (azure-servicebus's aio receiver, its endpoint stopped: the route's own bound came
        # first and its 503 named no dependency). Past the bound, the call is cancelled and
        # left to end on its own.
        task = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait({task}, timeout=limit)
        except BaseException:  # the caller was cancelled: so is the call
            task.cancel()
            task.add_done_callback(_retrieved)
            raise
        if not done:
            task.cancel()
            task.add_done_callback(_retrieved)
            raise DependencyUnavailableError(dependency, f"did not answer within {limit:.3g} s")
        return task.result()


def _retrieved(task: asyncio.Future[Any]) -> None:
    """A call left behind past its bound ends unread: its outcome is dropped, not reported as
    never retrieved."""
    if not task.cancelled():
        task.exception()


def _on_a_thread(dependency: str, work: Coroutine[Any, Any, T], limit: float) -> T:
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, run_sync(work)))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append((False, exc))

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(run,), name="answered", daemon=True)
    thread.start()
    thread.join(limit)
    if not outcome:
        raise DependencyUnavailableError(dependency, f"did not answer within {limit:.3g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return cast(T, value)


def unanswered(dependency: str, part: str, exc: BaseException) -> Unanswered:
    """What a part's failure says (never a secret: the error's type and its first words)."""
    if isinstance(exc, DependencyUnavailableError):  # its own words: "did not answer within 3 s"
        return Unanswered(dependency=dependency, part=part, error=exc.detail)
    return Unanswered(dependency=dependency, part=part, error=f"{error_type(exc)}: {exc!s:.300}")
