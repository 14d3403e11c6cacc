"""Start the runner as a subprocess (for tests and the local stack)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from emulators.processes import OWN_PROCESS_GROUP, describe_exit, last_lines, stop_child

_REPO_ROOT = Path(__file__).resolve().parents[2]


class RunnerStartError(RuntimeError):
    """The host did not start: its own reason (e.g. the worker's indexing error, verbatim), or
    how it exited and the last lines of its log, or that it was not ready in time."""


@dataclass
class RunningRunner:
    """A runner subprocess. ``stop()`` sends SIGTERM (then SIGKILL); ``kill()`` is SIGKILL."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)
    _drain: threading.Thread | None = field(default=None, repr=False)

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self._close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(15)
        self._close()

    def _close(self) -> None:
        if self._drain is not None:
            self._drain.join(5)
            self._drain = None
        if self._log is not None:
            self._log.close()
            self._log = None


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
) -> RunningRunner:
    """Start ``python -m emulators.functions_host`` and wait for its ready line.

    ``settings`` become environment variables of the child (they win over
    ``settings_file`` values, as environment variables do with Core Tools).
    Output goes to ``log_path`` when given, else it is discarded.
    """
    app_dir = Path(app_dir).resolve()
    if settings_file is not None:
        settings_file = Path(settings_file).resolve()
    env = dict(os.environ)
    env.update(settings or {})
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p
    )
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [
        sys.executable, "-m", "emulators.functions_host",
        "--app-dir", str(app_dir), "--script", script,
        "--host", host, "--port", str(port), "--log-level", log_level,
    ]  # fmt: skip
    if settings_file is not None:
        cmd += ["--settings", str(settings_file)]
    log: IO[bytes] | None = Path(log_path).open("ab") if log_path else None  # noqa: SIM115
    process = subprocess.Popen(
        cmd,
        cwd=str(app_dir),
        env=env,
        stdout=subprocess.PIPE,
        stderr=log if log is not None else subprocess.DEVNULL,
        **OWN_PROCESS_GROUP,
    )
    assert process.stdout is not None
    stdout = process.stdout
    ready: dict[str, object] = {}
    failed: list[str] = []
    deadline = time.monotonic() + timeout

    def _read_ready() -> None:
        for raw in stdout:
            if log is not None:
                log.write(raw)
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("ready"):
                ready.update(data)
                break
            if isinstance(data, dict) and data.get("ready") is False:
                failed.append(str(data.get("error") or "unknown error"))
        for raw in stdout:  # keep draining so the child never blocks on a full pipe
            if log is not None and not log.closed:
                log.write(raw)

    drain = threading.Thread(target=_read_ready, name="runner-stdout", daemon=True)
    drain.start()
    try:
        while not ready:
            if process.poll() is not None:
                drain.join(2)
                if log is not None:
                    log.flush()
                if failed:
                    raise RunnerStartError(failed[0])
                lines = last_lines(Path(log_path) if log_path else None)
                raise RunnerStartError(
                    f"the host exited ({describe_exit(process.returncode)})"
                    + (f"; last lines of {log_path}: " + " | ".join(lines) if lines else ""))
            if time.monotonic() > deadline:
                raise RunnerStartError(f"the host did not become ready within {timeout:g} s")
            time.sleep(0.02)
    except BaseException:  # not ready, timed out, or interrupted: the child does not outlive it
        stop_child(process)
        drain.join(2)
        if log is not None:
            log.close()
        raise
    return RunningRunner(
        url=str(ready["url"]),
        port=int(str(ready["port"])),
        process=process,
        log_path=Path(log_path) if log_path else None,
        _log=log,
        _drain=drain,
    )
