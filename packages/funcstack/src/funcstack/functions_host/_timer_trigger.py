"""Timer triggers: NCRONTAB schedules (six fields, seconds first) or TimeSpan intervals.

As the host does: the next occurrence is computed from the schedule in UTC; at each one the
function is invoked with the host's timer payload (``Schedule``, ``ScheduleStatus`` with
``Last``/``Next``/``LastUpdated``, ``IsPastDue``); ``runOnStartup`` invokes once at start.
A failed invocation is logged (and retried per the function's retry policy); the schedule
goes on. LOCAL DIFFERENCE: no schedule monitor in storage (``useMonitor`` is ignored), so a
restarted host does not catch up missed occurrences.

On several instances a timer runs on one of them at a time: the timer's listener is a singleton
(``[Singleton(Mode = SingletonMode.Listener)]`` on the WebJobs ``TimerListener``;
``SingletonListener`` in Azure/azure-webjobs-sdk): the instance holding the lock runs the
schedule, the others try to take the lock every ``ListenerLockRecoveryPollingInterval`` (1
minute). LOCAL DIFFERENCE: the lock is a file lock in the folder the local-only setting
``FUNCTIONS_HOST_LOCKS_DIR`` names (funcstack sets it for an app on several instances) where
Azure takes a 60 s blob lease in the host's storage: a killed instance's lock is free at once
(in Azure within 60 s), a paused one keeps it until it resumes or dies.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import fcntl
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from croniter import croniter

from funcstack.functions_host._config import resolve
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._listener import HostServices, TriggerListener
from funcstack.functions_host._retry import parse_timespan
from funcstack.functions_host._rpc import protos

logger = logging.getLogger("funcstack.functions_host.timer")

_MIN = dt.datetime.min.replace(tzinfo=dt.UTC)
#: Local-only app setting: the folder of the singleton listener locks of an app's instances.
LOCKS_SETTING = "FUNCTIONS_HOST_LOCKS_DIR"
#: ``SingletonOptions.ListenerLockRecoveryPollingInterval``.
LOCK_RECOVERY_SECONDS = 60.0


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
            raise ValueError(f"NCRONTAB schedule needs six fields (second first): {expression!r}")
        elif not croniter.is_valid(self.expression, second_at_beginning=True):
            raise ValueError(f"not a valid NCRONTAB schedule: {expression!r}")

    def next_after(self, moment: dt.datetime) -> dt.datetime:
        if self._interval is not None:
            return moment + dt.timedelta(seconds=self._interval)
        it = croniter(self.expression, moment, second_at_beginning=True)
        value: dt.datetime = it.get_next(dt.datetime)
        return value


class TimerListener(TriggerListener):
    """Invokes one timer-triggered function on its schedule; listening once the schedule is
    armed (after the ``runOnStartup`` invocation, which the host's ``StartAsync`` awaits), or,
    on an instance that does not hold the singleton lock, once it has tried to take it."""

    kind = "timer"

    def __init__(
        self,
        spec: FunctionSpec,
        host: HostServices,
        *,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        super().__init__(spec, host)
        self.schedule = Schedule(str(resolve(spec.trigger.get("schedule", ""))))
        self.run_on_startup = bool(spec.trigger.get("runOnStartup", False))
        self._clock = clock

    def start(self) -> None:
        locks = os.environ.get(LOCKS_SETTING)
        run = self._run() if not locks else self._run_singleton(Path(locks))
        self.spawn(run, name=f"timer-{self.spec.name}")

    async def _run_singleton(self, folder: Path) -> None:
        """The schedule on the instance that holds ``<function>.Listener`` (``SingletonListener``:
        the others try again every recovery interval)."""
        os.makedirs(folder, exist_ok=True)  # noqa: PTH103 - a local folder: no need for a thread
        fd = os.open(folder / f"{self.spec.name}.Listener", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            said = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    self.listening()  # the SingletonListener started: it tries again later
                    if not said:
                        logger.info(
                            "timer %s: another instance holds its singleton listener "
                            "lock; trying again every %.0fs",
                            self.spec.name,
                            LOCK_RECOVERY_SECONDS,
                        )
                        said = True
                    await asyncio.sleep(LOCK_RECOVERY_SECONDS)
            logger.info("timer %s: this instance holds its singleton listener lock", self.spec.name)
            await self._run()
        finally:
            os.close(fd)  # releases the lock

    async def _run(self) -> None:
        last: dt.datetime | None = None
        now = self._clock()
        if self.run_on_startup:
            await self._fire(last, now, self.schedule.next_after(now), past_due=False)
            last = now
        logger.info("timer %s: schedule %s", self.spec.name, self.schedule.expression)
        while True:
            due = self.schedule.next_after(self._clock())
            self.listening()  # armed
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
        await self.invoke(pb.TypedData(json=json.dumps(payload)), what=f"timer {self.spec.name}")
