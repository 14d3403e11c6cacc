"""What the launchers of the local stand-ins share about their child processes: how one is
started (a process group of its own), stopped when it did not get ready, described when it
exits, and the last lines of its log, to say on the console why it failed."""

from __future__ import annotations

import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

#: Popen arguments of every endpoint and host: a process group of its own, so a Ctrl-C in the
#: terminal reaches only the process that started it, which stops them in order (each flushes
#: its state; none dies half-started with a traceback).
OWN_PROCESS_GROUP: dict[str, Any] = {"process_group": 0}


def stop_child(process: subprocess.Popen[Any], grace: float = 1.5) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds. For a child that is being given up."""
    if process.poll() is None:
        with suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                process.kill()
            process.wait(grace)


def describe_exit(code: int | None) -> str:
    """`exit code 1`, `killed by SIGKILL`, `still running`."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def last_lines(path: Path | None, count: int = 3, *, width: int = 300) -> list[str]:
    """The last `count` non-blank lines of a log (each cut at `width` characters); none when
    there is no log."""
    if path is None:
        return []
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(0, size - 64 * 1024))
            tail = log.read().decode("utf-8", "replace")
    except OSError:
        return []
    lines = [line.rstrip() for line in tail.splitlines() if line.strip()]
    return [line if len(line) <= width else line[:width] + "..." for line in lines[-count:]]


def note(path: Path | None, text: str) -> None:
    """Append one line, stamped like the hosts' logs, to a part's log: what happened to the
    process (started, exited) is in its own log even when the process wrote nothing."""
    if path is None:
        return
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with suppress(OSError), path.open("a", encoding="utf-8") as log:
        log.write(f"{stamp} {text}\n")
