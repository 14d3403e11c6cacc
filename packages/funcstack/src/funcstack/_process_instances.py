"""Processes as instances of a stack: N copies of a command (a change feed relay, a worker of
any kind) run beside the Functions apps, supervised as the apps' instances are
(``scaleout.AppInstances``, whose supervisor, kill, pause, resume and add they reuse).

Each instance of process ``<name>`` is named ``<name>-<n>``, and runs its command (split as a
shell would split it, but run without a shell, so that a signal reaches the program itself) in
a process group of its own, with:

* the environment of the stack's Functions app it takes its settings from (its
  ``local.settings.json`` values, whose local connection strings the stack has just brought up
  to date), a variable of funcstack's own environment that is set and not empty winning over a
  value of the file, as with ``func start``;
* ``CONTAINER_APP_REPLICA_NAME``: the instance's name (what Azure Container Apps gives a
  replica; a change feed processor may name its leases' owner after it) and ``PORT``: a free port
  of its own, kept across its restarts; ``{port}`` and ``{instance}`` in the command and the
  readiness URL are replaced by them;
* its stdout and stderr appended to ``<state folder>/<name>-<n>.log``.

**Ready**: with a readiness URL, once a GET of it answers 2xx (within ``READY_TIMEOUT``; an
instance that exits before is a failure to start, its log's last lines said); without one, as
soon as its process is started (funcstack cannot know more). **Stop**: SIGTERM, then SIGKILL
after the grace the apps' hosts get (``services.STOP_TIMEOUT``). A paused instance is resumed
first, so that the SIGTERM is handled (leases released) rather than pending until the kill.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from funcstack._processes import OWN_PROCESS_GROUP, describe_exit, last_lines, note
from funcstack.functions_host._config import load_local_settings, settings_in_force
from funcstack.functions_host._launcher import RunningRunner
from funcstack.scaleout import AppInstances
from funcstack.starts import record_start

__all__ = ["READY_TIMEOUT", "ProcessInstances", "ProcessSpec", "parse_processes"]

#: How long an instance with a readiness URL has to answer it 2xx (seconds).
READY_TIMEOUT = 60.0
#: The variables each instance is given (its name, its port).
INSTANCE_VARIABLE = "CONTAINER_APP_REPLICA_NAME"
PORT_VARIABLE = "PORT"


@dataclass(frozen=True)
class ProcessSpec:
    """A process declared in the stack: its command line, how many instances, and the URL
    that says an instance is ready (``{port}``, ``{instance}`` replaced; None: ready once
    started)."""

    name: str
    command: str
    instances: int = 1
    ready_url: str | None = None

    def argv(self, instance: str, port: int) -> list[str]:
        words = shlex.split(self.command)
        if not words:
            raise ValueError(f"process {self.name}: an empty command")
        return [_fill(word, instance, port) for word in words]

    def ready(self, instance: str, port: int) -> str | None:
        return None if self.ready_url is None else _fill(self.ready_url, instance, port)


def _fill(text: str, instance: str, port: int) -> str:
    return text.replace("{port}", str(port)).replace("{instance}", instance)


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def parse_processes(
    commands: Sequence[str],
    counts: Sequence[str] = (),
    ready: Sequence[str] = (),
    *,
    taken: set[str] | frozenset[str] = frozenset(),
) -> list[ProcessSpec]:
    """``run``'s ``--process NAME=COMMAND``, ``--process-instances NAME=N`` and
    ``--process-ready NAME=URL`` as specs; ``ValueError`` names the option and what is wrong
    (``taken``: the names of the stack's other parts)."""

    def pairs(option: str, given: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for text in given:
            name, eq, value = text.partition("=")
            name, value = name.strip(), value.strip()
            if not eq or not name or not value:
                raise ValueError(f"{option} {text}: give NAME=VALUE")
            if name in found:
                raise ValueError(f"{option}: {name} given twice")
            found[name] = value
        return found

    declared = pairs("--process", commands)
    numbers = pairs("--process-instances", counts)
    urls = pairs("--process-ready", ready)
    specs: list[ProcessSpec] = []
    for name, command in declared.items():
        if not _NAME.match(name):
            raise ValueError(
                f"--process {name}=...: a name is a letter, then letters, digits, _ or -"
            )
        if name in taken:
            raise ValueError(f"--process {name}=...: {name} is already the name of a part")
        count = numbers.get(name, "1")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"--process-instances {name}={count}: a count, 1 or more")
        try:
            shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"--process {name}=...: {exc}") from None
        specs.append(ProcessSpec(name, command, int(count), urls.get(name)))
    for option, given in (("--process-instances", numbers), ("--process-ready", urls)):
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise ValueError(
                f"{option} {unknown[0]}=...: no --process {unknown[0]}=COMMAND declared"
            )
    return specs


@dataclass
class ProcessInstances(AppInstances):
    """The instances of a declared process (``LocalStack.host_process``): ``instances``,
    ``kill``, ``pause``, ``resume``, ``add_instance`` and the restart policy as an app's."""

    spec: ProcessSpec = field(default_factory=lambda: ProcessSpec("process", "true"))
    #: The ``local.settings.json`` whose values the instances get (None: none).
    settings_file: Path | None = None
    #: Settings given to every instance (they win over the file and the environment).
    given: Mapping[str, str] = field(default_factory=dict)

    def start(self) -> ProcessInstances:
        """Start the instances (each ready before the next); on a failure, what started is
        stopped and the error raised."""
        try:
            for _ in range(self.spec.instances):
                self.add_instance(None)
        except BaseException:
            self.stop()
            raise
        if self.restart is not None:
            self._supervisor = threading.Thread(
                target=self._supervise, name=f"process-{self.name}", daemon=True
            )
            self._supervisor.start()
        return self

    def stop(self) -> None:
        with suppress(Exception):  # a paused one handles its SIGTERM (releases what it holds)
            for inst in self.instances:
                if inst.paused:
                    self.resume(inst)
        super().stop()

    @property
    def url(self) -> str:
        """The first instance's readiness URL (empty when none is declared)."""
        if not self.instances:
            return ""
        return self.spec.ready(self.instances[0].name, self.instances[0].port) or ""

    def environment(self, instance: str, port: int) -> dict[str, str]:
        """An instance's environment: funcstack's (trusting funcstack's local authority, as a
        host's does: ``trusting_environment``), the settings file's values where the
        environment has none (set and not empty wins, as with ``func start``), then its name
        and port."""
        from funcstack.cosmos._tls import trusting_environment

        file = self.settings_file
        values = load_local_settings(file) if file is not None and file.is_file() else {}
        settings = settings_in_force(
            values, {**self.given, INSTANCE_VARIABLE: instance, PORT_VARIABLE: str(port)}
        )
        return {**trusting_environment(dict(os.environ)), **settings}

    def _run_host(self, name: str, group: str | None, *, port: int) -> RunningRunner:
        """Start (or start again, on the port it had) the process of instance ``name``, ready
        when this returns (``PartStartError`` naming it when it does not get ready)."""
        from funcstack.services import PartStartError, free_port

        previous = self.stack.hosts.get(name)
        port = previous.port if previous is not None else port or free_port()
        log_path = self.stack.log_path(name)
        try:
            argv = self.spec.argv(name, port)
        except ValueError as exc:
            raise PartStartError(name, str(exc)) from None
        self.stack.workdir.mkdir(parents=True, exist_ok=True)
        note(log_path, f"{name}: starting {shlex.join(argv)} (port {port})")
        log = log_path.open("ab")
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(name, port),
                **OWN_PROCESS_GROUP,
            )
        except OSError as exc:
            log.close()
            raise PartStartError(name, f"{argv[0]}: {exc.strerror or exc}") from None
        record_start("process", process.pid, identity=log_path)
        ready = self.spec.ready(name, port)
        runner = RunningRunner(
            url=ready or "", port=port, process=process, log_path=log_path, _log=log
        )
        try:
            if ready is not None:
                self._wait_ready(name, runner, ready)
        except BaseException:
            runner.stop(timeout=1.5)
            raise
        self.stack.hosts[name] = runner
        return runner

    def _wait_ready(self, name: str, runner: RunningRunner, url: str) -> None:
        from funcstack.services import PartStartError

        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if runner.process.poll() is not None:
                lines = "; ".join(last_lines(runner.log_path))
                raise PartStartError(
                    name,
                    f"exited before {url} answered ({describe_exit(runner.process.returncode)})"
                    + (f": {lines}" if lines else ""),
                )
            if _answers(url):
                return
            if self._stopping.is_set():
                raise PartStartError(name, "the stack is stopping")
            if time.monotonic() > deadline:
                raise PartStartError(
                    name,
                    f"{url} did not answer 2xx within {READY_TIMEOUT:g} s (its log: "
                    f"{runner.log_path})",
                )
            time.sleep(0.1)

    def lines(self) -> list[str]:
        return [f"{inst.name} (pid {inst.pid}, port {inst.port})" for inst in self.instances]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 - a local probe
            return 200 <= int(reply.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False
