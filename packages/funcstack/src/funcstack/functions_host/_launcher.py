"""Start the runner as a subprocess (for tests and the local stack)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from funcstack._cache import RPC_WHEEL_ENV, SetupError, rpc_wheel
from funcstack._processes import (
    OWN_PROCESS_GROUP,
    ChildProcess,
    describe_exit,
    end_group,
    last_lines,
    note,
    stop_child,
)
from funcstack.cosmos._tls import trusting_environment
from funcstack.functions_host import _forkserver
from funcstack.starts import record_start

#: How long a stop waits to hear that the host it killed has ended (``RunningRunner.stop``).
KILLED_REPORT_TIMEOUT = 15.0


class RunnerStartError(RuntimeError):
    """The host did not start: its own reason (e.g. the worker's indexing error, verbatim), or
    how it exited and the last lines of its log, or that it was not ready in time."""


@dataclass
class RunningRunner:
    """A runner subprocess. ``stop()`` sends SIGTERM (then SIGKILL); ``kill()`` is SIGKILL."""

    url: str
    port: int
    #: The host's process: a ``subprocess.Popen``, or a fork of the fork server
    #: (``_forkserver.ForkedHost``: the same methods, and a process group of its own too).
    process: ChildProcess
    log_path: Path | None = None
    #: With ``enforce_keys``: the host's default function key and its master key (not in the
    #: repr, which ends up in test reports and logs).
    function_key: str | None = field(default=None, repr=False)
    master_key: str | None = field(default=None, repr=False)
    #: The app's function groups and their functions (``http``, ``function:<name>``).
    groups: dict[str, list[str]] = field(default_factory=dict)
    #: Each Cosmos DB trigger's containers and lease intervals in seconds, by function
    #: (``container``, ``leases``, ``acquire``, ``renew``, ``expiration``).
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The triggers that could not start when the host was ready, by function: why (they
    #: keep trying; every other trigger listened then).
    not_listening: dict[str, str] = field(default_factory=dict)
    #: What it was started with (``LocalServices.start_host`` starts it again with them).
    options: HostOptions | None = field(default=None, repr=False)
    _log: IO[bytes] | None = field(default=None, repr=False)
    _drain: threading.Thread | None = field(default=None, repr=False)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, ``timeout`` seconds to exit, then SIGKILL. A killed host ends; only the news
        of it can be late (a forked host's exit is reported by the fork server, slower on a
        loaded machine than the grace), so that wait is ``KILLED_REPORT_TIMEOUT``. Then what is
        left of its process group is killed and waited for (``_end_group``): when this
        returns, the host's language worker has ended too."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(max(timeout, KILLED_REPORT_TIMEOUT))
        self._end_group()
        self._close()

    def kill(self) -> None:
        """SIGKILL, and the rest of its process group (its language worker) with it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(KILLED_REPORT_TIMEOUT)
        self._end_group()
        self._close()

    def _end_group(self) -> None:
        """What is left of the process's group once it has ended (it leads one: a host's
        language worker, which a killed host leaves running; what a declared process
        started), killed and waited for; a process still there after ``KILLED_REPORT_TIMEOUT``
        is named in its log."""
        left = end_group(self.process.pid, KILLED_REPORT_TIMEOUT)
        if left:
            note(
                self.log_path,
                f"process group {self.process.pid} still runs {left} after SIGKILL",
            )

    def _close(self) -> None:
        if self._drain is not None:
            self._drain.join(5)
            self._drain = None
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass(frozen=True)
class HostOptions:
    """One app's host: what to run and how, as one value from ``LocalStack.host_app`` (or
    ``LocalServices.run_host``, ``start_runner``) down to the process (``launch_host``);
    where it listens and its log are the caller's. No value of ``settings`` is in its repr:
    they may be keys or connection strings."""

    app_dir: Path
    #: App settings given to the host (environment variables of its process): they win over
    #: ``settings_file`` and the rest of the environment.
    settings: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: ``local.settings.json`` (its ``Values``; an environment variable set and not empty wins
    #: over a value of the file, as with Core Tools).
    settings_file: Path | None = None
    script: str = "function_app.py"  # the Python v2 programming model's default file name
    #: The worker's interpreter (None: this one).
    python: str | None = None
    #: Entries the worker's import path gets beside the app's folder (an inherited
    #: ``PYTHONPATH`` is dropped).
    extra_import_paths: tuple[Path, ...] = ()
    #: Keys required by auth level, as in Azure (``RunningRunner.function_key``,
    #: ``.master_key``).
    enforce_keys: bool = False
    #: The function group the host serves (``http``, ``function:<name>``; None: all).
    group: str | None = None
    #: Given each record of the terminal (``start_runner``), from a thread of its own.
    on_console: Callable[[Mapping[str, Any]], None] | None = field(default=None, repr=False)
    log_level: str = "INFO"

    def given(self, settings: Mapping[str, str]) -> HostOptions:
        """These options with more settings given (they win over the ones given before)."""
        return replace(self, settings={**self.settings, **settings})


def start_runner(
    *,
    app_dir: str | Path,
    settings_file: str | Path | None = None,
    settings: Mapping[str, str] | None = None,
    script: str = "function_app.py",  # the Python v2 programming model's default file name
    host: str = "127.0.0.1",
    port: int = 0,
    log_path: str | Path | None = None,
    log_level: str = "INFO",
    timeout: float = 60.0,
    python: str | None = None,
    extra_import_paths: Sequence[str | Path] = (),
    enforce_keys: bool = False,
    on_console: Callable[[Mapping[str, Any]], None] | None = None,
    group: str | None = None,
    cancel: threading.Event | None = None,
) -> RunningRunner:
    """Start ``python -m funcstack.functions_host`` and wait for its ready line.

    ``settings`` become environment variables of the child, given to the host: they win over
    ``settings_file``'s values and the rest of the environment, which wins over the file where
    it has a non-empty value, as with Core Tools (the host's log says, by name, which came from
    where).
    Output goes to ``log_path`` when given, else it is discarded.

    The app's folder is the only entry added to the worker's import path (an inherited
    ``PYTHONPATH`` is dropped): the app imports what it holds and what is installed in the
    interpreter (``python``: the worker's, default this one). ``extra_import_paths`` opts into
    more entries, for an app that imports a source tree that is not installed.

    ``enforce_keys``: the host requires keys by auth level, as in Azure; the keys (the
    settings' ``FUNCTIONS_HOST_FUNCTION_KEY``/``FUNCTIONS_HOST_MASTER_KEY``, else new ones) are
    ``function_key``/``master_key`` of the result (never written to the log).

    ``on_console``: the host also writes what ``func start`` shows in its terminal (a line per
    invocation, the app's logging, the host's warnings; ``_console.py``), and each record is
    handed to ``on_console`` (``{"time", "level", "category", "message"}``; ``_console.render``
    makes it a line), from a thread of its own, as it comes; so is each line the app prints
    (``{"category": "stdout", "message": ...}``), which also goes to the log as before.
    ``group``: the host serves that function group only (``http``, ``function:<name>``), as
    an instance of a Flex Consumption app does. ``cancel``: once set, a start still waiting
    for the ready line is given up (the child stopped, ``RunnerStartError``): a stack that
    stops while an instance is being restarted does not wait for it.
    """
    return launch_host(
        HostOptions(
            Path(app_dir),
            dict(settings or {}),
            Path(settings_file) if settings_file is not None else None,
            script,
            python,
            tuple(Path(p) for p in extra_import_paths),
            enforce_keys,
            group,
            on_console,
            log_level,
        ),
        host=host,
        port=port,
        log_path=log_path,
        timeout=timeout,
        cancel=cancel,
    )


def launch_host(
    options: HostOptions,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    log_path: str | Path | None = None,
    timeout: float = 60.0,
    cancel: threading.Event | None = None,
) -> RunningRunner:
    """Start the host ``options`` describe (``start_runner``), ready when this returns."""
    cmd, env, base = _host_command(options, host, port)
    log: IO[bytes] | None = Path(log_path).open("ab") if log_path else None  # noqa: SIM115
    cwd = str(options.app_dir.resolve())
    process: ChildProcess | None = _forkserver.spawn(
        cmd[3:], env=env, server_env=base, cwd=cwd, stderr=log
    )  # forked from a process that imported the host's modules already, where it can be
    if process is None:
        process = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log if log is not None else subprocess.DEVNULL,
            **OWN_PROCESS_GROUP,
        )
    record_start("host", process.pid, identity=log_path or port or None)
    assert process.stdout is not None
    output = _HostOutput(process.stdout, log, options.on_console)
    drain = threading.Thread(target=output.read, name="runner-stdout", daemon=True)
    drain.start()
    try:
        _wait_ready(process, output, drain, log_path, timeout, cancel)
    except BaseException:  # not ready, timed out, or interrupted: the child does not outlive it
        stop_child(process)
        drain.join(2)
        if log is not None:
            log.close()
        raise
    ready = output.ready
    keys = ready.get("keys")
    groups = ready.get("groups")
    leases = ready.get("leases")
    not_listening = ready.get("not_listening")
    return RunningRunner(
        not_listening={str(k): str(v) for k, v in not_listening.items()}
        if isinstance(not_listening, dict)
        else {},
        leases={str(k): dict(v) for k, v in leases.items() if isinstance(v, dict)}
        if isinstance(leases, dict)
        else {},
        groups={str(k): [str(n) for n in v] for k, v in groups.items() if isinstance(v, list)}
        if isinstance(groups, dict)
        else {},
        url=str(ready["url"]),
        port=int(str(ready["port"])),
        function_key=str(keys["function"]) if isinstance(keys, dict) else None,
        master_key=str(keys["master"]) if isinstance(keys, dict) else None,
        process=process,
        options=options,
        log_path=Path(log_path) if log_path else None,
        _log=log,
        _drain=drain,
    )


def _host_command(
    options: HostOptions, host: str, port: int
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The host's command line (``python -m funcstack.functions_host`` and its arguments) and
    environment (the app's folder and script checked, the RPC messages' wheel downloaded on
    first use), and that environment without the app's settings and import path (the fork
    server's)."""
    app_dir = options.app_dir.resolve()
    script = options.script
    if not app_dir.is_dir():
        raise RunnerStartError(f"the app folder {app_dir} does not exist")
    if not (app_dir / script).is_file():
        raise RunnerStartError(
            f"no {script} in {app_dir}: not a Python Functions app (v2 programming model)"
        )
    try:
        wheel = rpc_wheel()  # downloaded on first use, said here rather than in the host's log
    except SetupError as exc:
        raise RunnerStartError(str(exc)) from None
    settings = options.settings
    base = trusting_environment(dict(os.environ))  # + funcstack's authority (cosmos/_tls.py)
    base.pop("PYTHONPATH", None)
    base["PYTHONUNBUFFERED"] = "1"
    base[RPC_WHEEL_ENV] = str(wheel)
    env = {**base, **settings}
    env.pop("PYTHONPATH", None)
    if options.extra_import_paths:
        env["PYTHONPATH"] = os.pathsep.join(str(p.resolve()) for p in options.extra_import_paths)
    env["PYTHONUNBUFFERED"] = "1"
    env[RPC_WHEEL_ENV] = str(wheel)
    cmd = [
        sys.executable, "-m", "funcstack.functions_host",
        "--app-dir", str(app_dir), "--script", script,
        "--host", host, "--port", str(port), "--log-level", options.log_level,
    ]  # fmt: skip
    if options.settings_file is not None:
        cmd += ["--settings", str(options.settings_file.resolve())]
    if settings:  # their names only: the values are secrets, and a command line is public
        cmd += ["--given", ",".join(sorted(settings))]
    if options.python is not None:
        cmd += ["--python", options.python]
    if options.enforce_keys:
        cmd += ["--enforce-keys"]
    if options.on_console is not None:
        cmd += ["--console"]
    if options.group is not None:
        cmd += ["--group", options.group]
    return cmd, env, base


class _HostOutput:
    """The host's stdout, read on a thread of its own: its ready line (or its refusals), the
    terminal's records handed to ``on_console``, the rest written to the log; then drained for
    as long as the host runs, so it never blocks on a full pipe."""

    def __init__(
        self,
        stdout: IO[bytes],
        log: IO[bytes] | None,
        on_console: Callable[[Mapping[str, Any]], None] | None,
    ) -> None:
        self.stdout = stdout
        self.log = log
        self.on_console = on_console
        self.ready: dict[str, object] = {}
        self.failed: list[str] = []

    def read(self) -> None:
        for raw in self.stdout:
            try:
                data = json.loads(raw)
            except ValueError:
                data = None
            if self._console(raw, data):
                continue
            if isinstance(data, dict) and "keys" in data:  # the keys are not logged
                raw = (json.dumps({**data, "keys": "(not logged)"}) + "\n").encode()
            self._write(raw)
            if isinstance(data, dict) and data.get("ready"):
                self.ready.update(data)
                break
            if isinstance(data, dict) and data.get("ready") is False:
                self.failed.append(str(data.get("error") or "unknown error"))
        for raw in self.stdout:  # keep draining so the child never blocks on a full pipe
            try:
                data = json.loads(raw) if raw.startswith(b"{") else None
            except ValueError:
                data = None
            if not self._console(raw, data):
                self._write(raw)

    def _write(self, raw: bytes) -> None:
        if self.log is not None and not self.log.closed:
            self.log.write(raw)
            self.log.flush()

    def _console(self, raw: bytes, data: object) -> bool:
        """A console record (to ``on_console`` only: the log has it), or a line the app
        printed (to ``on_console`` too); False for the host's own lines."""
        if self.on_console is None:
            return False
        if isinstance(data, dict) and isinstance(data.get("console"), dict):
            self.on_console(data["console"])
            return True
        if not (isinstance(data, dict) and "ready" in data):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            self.on_console({"time": now, "category": "stdout", "level": "INFO", "message": text})
        return False


def _wait_ready(
    process: ChildProcess,
    output: _HostOutput,
    drain: threading.Thread,
    log_path: str | Path | None,
    timeout: float,
    cancel: threading.Event | None,
) -> None:
    """Until the host's ready line: RunnerStartError when it exits first (its own reason, or
    how it exited and its log's last lines), is not ready in time, or the start is cancelled."""
    deadline = time.monotonic() + timeout
    while not output.ready:
        if process.poll() is not None:
            drain.join(2)
            if output.log is not None:
                output.log.flush()
            if output.failed:
                raise RunnerStartError(output.failed[0])
            lines = last_lines(Path(log_path) if log_path else None)
            raise RunnerStartError(
                f"the host exited ({describe_exit(process.returncode)})"
                + (f"; last lines of {log_path}: " + " | ".join(lines) if lines else "")
            )
        if time.monotonic() > deadline:
            raise RunnerStartError(f"the host did not become ready within {timeout:g} s")
        if cancel is not None and cancel.is_set():
            raise RunnerStartError("the start was cancelled (the stack is stopping)")
        time.sleep(0.02)
