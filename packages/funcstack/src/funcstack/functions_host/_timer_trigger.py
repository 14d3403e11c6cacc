"""Timer triggers: NCRONTAB schedules (six fields, seconds first) or TimeSpan intervals.

As the host does: the next occurrence is computed from the schedule in UTC; at each one the
function is invoked with the host's timer payload (``Schedule``, ``ScheduleStatus`` with
``Last``/``Next``/``LastUpdated``, ``IsPastDue``); ``runOnStartup`` invokes once at start.
A failed invocation is logged (and retried per the function's retry policy); the schedule
goes on. LOCAL DIFFERENCE: no schedule monitor in storage (``useMonitor`` is ignored), so a
restarted host does not catch up missed occurrences.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from collections.abc import Callable

from croniter import croniter

from funcstack.functions_host._config import resolve
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._retry import invoke_with_retries, parse_timespan
from funcstack.functions_host._rpc import protos

logger = logging.getLogger("funcstack.functions_host.timer")

_MIN = dt.datetime.min.replace(tzinfo=dt.UTC)


class Schedule:
    """Next occurrences of a timer binding's ``schedule``."""

    def __init__(self, expression: str) -> None:
        self.expression = expression.strip()
        self._interval: float | None = None
        if ":" in self.expression and " " not in self.expression:
            self._interval = parse_timespan(self.expression)
            if self._interval <= 0:
                raise ValueError(f"timer interval must be positive: {expression!r}")
        elif len(self.expression.split()) != 6:
            raise ValueError(
                f"NCRONTAB schedule needs six fields (second first): {expression!r}"
            )
        elif not croniter.is_valid(self.expression, second_at_beginning=True):
            raise ValueError(f"not a valid NCRONTAB schedule: {expression!r}")

    def next_after(self, moment: dt.datetime) -> dt.datetime:
        if self._interval is not None:
            return moment + dt.timedelta(seconds=self._interval)
        it = croniter(self.expression, moment, second_at_beginning=True)
        value: dt.datetime = it.get_next(dt.datetime)
        return value


class TimerListener:
    """Invokes one timer-triggered function on its schedule."""

    def __init__(
        self,
        spec: FunctionSpec,
        worker: LanguageWorker,
        *,
        timeout: Callable[[], float | None] = lambda: None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.spec = spec
        self.schedule = Schedule(str(resolve(spec.trigger.get("schedule", ""))))
        self.run_on_startup = bool(spec.trigger.get("runOnStartup", False))
        self._worker = worker
        self._timeout = timeout
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.invocations = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"timer-{self.spec.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        last: dt.datetime | None = None
        now = self._clock()
        if self.run_on_startup:
            await self._fire(last, now, self.schedule.next_after(now), past_due=False)
            last = now
        logger.info("timer %s: schedule %s", self.spec.name, self.schedule.expression)
        while True:
            due = self.schedule.next_after(self._clock())
            await asyncio.sleep(max(0.0, (due - self._clock()).total_seconds()))
            fired_at = self._clock()
            past_due = (fired_at - due).total_seconds() > 1.0
            await self._fire(last, due, self.schedule.next_after(due), past_due=past_due)
            last = due

    async def _fire(
        self, last: dt.datetime | None, now: dt.datetime, following: dt.datetime, *, past_due: bool
    ) -> None:
        pb = protos()
        payload = {
            "Schedule": {"AdjustForDST": True},
            "ScheduleStatus": {
                "Last": (last or _MIN).isoformat(),
                "Next": following.isoformat(),
                "LastUpdated": now.isoformat(),
            },
            "IsPastDue": past_due,
        }
        binding = pb.ParameterBinding(
            name=self.spec.trigger_arg, data=pb.TypedData(json=json.dumps(payload)))

        async def attempt(retries: int, max_retries: int) -> str | None:
            self.invocations += 1
            return await self._worker.try_invoke(
                self.spec.function_id, [binding], retry_count=retries,
                max_retry_count=max_retries, time_limit=self._timeout())

        await invoke_with_retries(self.spec.retry, attempt, what=f"timer {self.spec.name}")
