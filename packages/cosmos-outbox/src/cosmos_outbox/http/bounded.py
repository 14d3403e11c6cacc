"""Bounded waits: an operation declared `bounded` (/health, the operators' routes) answers
within its bound whatever the store or the broker does: past it, 503 with Retry-After, naming
the dependency it was waiting on when the work said so (`waiting_on`). A sync function's work
runs on a thread of its own (`run_bounded`), an async one's under a timeout (`await_bounded`).

The bound is a setting that travels with what uses it: `BOUND_SECONDS` (4 s) unless the app
gives its own, checked by `checked_bound`, to its outbox (`Outbox(bound_seconds=...)`: its
/health, its operators' routes, the OpenAPI document that says it) or to an `HttpApi`
(`HttpApi(bound_seconds=...)`). Within a bounded call, the work reads the bound in force with
`bound_in_force()` (its waits take a share of it). Assigning `BOUND_SECONDS` changes nothing: it
is the default, read where a bound is declared."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, cast

from cosmos_outbox.http._problems import HttpProblemError

T = TypeVar("T")

__all__ = [
    "BOUND_RETRY_AFTER_SECONDS",
    "BOUND_SECONDS",
    "MAX_BOUND_SECONDS",
    "Budget",
    "await_bounded",
    "bound_in_force",
    "budget",
    "checked_bound",
    "run_bounded",
    "waiting_on",
]

logger = logging.getLogger("cosmos_outbox.http")
#: A bounded operation answers within this many seconds whatever the store or the broker does,
#: unless the app gives its own bound (see the module).
BOUND_SECONDS: Final = 4.0
#: The longest bound there is: Azure ends an HTTP request not answered in 230 s.
MAX_BOUND_SECONDS: Final = 230.0
#: The Retry-After of a bounded operation that ran out of time.
BOUND_RETRY_AFTER_SECONDS = 5
#: The share of the bound kept, after the work's last wait, to answer with what was read.
ANSWER_SHARE = 0.15


def checked_bound(seconds: float, *, name: str = "bound_seconds") -> float:
    """`seconds` as a bound: more than 0 and at most `MAX_BOUND_SECONDS`, else ValueError naming
    `name` (the argument, or the setting it came from) and what would be right."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"{name}={seconds!r}: not a number of seconds")
    if not 0 < seconds <= MAX_BOUND_SECONDS:
        raise ValueError(
            f"{name}={seconds!r}: must be more than 0 and at most {MAX_BOUND_SECONDS:g} s "
            "(Azure ends an HTTP request not answered in 230 s)"
        )
    return float(seconds)


@dataclass
class Budget:
    """One bounded call's time, shared by its waits (see the module): until when they may wait
    (`deadline`, monotonic), the dependencies that did not answer in it, with how, and the
    call's bound (`seconds`)."""

    deadline: float
    silent: dict[str, str] = field(default_factory=dict)
    seconds: float = BOUND_SECONDS

    def left(self) -> float:
        """Seconds its waits may still take (0 or less: none)."""
        return self.deadline - time.monotonic()


#: The bounded call this work is part of (None: not bounded): shared by reference with the
#: thread or task that runs it.
_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "cosmos_outbox_budget", default=None
)


def budget() -> Budget | None:
    """The time of the bounded call this work is part of (None: not in one)."""
    return _budget.get()


def bound_in_force() -> float:
    """The bound of the bounded call this work is part of; `BOUND_SECONDS` outside one."""
    shared = _budget.get()
    return shared.seconds if shared is not None else BOUND_SECONDS


def _new_budget(seconds: float) -> Budget:
    return Budget(time.monotonic() + seconds * (1 - ANSWER_SHARE), seconds=seconds)


#: What the bounded work of this call waits on now (the innermost last): shared by reference
#: with the thread or task that runs it, so that the bound's answer can name it.
_waiting: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "cosmos_outbox_waiting_on", default=None
)


@contextlib.contextmanager
def waiting_on(dependency: str) -> Iterator[None]:
    """The block waits on `dependency` ("Cosmos DB", "Service Bus"...): a bounded operation that
    runs out of time meanwhile says so in its 503."""
    holder = _waiting.get()
    if holder is None:
        yield
        return
    holder.append(dependency)
    cancelled = False
    try:
        yield
    except asyncio.CancelledError:
        # the bound ran out and cancelled the wait: it is still what the call waited on (its
        # 503 names it; without it, the answer could only say "the store or the message broker")
        cancelled = True
        raise
    finally:
        if not cancelled:
            with contextlib.suppress(ValueError):
                holder.remove(dependency)


def run_bounded(work: Callable[[], T], *, what: str, seconds: float = BOUND_SECONDS) -> T:
    """`work()`'s result or error, if it ends within `seconds`; else 503 with Retry-After
    (HttpProblemError). It runs on a thread of its own, in this call's context (trace, logging);
    past the bound it is left to finish on its own: the store's and the broker's clients bound
    each of their calls, and the operators' actions may be repeated (a replayed event that is
    resolved is not sent again; the topic drops a re-driven event it has)."""
    outcome: list[tuple[bool, Any]] = []
    holder: list[str] = []
    shared = _new_budget(seconds)

    def run() -> None:
        _waiting.set(holder)
        _budget.set(shared)
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the request's thread
            outcome.append((False, exc))

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(run,), name=f"bounded-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise _out_of_time(what, seconds, holder)
    ok, value = outcome[0]
    if not ok:
        raise value
    return cast(T, value)


async def await_bounded(work: Awaitable[T], *, what: str, seconds: float = BOUND_SECONDS) -> T:
    """`await work`, if it ends within `seconds`; else it is cancelled and 503 with
    Retry-After (HttpProblemError)."""
    holder: list[str] = []
    token = _waiting.set(holder)
    shared = _budget.set(_new_budget(seconds))
    try:
        return await asyncio.wait_for(work, seconds)
    except TimeoutError:
        raise _out_of_time(what, seconds, holder) from None
    finally:
        _budget.reset(shared)
        _waiting.reset(token)


def _out_of_time(what: str, seconds: float, waiting: list[str]) -> HttpProblemError:
    dependency = waiting[-1] if waiting else None
    logger.warning(
        "%s did not complete within %g s (waiting on %s): 503",
        what,
        seconds,
        dependency or "an unnamed dependency",
        extra={"http.operation": what, "bound_seconds": seconds, "dependency": dependency},
    )
    who = dependency or "the store or the message broker"
    return HttpProblemError(
        503,
        "Service Unavailable",
        f"{who} did not answer within {seconds:g} s; retry later",
        headers={"Retry-After": str(BOUND_RETRY_AFTER_SECONDS)},
    )
