"""What the launchers of the local stand-ins share about their child processes: how one is
started (a process group of its own), stopped when it did not get ready, described when it
exits, and the last lines of its log, to say on the console why it failed."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import IO, Any, Protocol

#: Popen arguments of every endpoint and host: a process group of its own, so a Ctrl-C in the
#: terminal reaches only the process that started it, which stops them in order (each flushes
#: its state; none dies half-started with a traceback).
OWN_PROCESS_GROUP: dict[str, Any] = {"process_group": 0}
#: The variable that names the process a stand-in was started by (its pid): the stand-in
#: watches it (``node/owned.js``; the Service Bus endpoint's ``owner_watch``) and stops as at
#: SIGTERM (its state flushed) within a second of that process's end, however it ended: a
#: SIGKILL, or an out-of-memory kill, leaves no stand-in listening (its own process group keeps
#: it from the terminal's Ctrl-C, and from a kill of the starter's group).
OWNER_ENV = "FUNCSTACK_OWNER_PID"
#: Seconds between a stand-in's looks at whether its starter is still its parent.
OWNER_POLL_SECONDS = 1.0


class ChildProcess(Protocol):
    """What the launchers use of a child process: a ``subprocess.Popen``, or a Functions host
    forked by the fork server (``functions_host/_forkserver.py``'s ``ForkedHost``)."""

    @property
    def pid(self) -> int: ...

    @property
    def stdout(self) -> IO[bytes] | None: ...

    @property
    def returncode(self) -> int | None:
        """The exit code; negative: the signal that ended it; None: still running."""

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


def owned_environment(**extra: str) -> dict[str, str]:
    """The environment of a stand-in this process starts: this process's, ``extra``, and
    ``OWNER_ENV`` naming this process (the stand-in ends with it)."""
    return {**os.environ, **extra, OWNER_ENV: str(os.getpid())}


def node_server_environment(**extra: str) -> dict[str, str]:
    """The environment of a Node.js stand-in (the Cosmos DB endpoint, Azurite): this process's
    (``owned_environment``), without ``NODE_EXTRA_CA_CERTS``. The servers only listen
    (Azurite's telemetry is off), so extra trust anchors are never used, and Node reads and
    parses the bundle at every start (about 50 ms of CPU each, for a machine's whole CA
    bundle)."""
    environment = owned_environment(**extra)
    environment.pop("NODE_EXTRA_CA_CERTS", None)
    return environment


def owner_watch(stop: Callable[[], object]) -> None:
    """In a stand-in started with ``OWNER_ENV``: call ``stop`` (from a daemon thread) once the
    process that started it is no longer its parent (it ended: the stand-in was handed to
    another). Without the variable (started by hand): nothing. The variable is removed, so
    that what the stand-in starts does not watch a process that is not its parent."""
    owner = os.environ.pop(OWNER_ENV, "")
    if not owner.isdigit():
        return

    def watch() -> None:
        while os.getppid() == int(owner):
            time.sleep(OWNER_POLL_SECONDS)
        stop()

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


#: How long a stop waits, once it has killed a part's process, for it and the rest of its process
#: group to end (a killed process ends; only the news of it can be late on a loaded machine).
KILLED_WAIT = 15.0


def group_members(group: int) -> list[int]:
    """The live (not zombie) processes of process group ``group``, from /proc (none elsewhere:
    the platforms funcstack stops groups on are Linux's)."""
    try:
        os.killpg(group, 0)  # the common case, no process left: no listing of /proc
    except (ProcessLookupError, PermissionError):
        return []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == group:
            found.append(int(entry.name))
    return found


def end_group(group: int, timeout: float = KILLED_WAIT) -> list[int]:
    """Once a part's process, the leader of process group ``group`` (every part has a group of
    its own: ``OWN_PROCESS_GROUP``), has ended: SIGKILL what is left of the group (a host's
    language worker when the host was killed, a child a declared process started) and wait up
    to ``timeout`` seconds for it to end; what still runs then (nothing, unless the kernel is
    slower than that), for the caller to name.

    The group's number is the ended leader's pid, which the kernel gives no other process while
    a process of the group lives; a live process of that pid is one given the number after the
    group emptied (it leads a group of its own of that number): nothing of ours, left alone."""
    left = group_members(group)
    if not left or group in left:
        return []
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [pid for pid in group_members(group) if pid != group]
    return left


def stop_child(process: ChildProcess, grace: float = 1.5) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds (waited for up to ``KILLED_WAIT``), then
    the rest of its process group (``end_group``). For a child that is being given up."""
    if process.poll() is None:
        with suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                process.kill()
            with suppress(subprocess.TimeoutExpired):
                process.wait(KILLED_WAIT)
    end_group(process.pid)


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


def _children(parent: int | None = None, *, leaders: bool = False) -> list[int]:
    """Live (not zombie) child processes of ``parent`` (default: this process), from /proc
    (none elsewhere); ``leaders``: those that lead their process group only."""
    me = os.getpid() if parent is None else parent
    found = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        leads = int(fields[2]) == int(entry.name)
        if fields[0] != "Z" and int(fields[1]) == me and (leads or not leaders):
            found.append(int(entry.name))
    return found


def stop_stray_children(grace: float = 1.5) -> None:
    """Stop every child process of this one that still runs: SIGTERM, then SIGKILL after
    ``grace`` seconds. For a process whose children are all its stack's (``funcstack run``):
    a Ctrl-C that lands while a part's process is being created (after the fork, before its
    launcher holds it) leaves a child no part knows; this finds it. The Functions hosts the
    fork server forked (its children, not this process's) are stopped with the others, then
    the server; their language workers, the server's children too (each in its host's process
    group), are their hosts' to stop, as a worker a host started by exec is."""
    from funcstack.functions_host._forkserver import server_pid, stop_server

    server = server_pid()

    def running() -> list[int]:
        mine = [pid for pid in _children() if pid != server]
        return mine + (_children(server, leaders=True) if server is not None else [])

    pids = running()
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = [pid for pid in pids if pid in running()]
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if server is not None:
        stop_server(grace + 1.0)
