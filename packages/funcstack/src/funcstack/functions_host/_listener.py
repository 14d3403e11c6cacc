"""What every trigger listener shares: the WebJobs ``IListener`` around one triggered function,
and the host's ``FunctionExecutor`` that invokes it.

* **Start and stop** with the host: a listener runs its loops as tasks (``spawn``), which
  ``stop()`` cancels and awaits; a subclass that holds clients closes them after.
* **Says when it listens** (``listening()``): once a change made from then on reaches it -- its
  first poll of a queue answered, its first listing of a container done, its receiver open, its
  schedule armed (the timer's ``StartAsync`` returns only after a ``runOnStartup`` invocation,
  ``TimerListener`` in Azure/azure-webjobs-sdk-extensions). The host says it is ready only when
  every listener does (``wait_listening``; ``_runner.Runner``), so that a change made right
  after the ready line is delivered. A listener whose first attempt fails says why
  (``unable_to_start``) and keeps trying, as the WebJobs host's ``FunctionListener`` retries a
  listener that could not start while the host runs ("The listener for function '...' was
  unable to start", partial host start-up): the host is ready then too, and says which trigger
  does not listen and why (its log, its ready line's ``not_listening``).
* **Invokes the function** (``invoke``): the trigger's value as the function's trigger
  parameter, the trigger metadata, the function timeout, and the function's retry policy
  applied as the host applies it (``_retry.invoke_with_retries``: the same back-off for every
  trigger; each retry is an invocation, counted in ``invocations``).

Every trigger's listener is one: queue, blob, Service Bus, timer, and the Cosmos DB trigger's
(``_cosmos_trigger/listener.py``), which runs cosmos-changefeed's processor as its loop, says
``listening()`` when the processor is listening (its first acquire round done, the start of
each lease it took fixed) and delivers each batch through ``invoke`` in the processor's handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from funcstack.functions_host._config import HostJson
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._retry import invoke_with_retries
from funcstack.functions_host._rpc import protos

__all__ = [
    "HostServices",
    "Listener",
    "TriggerListener",
    "close_quietly",
    "first_line",
]

logger = logging.getLogger("funcstack.functions_host")


async def close_quietly(*clients: Any) -> None:
    """Close a listener's SDK clients at its stop (None: not made); a failure is no concern
    of a host that is stopping."""
    for client in clients:
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


def first_line(error: BaseException) -> str:
    """An error's message in one line (an SDK's can run over many)."""
    return (str(error).strip().splitlines() or [""])[0][:300]


@dataclass(frozen=True)
class HostServices:
    """What a listener gets from the host: the worker, the function timeout, host.json, and the
    host id (the blob trigger's receipts and queue are the host's)."""

    worker: LanguageWorker
    timeout: Callable[[], float | None]
    host_json: HostJson
    host_id: str


class Listener(Protocol):
    """What the host runs for one triggered function (the WebJobs ``IListener``)."""

    spec: FunctionSpec

    def start(self) -> None: ...

    async def wait_listening(self) -> str | None:
        """Return once a change made from now on reaches the listener (None), or, when it
        could not start, why (it keeps trying)."""
        ...

    async def stop(self) -> None: ...


class TriggerListener:
    """The base of the trigger listeners: one function and the host's services (its worker,
    timeout, host.json), its tasks, its readiness, its invocations."""

    #: How the listener names itself in the log (``queue trigger``, ``timer``...).
    kind = "trigger"

    def __init__(self, spec: FunctionSpec, host: HostServices) -> None:
        self.spec = spec
        self.host = host
        self.worker = host.worker
        self._timeout = host.timeout
        #: Invocations made, retries included.
        self.invocations = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._listening = asyncio.Event()
        #: Settled: listening, or unable to start (``_unable`` says why).
        self._settled = asyncio.Event()
        self._unable: str | None = None

    # -- start and stop ---------------------------------------------------------------------

    def start(self) -> None:
        """Start listening (spawn the loops); ``listening()`` says when it does."""
        raise NotImplementedError

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run one of the listener's loops; ``stop()`` cancels it."""
        task = asyncio.create_task(work, name=name)
        self._tasks.append(task)
        return task

    async def stop(self) -> None:
        """Stop listening: the loops cancelled and ended (a subclass closes its clients after)."""
        await self.stop_loops()

    async def stop_loops(self) -> None:
        """Cancel the loops and wait for them to end."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- readiness ----------------------------------------------------------------------------

    def listening(self) -> None:
        """A change made from now on reaches this listener (said once)."""
        if self._listening.is_set():
            return
        self._listening.set()
        self._settled.set()
        if self._unable is None:
            logger.info("%s %s: listening", self.kind, self.spec.name)
        else:
            logger.info(
                "%s %s: listening (it could not start: %s)", self.kind, self.spec.name, self._unable
            )
            self._unable = None

    def unable_to_start(self, reason: str, *, retrying: bool = True) -> None:
        """The first attempt to listen failed (``reason``); the listener keeps trying, unless
        ``retrying`` is false (a binding it refuses: trying again would fail the same way).
        Said once, as the host's ``FunctionListener`` says it."""
        if self._settled.is_set():
            return
        self._unable = reason
        self._settled.set()
        logger.error(
            "The listener for function 'Functions.%s' was unable to start: %s%s",
            self.spec.name,
            reason,
            ". It keeps trying." if retrying else "",
        )

    @property
    def is_listening(self) -> bool:
        return self._listening.is_set()

    async def wait_listening(self) -> str | None:
        await self._settled.wait()
        return None if self.is_listening else self._unable

    # -- invocations --------------------------------------------------------------------------

    async def invoke(
        self,
        data: Any,
        *,
        what: str,
        trigger_metadata: Mapping[str, Any] | None = None,
        detail: str = "",
    ) -> tuple[bool, int]:
        """Invoke the function with ``data`` (``TypedData``) as its trigger parameter, retried
        per its retry policy (``what`` names the change in the log lines); whether it succeeded
        in the end, and how many retries were made."""
        binding = protos().ParameterBinding(name=self.spec.trigger_arg, data=data)

        async def attempt(retries: int, max_retries: int) -> str | None:
            self.invocations += 1
            return await self.worker.try_invoke(
                self.spec.function_id,
                [binding],
                trigger_metadata=trigger_metadata,
                retry_count=retries,
                max_retry_count=max_retries,
                time_limit=self._timeout(),
                detail=detail,
            )

        return await invoke_with_retries(self.spec.retry, attempt, what=what)
