"""A Functions host run alone (one host for its app, not an app's instances) that dies is started
again on its port, as Azure restarts a host: the app's URL is the same before and after, and
what the dead host held is taken over once its lease expires (a Cosmos DB trigger's leases,
which a killed process never releases; a bulk operation an app's worker held).

What Azure does, and what this follows:

* the platform brings a host whose process ended back (App Service recycles its worker
  process; an instance lost is replaced), and the host's own start loop starts it again after
  a failure with a back-off of 1 s at least, doubling, 2 min at most, for ever
  (azure-functions-host, ``WebJobsScriptHostService.StartHostAsync``:
  ``Utility.DelayWithBackoffAsync(attemptCount, min: 1 s, max: 2 min)``);
* the host starts its language worker again when it exits, up to 3 errors within 30 minutes,
  then stops itself so that the platform recycles it (``RpcFunctionInvocationDispatcher``:
  ``ErrorEventsThreshold``, ``WorkerRestartErrorIntervalThresholdInMinutes``); funcstack's host
  does that itself (``functions_host/_language_worker.py``), and this module restarts the host
  it stopped.

Here (``scaleout.RestartPolicy``, as an app's instances): a host that exits is started again
after ``delay`` (1 s); one that fails at start (it exits before it is ready, or within
``settle`` seconds of it, or does not start) waits twice as long each time, up to ``max_delay``;
after ``give_up_after`` (3) such failures in a row it is given up with one error line naming it
and its log, and the stack's ``dead_part`` reports it (``funcstack run`` and ``make run`` then
stop, exit status 1, rather than serve nothing for ever). Every exit, restart and give-up is a
line for ``on_event`` (the terminal's), else logged. A host stopped on purpose (``stop_part``,
``stop()``) is not restarted; one killed on purpose (``kill_host``) is, as after a crash.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from funcstack._processes import describe_exit, last_lines, note

if TYPE_CHECKING:
    from funcstack.scaleout import RestartPolicy
    from funcstack.services import LocalServices

logger = logging.getLogger("funcstack")

#: How often the supervisor looks at the hosts' processes (seconds).
_WATCH_EVERY = 0.2
#: How long a stop waits for the supervisor to give up a start under way (a start it cancels
#: ends within the grace and the wait for a kill, ``_processes.KILLED_WAIT``).
_SUPERVISOR_STOP = 90.0


@dataclass
class _Watched:
    """One host under the supervisor: its failures at start in a row, when it was last ready,
    when it starts again, and whether it is down (``restarting``, ``failed``)."""

    failures: int = 0
    ready_at: float = field(default_factory=time.monotonic)
    restart_at: float = 0.0
    down: str | None = None
    last_exit: str | None = None
    restarts: int = 0


@dataclass
class HostRestarts:
    """The supervisor of a stack's hosts run alone (``LocalServices.host_restart``): a thread
    that looks at them every 0.2 s and starts again those that exited (module docstring)."""

    stack: LocalServices
    policy: RestartPolicy
    on_event: Callable[[str], None] | None = None
    _watched: dict[str, _Watched] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def watch(self, name: str) -> None:
        """Supervise host ``name`` (ready now), from now on."""
        with self._lock:
            self._watched[name] = _Watched()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._supervise, name="host-restarts", daemon=True
                )
                self._thread.start()

    def forget(self, name: str) -> None:
        """Host ``name`` is stopped on purpose: not restarted."""
        with self._lock:
            self._watched.pop(name, None)

    def watched(self, name: str) -> bool:
        """Whether host ``name`` is the supervisor's (running or being restarted), not given
        up."""
        with self._lock:
            watched = self._watched.get(name)
            return watched is not None and watched.down != "failed"

    def given_up(self, name: str) -> str | None:
        """How host ``name`` was given up (``failed at start 3 times in a row (last: ...)``),
        or None."""
        with self._lock:
            watched = self._watched.get(name)
        if watched is None or watched.down != "failed":
            return None
        return f"failed at start {watched.failures} times in a row (last: {watched.last_exit})"

    def stop(self) -> None:
        """Stop restarting hosts (a start under way is given up): what a stack's stop does
        first, so that the hosts it stops are not taken for crashed ones."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(_SUPERVISOR_STOP)
            if thread.is_alive():  # the host it starts is stopped once started
                logger.warning("a host's restart still under way after the stop")

    # -- the supervisor -------------------------------------------------------------------------

    def _supervise(self) -> None:
        while not self._stopping.wait(_WATCH_EVERY):
            with suppress(Exception):  # never let the supervisor die with the stack running
                self.look()

    def look(self) -> None:
        """Notice the hosts that exited, and start again those whose time has come (what the
        supervisor's thread does every 0.2 s)."""
        now = time.monotonic()
        with self._lock:
            for name, watched in list(self._watched.items()):
                runner = self.stack.hosts.get(name)
                if watched.down is None and runner is not None:
                    code = runner.process.poll()
                    if code is not None:
                        self._exited(name, watched, code, now)
            due = [
                name
                for name, watched in self._watched.items()
                if watched.down == "restarting" and now >= watched.restart_at
            ]
        for name in due:
            if self._stopping.is_set():
                return
            self._start_again(name)

    def _exited(self, name: str, watched: _Watched, code: int | None, now: float) -> None:
        watched.last_exit = describe_exit(code)
        if now - watched.ready_at < self.policy.settle:
            watched.failures += 1
        else:
            watched.failures = 0
        log = self.stack.log_path(name)
        runner = self.stack.hosts[name]
        note(log, f"{name} (pid {runner.process.pid}) exited unexpectedly: {watched.last_exit}")
        lines = last_lines(log)
        if watched.failures >= self.policy.give_up_after:
            self._give_up(name, watched)
            return
        watched.down = "restarting"
        wait = self.policy.wait(watched.failures)
        watched.restart_at = now + wait
        self._event(
            f"{name} exited unexpectedly ({watched.last_exit}); restarting it in {wait:g} s on "
            f"127.0.0.1:{runner.port}, as Azure restarts a host that dies (what it held, its "
            f"Cosmos DB leases, is taken over once its lease expires)"
            + (f". Last lines of {log}:" if lines else ""),
            lines,
        )

    def _give_up(self, name: str, watched: _Watched) -> None:
        watched.down = "failed"
        self._event(
            f"{name} failed at start {watched.failures} times in a row (last: "
            f"{watched.last_exit}); not restarted again. Its log: {self.stack.log_path(name)}",
            error=True,
        )

    def _start_again(self, name: str) -> None:
        from funcstack.services import PartStartError

        runner = self.stack.hosts.get(name)
        if runner is None or runner.options is None:
            return
        with suppress(Exception):  # what is left of its process group; its log closed
            runner.stop(timeout=0)
        try:
            # on the port it had (start_host's), so that its URL is the same
            self.stack.start_host(name, runner.options, cancel=self._stopping)
        except PartStartError as exc:
            if self._stopping.is_set():
                return
            self._failed_start(name, exc.detail)
            return
        with self._lock:
            started = self.stack.hosts[name]
            watched = self._watched.get(name)
            if self._stopping.is_set() or watched is None:
                started.stop(timeout=1.5)  # stopped (or stopped on purpose) meanwhile
                return
            watched.down = None
            watched.restarts += 1
            watched.ready_at = time.monotonic()
        self._event(f"{name} restarted (pid {started.process.pid}, 127.0.0.1:{started.port})")

    def _failed_start(self, name: str, detail: str) -> None:
        with self._lock:
            watched = self._watched.get(name)
            if watched is None:
                return
            watched.failures += 1
            watched.last_exit = f"did not start: {detail}"
            note(self.stack.log_path(name), f"{name} did not start again: {detail}")
            if watched.failures >= self.policy.give_up_after:
                self._give_up(name, watched)
                return
            wait = self.policy.wait(watched.failures)
            watched.restart_at = time.monotonic() + wait
        self._event(f"{name} did not start again ({detail}); next try in {wait:g} s")

    def _event(self, line: str, lines: Sequence[str] = (), *, error: bool = False) -> None:
        """An exit, restart or give-up: to ``on_event`` (the terminal's), else logged."""
        text = "\n".join([line, *(f"  {entry}" for entry in lines)])
        if self.on_event is not None:
            self.on_event(text)
            return
        (logger.error if error else logger.warning)("%s", text)
