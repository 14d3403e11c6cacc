"""An app on several host instances, as Azure scales it out: N instances of the whole app, or
its function groups each on instances of their own (Flex Consumption's per-function scaling),
one front spreading HTTP requests over the instances, and the chaos a test needs: kill
(SIGKILL), pause (SIGSTOP) and resume (SIGCONT) an instance, add one.

Follows Azure's docs:

* "Event-driven scaling in Azure Functions": each instance runs a host of its own with the
  whole app, the same app settings, an instance id of its own (``WEBSITE_INSTANCE_ID``); the
  triggers share the work (the Cosmos DB trigger by its leases, Service Bus and queues as
  competing consumers, a timer on one instance at a time); HTTP requests are spread over the
  instances by the front end.
* "Flex Consumption plan hosting", per-function scaling: the HTTP triggers scale together as
  the group ``http``; every other function scales on its own as ``function:<name>`` (the names
  the always-ready settings use, ``http=2``, ``function:relay_events=3``); an instance runs the
  functions of one group only, so state kept in memory by one function is not seen by a
  function of another group.

``plan`` (``parse_instances``): ``3`` -- three instances of the whole app; ``http=2,
function:relay_events=3`` (or ``relay_events=3``) -- each group on instances of its own, the
groups not named on one instance each. Instances are named ``<app>-<n>`` (whole app) or
``<app>-<group>-<n>`` (``<group>``: ``http`` or the function's name), each with its log file
``<name>.log``; their ``WEBSITE_INSTANCE_ID`` is that name.

**An instance that exits is restarted** (``RestartPolicy``), as Azure brings a failed instance
back, while the others go on serving: the front skips it meanwhile, and its Cosmos DB leases,
which a killed process never releases, are taken over once they expire by the instances that
balance (the change feed processor's protocol); back, it is a new owner and balancing gives it
its share again (it steals). It comes back under its name, on its port when that is free, after
``delay`` (1 s); an instance that fails at start (it exits before it is ready, or within
``settle`` seconds of it) waits twice as long each time, and after ``give_up_after`` (3) such
failures in a row it is given up with one error line naming it and its log. A kill asked for
(``kill``) takes the same path unless asked not to come back (``kill(name, restart=False)``),
and never counts as a failure at start.

What Azure does: the host restarts a language worker that exits, up to 3 errors within 30
minutes (``RpcFunctionInvocationDispatcher.ErrorEventsThreshold``, ``ProcessRestartInterval``
10 s), then stops itself so that the platform recycles it; a host that fails to start is
started again after ``Utility.ComputeBackoff`` (1 s at least, doubling, 2 min at most), for
ever; the platform replaces an instance that is lost. Locally a loop for ever would bury the
cause in the terminal, so an instance that keeps failing at start is given up, loudly.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funcstack._processes import describe_exit, last_lines, note
from funcstack.front import HttpFront
from funcstack.functions_host._config import load_local_settings, settings_in_force
from funcstack.functions_host._keys import FUNCTION_KEY_SETTING, MASTER_KEY_SETTING, HostKeys
from funcstack.functions_host._timer_trigger import LOCKS_SETTING

if TYPE_CHECKING:
    from funcstack.functions_host import HostOptions, RunningRunner
    from funcstack.services import LocalServices

__all__ = ["AppInstances", "Instance", "InstanceError", "RestartPolicy", "parse_instances"]

logger = logging.getLogger("funcstack.scaleout")

#: How often the supervisor looks at the instances' processes (seconds).
_WATCH_EVERY = 0.2
#: How long a stop waits for the supervisor to give up a restart under way: a start it cancels
#: ends within the grace and the wait for a kill (``_processes.KILLED_WAIT``), a fork server's
#: answer within its own bound (``_forkserver.ANSWER_TIMEOUT``).
_SUPERVISOR_STOP = 90.0

#: The HTTP functions' group (``function_group`` in the host).
HTTP_GROUP = "http"
_GROUP = re.compile(r"^(http|function:[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*)$")


def parse_instances(text: str | int | Mapping[str, int]) -> dict[str | None, int]:
    """``"3"`` -> ``{None: 3}`` (the whole app on 3 instances); ``"http=2,relay=3"`` ->
    ``{"http": 2, "function:relay": 3}`` (groups apart). ``ValueError`` names what is wrong."""
    if isinstance(text, int):
        pairs: list[tuple[str | None, str]] = [(None, str(text))]
    elif isinstance(text, Mapping):
        pairs = [(str(k), str(v)) for k, v in text.items()]
    else:
        spec = text.strip()
        if not spec:
            raise ValueError("instances: empty; give a count (3) or groups (http=2,relay=3)")
        pairs = []
        for part in spec.split(","):
            left, eq, right = part.strip().partition("=")
            pairs.append((left.strip(), right.strip()) if eq else (None, left.strip()))
        if len(pairs) > 1 and any(group is None for group, _ in pairs):
            raise ValueError(
                f"instances {text!r}: either one count (3) or groups with counts "
                "(http=2,function:relay=3), not both"
            )
    plan: dict[str | None, int] = {}
    for name, count in pairs:
        if not count.isdigit() or int(count) < 1:
            raise ValueError(
                f"instances: {count!r} is not a count of instances (1 or more)"
                + (f" for {name}" if name else "")
            )
        if name is not None and not _GROUP.match(name):
            raise ValueError(
                f"instances: {name!r} is not a function group (http, function:<name> or <name>)"
            )
        plan[_group(name)] = int(count)
    return plan


def _group(name: str | None) -> str | None:
    """A group as the host names it: ``http``, ``function:<name>`` (a bare name is a
    function's)."""
    if name is None or name == HTTP_GROUP or name.startswith("function:"):
        return name
    return f"function:{name}"


class InstanceError(ValueError):
    """What cannot be done to an instance (no such instance, or not in a state for it)."""


@dataclass(frozen=True)
class RestartPolicy:
    """How an instance that exits is brought back (module docstring): after ``delay`` seconds,
    doubled after each failure at start up to ``max_delay``; given up after ``give_up_after``
    failures at start in a row; an exit within ``settle`` seconds of being ready is a failure
    at start."""

    delay: float = 1.0
    max_delay: float = 120.0
    give_up_after: int = 3
    settle: float = 10.0

    def wait(self, failures: int) -> float:
        """Seconds before the next start, after ``failures`` failures at start in a row."""
        return float(min(self.max_delay, self.delay * 2 ** max(0, failures)))


@dataclass
class Instance:
    """One host instance of the app."""

    name: str
    #: Its function group (None: the whole app).
    group: str | None
    runner: RunningRunner
    log_path: Path
    paused: bool = False
    #: None while its host runs; ``restarting`` (waiting for its next start), ``stopped``
    #: (killed, not to come back) or ``failed`` (given up after failures at start).
    down: str | None = None
    #: Times it was started again, and its failures at start since it last ran (in a row).
    restarts: int = 0
    failures: int = 0
    #: When its host was last ready, and when it starts again (``time.monotonic()``).
    ready_at: float = field(default_factory=time.monotonic)
    restart_at: float = 0.0
    #: How its host last exited (``killed by SIGKILL``, ``exit code 1``), once it has.
    last_exit: str | None = None
    _on_purpose: bool = field(default=False, repr=False)
    #: Its last start failed: its port may be why.
    _start_failed: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        return self.runner.process.pid

    @property
    def port(self) -> int:
        return self.runner.port

    @property
    def alive(self) -> bool:
        return self.runner.process.poll() is None

    @property
    def serves_http(self) -> bool:
        return self.group in {None, HTTP_GROUP}

    @property
    def state(self) -> str:
        """``running``, ``paused``, ``restarting``, ``stopped``, ``failed`` (or ``exited``: its
        host is gone and no supervisor has seen it yet, or there is none)."""
        if self.down is not None:
            return self.down
        if not self.alive:
            return "exited"
        return "paused" if self.paused else "running"


@dataclass
class AppInstances:
    """An app on several instances of ``stack`` (``LocalStack.host_app(..., instances=...)``).

    ``url`` is the front's (the app's address); ``instances`` the hosts, in start order."""

    stack: LocalServices
    name: str
    #: The app's host, as each instance runs it (``HostOptions``: its folder, the settings
    #: given to it, its settings file, ...; ``on_console`` gets each record with the name of
    #: the instance that wrote it, under ``"instance"``).
    options: HostOptions
    plan: dict[str | None, int]
    port: int = 0
    #: How an instance that exits comes back (None: it stays down, as before).
    restart: RestartPolicy | None = field(default_factory=RestartPolicy)
    #: A line for each exit, restart and give-up (the terminal's, under ``funcstack run``);
    #: each is logged too.
    on_event: Callable[[str], None] | None = None
    instances: list[Instance] = field(default_factory=list)
    #: The app's function groups and their functions (as its hosts indexed it).
    groups: dict[str, list[str]] = field(default_factory=dict)
    front: HttpFront | None = None
    function_key: str | None = field(default=None, repr=False)
    master_key: str | None = field(default=None, repr=False)
    _prefix: str = ""
    _numbers: dict[str | None, int] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _supervisor: threading.Thread | None = field(default=None, repr=False)

    # -- start and stop -------------------------------------------------------------------------

    def start(self) -> AppInstances:
        """Start the instances (each ready before the next), then the front on ``port``. On a
        failure, what started is stopped and the error raised."""
        # a timer runs on one instance at a time (the singleton listener lock's folder)
        self.options = self.options.given(
            {LOCKS_SETTING: str(self.stack.workdir / "locks" / self.name)}
        )
        if self.options.enforce_keys:  # one set of keys for every instance, as one app has
            file = self.options.settings_file
            values = load_local_settings(file) if file is not None and file.is_file() else {}
            keys = HostKeys.from_settings(settings_in_force(values, self.options.settings))
            self.options = self.options.given(
                {FUNCTION_KEY_SETTING: keys.function_key, MASTER_KEY_SETTING: keys.master_key}
            )
        try:
            self._start_instances()
            if any(inst.serves_http for inst in self.instances) and self.groups.get(HTTP_GROUP):
                self.front = HttpFront(self._http_backends, port=self.port).start()
                self.port = self.front.port
            else:
                self.port = self.instances[0].port
        except BaseException:
            self.stop()
            raise
        if self.restart is not None:
            self._supervisor = threading.Thread(
                target=self._supervise, name=f"instances-{self.name}", daemon=True
            )
            self._supervisor.start()
        return self

    def _start_instances(self) -> None:
        whole = None in self.plan
        if whole:
            for _ in range(self.plan[None]):
                self.add_instance(None)
            return
        named = list(self.plan)
        first = self.add_instance(named[0])
        unknown = [g for g in named if g not in self.groups]
        if unknown:
            raise ValueError(
                f"{self.name}: no function group {', '.join(map(str, unknown))} "
                f"in the app (its groups: {', '.join(self.groups)})"
            )
        for group in self.groups:
            wanted = self.plan.get(group, 1) - (1 if group == first.group else 0)
            for _ in range(wanted):
                self.add_instance(group)

    def stop(self) -> None:
        """Stop the supervisor (a restart under way is given up), the front and every instance
        (a paused one is resumed to stop cleanly)."""
        self.stop_watching()
        if self.front is not None:
            self.front.stop()
            self.front = None
        for inst in self.instances:
            if inst.paused:
                self.resume(inst)
        from funcstack.services import STOP_TIMEOUT, stop_all

        stop_all(
            [
                (inst.name, functools.partial(inst.runner.stop, timeout=STOP_TIMEOUT))
                for inst in self.instances
            ]
        )
        for inst in self.instances:
            self.stack.hosts.pop(inst.name, None)

    def stop_watching(self) -> None:
        """Stop restarting instances (a restart under way is given up): what a stop does first,
        so that the instances it stops are not taken for crashed ones."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(_SUPERVISOR_STOP)
            if self._supervisor.is_alive():  # the host it starts is stopped once started
                logger.warning("%s: a restart still under way after the stop", self.name)
            self._supervisor = None

    # -- the app's address --------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The app's base URL through the front (with the route prefix, as a host's)."""
        return f"http://127.0.0.1:{self.port}{self._prefix}"

    def _http_backends(self) -> list[str]:
        return [
            f"http://127.0.0.1:{inst.port}"
            for inst in self.instances
            if inst.serves_http and inst.alive
        ]

    # -- chaos ----------------------------------------------------------------------------------

    def instance(self, which: str | Instance) -> Instance:
        if isinstance(which, Instance):
            return which
        for inst in self.instances:
            if inst.name == which:
                return inst
        raise KeyError(
            f"{self.name}: no instance {which!r} (instances: "
            f"{', '.join(i.name for i in self.instances)})"
        )

    def in_group(self, group: str | None) -> list[Instance]:
        """The instances of ``group`` (``http``, ``function:<name>`` or ``<name>``; None: the
        whole app's)."""
        return [inst for inst in self.instances if inst.group == _group(group)]

    def kill(self, which: str | Instance, *, restart: bool = True) -> Instance:
        """SIGKILL the instance's host (its worker ends with it): nothing it held is released;
        its Cosmos DB leases wait for their expiry. It comes back as after a crash (the
        restart policy's delay), unless ``restart=False``: then it stays down (``stopped``)."""
        with self._lock:
            inst = self.instance(which)
            if inst.down is not None:
                raise InstanceError(f"{inst.name} is not running ({inst.state})")
            inst._on_purpose = True
            inst.runner.kill()
            inst.paused = False
            if not restart:
                inst.down = "stopped"
                inst.last_exit = describe_exit(inst.runner.process.returncode)
                self.stack.hosts.pop(inst.name, None)
                note(inst.log_path, f"{inst.name} killed on purpose; not restarted (asked)")
        return inst

    def pause(self, which: str | Instance) -> Instance:
        """SIGSTOP the instance's host and worker (their process group): it stops renewing
        its leases and answering, as a hung instance."""
        with self._lock:
            inst = self._running(which)
            os.killpg(inst.pid, signal.SIGSTOP)
            inst.paused = True
        return inst

    def resume(self, which: str | Instance) -> Instance:
        """SIGCONT a paused instance."""
        with self._lock:
            inst = self._running(which)
            with suppress(ProcessLookupError):
                os.killpg(inst.pid, signal.SIGCONT)
            inst.paused = False
        return inst

    def _running(self, which: str | Instance) -> Instance:
        inst = self.instance(which)
        if inst.down is not None or not inst.alive:
            raise InstanceError(f"{inst.name} is not running ({inst.state})")
        return inst

    # -- the supervisor: an instance that exits comes back ----------------------------------

    def _supervise(self) -> None:
        while not self._stopping.wait(_WATCH_EVERY):
            with suppress(Exception):  # never let the supervisor die with the stack running
                self.watch()

    def watch(self) -> None:
        """Notice the instances whose host has exited, and start again those whose time has
        come (what the supervisor thread does every 0.2 s)."""
        policy = self.restart
        if policy is None:
            return
        now = time.monotonic()
        with self._lock:
            for inst in self.instances:
                if inst.down is None and not inst.alive:
                    self._exited(inst, policy, now)
            due = [i for i in self.instances if i.down == "restarting" and now >= i.restart_at]
        for inst in due:
            if self._stopping.is_set():
                return
            self._start_again(inst, policy)

    def _exited(self, inst: Instance, policy: RestartPolicy, now: float) -> None:
        code = inst.runner.process.returncode
        inst.last_exit = describe_exit(code)
        inst.paused = False
        on_purpose, inst._on_purpose = inst._on_purpose, False
        if on_purpose:
            inst.failures = 0
            how = f"{inst.name} was killed ({inst.last_exit}, asked)"
        else:
            inst.failures = inst.failures + 1 if now - inst.ready_at < policy.settle else 0
            how = f"{inst.name} exited unexpectedly ({inst.last_exit})"
        note(inst.log_path, f"{how}: pid {inst.pid}")
        lines = [] if on_purpose else last_lines(inst.log_path)
        if inst.failures >= policy.give_up_after:
            self._give_up(inst, policy, lines)
            return
        inst.down = "restarting"
        wait = policy.wait(inst.failures)
        inst.restart_at = now + wait
        self._event(
            f"{how}; restarting it in {wait:g} s, as Azure replaces a failed instance (the "
            "others serve meanwhile; its Cosmos DB leases are taken over once they expire)"
            + (f". Last lines of {inst.log_path}:" if lines else ""),
            lines,
        )

    def _give_up(self, inst: Instance, policy: RestartPolicy, lines: list[str]) -> None:
        inst.down = "failed"
        self.stack.hosts.pop(inst.name, None)
        self._event(
            f"{inst.name} failed at start {inst.failures} times in a row (last: "
            f"{inst.last_exit}); not restarted again: fix the cause and add an instance "
            f"(funcstack instances add). Its log: {inst.log_path}"
            + (", last lines:" if lines else ""),
            lines,
            error=True,
        )

    def _start_again(self, inst: Instance, policy: RestartPolicy) -> None:
        from funcstack.services import PartStartError

        if inst._start_failed:  # its port may be what failed: a free one this time
            self.stack.hosts.pop(inst.name, None)
        try:
            runner = self._run_host(
                inst.name, inst.group, port=0 if inst._start_failed else inst.port
            )
        except PartStartError as exc:
            if self._stopping.is_set():
                return
            with self._lock:
                inst.failures += 1
                inst._start_failed = True
                inst.last_exit = f"did not start: {exc.detail}"
                note(inst.log_path, f"{inst.name} did not start again: {exc.detail}")
                if inst.failures >= policy.give_up_after:
                    self._give_up(inst, policy, [])
                    return
                wait = policy.wait(inst.failures)
                inst.restart_at = time.monotonic() + wait
            self._event(f"{inst.name} did not start again ({exc.detail}); next try in {wait:g} s")
            return
        with self._lock:
            if self._stopping.is_set():
                runner.stop(timeout=1.5)
                return
            inst.runner = runner
            inst.down = None
            inst._start_failed = False
            inst.restarts += 1
            inst.ready_at = time.monotonic()
        self._event(f"{inst.name} restarted (pid {inst.pid}, 127.0.0.1:{inst.port})")

    def _event(self, line: str, lines: Sequence[str] = (), *, error: bool = False) -> None:
        """An exit, restart or give-up: to ``on_event`` (the terminal's), else logged."""
        if self.on_event is not None:
            self.on_event("\n".join([line, *(f"  {text}" for text in lines)]))
            return
        (logger.error if error else logger.warning)(
            "%s", line, extra={"app": self.name, "details": list(lines)}
        )

    def add_instance(self, group: str | None = None) -> Instance:
        """Start one more instance of ``group`` (None: of the whole app; in groups mode a
        group's name), ready when this returns."""
        group = _group(group)
        if (group is None) != (None in self.plan):
            raise InstanceError(
                f"{self.name}: runs "
                + ("the whole app per instance" if None in self.plan else "function groups apart")
                + f"; no instance of {group!r}"
                + ("" if group is not None else f" (give a group: {', '.join(self.groups)})")
            )
        if group is not None and self.groups and group not in self.groups:
            raise InstanceError(
                f"{self.name}: no function group {group!r} (its groups: {', '.join(self.groups)})"
            )
        with self._lock:
            number = self._numbers.get(group, 0) + 1
            self._numbers[group] = number
        label = (
            ""
            if group is None
            else ("http" if group == HTTP_GROUP else group.removeprefix("function:")) + "-"
        )
        name = f"{self.name}-{label}{number}"
        runner = self._run_host(name, group, port=0)
        inst = Instance(name, group, runner, self.stack.log_path(name))
        with self._lock:
            self.instances.append(inst)
        if not self.groups:
            self.groups = dict(runner.groups)
            base = f"http://127.0.0.1:{runner.port}"
            self._prefix = runner.url[len(base) :] if runner.url.startswith(base) else ""
            self.function_key, self.master_key = runner.function_key, runner.master_key
        return inst

    def _run_host(self, name: str, group: str | None, *, port: int) -> RunningRunner:
        """Start (or start again) the host of instance ``name``, ready when this returns."""
        show = self.options.on_console
        options = replace(
            self.options.given({"WEBSITE_INSTANCE_ID": name}),
            group=group,
            on_console=None if show is None else _tagged(show, name),
        )
        return self.stack.start_host(name, options, port=port, cancel=self._stopping)

    def lines(self) -> list[str]:
        """One line per instance, for a banner."""
        return [
            f"{inst.name} ({inst.group or 'whole app'}, pid {inst.pid}, 127.0.0.1:{inst.port})"
            for inst in self.instances
        ]


def _tagged(
    show: Callable[[Mapping[str, Any]], None], instance: str
) -> Callable[[Mapping[str, Any]], None]:
    """``show`` given each record with the instance that wrote it."""
    return lambda entry: show({**entry, "instance": instance})
