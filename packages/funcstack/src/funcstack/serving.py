"""Serve a stack in the foreground until Ctrl-C: what ``funcstack run`` / ``up`` (and an app's own
wiring, such as a ``make run``) do around ``start()`` and ``stop()``.

Exit status: 0 after a stop asked for (Ctrl-C, SIGTERM, SIGHUP), 130 when interrupted while
starting, 1 when a part did not start or died (the cause on stderr in a line or two). A part
whose process exits stops the stack, except a host that is restarted -- the instances of a
scaled app (``scaleout.RestartPolicy``), a host run alone under the stack's ``host_restart``
(``_host_restarts``) -- which comes back while the stack goes on; one given up after failures
at start in a row stops it (``LocalStack.dead_part``).
The processes are recorded in a pidfile while they run (again whenever one is replaced), so a
second run from the same folder can refuse to start (``running_stack``) without ever signalling
a stranger. The serving process's children are all the stack's: whatever still runs after the
stop is stopped too.

``out``: where the lines for the terminal go (default stdout); ``ready``: a line for stdout once
the banner is out (``--json``'s, so that stdout holds it alone when ``out`` is stderr);
``refused``: the line for stdout when the stack does not start (a part refused or failed, or
the start was interrupted; ``--json``'s ``{"ready": false, ...}``): given the error, or None
for an interruption; ``before_stop``: what to close before the stack stops (its control
channel).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TextIO

from funcstack._cache import SetupError
from funcstack._processes import stop_stray_children
from funcstack.services import PartStartError, record_processes

__all__ = ["Servable", "serve"]

logger = logging.getLogger("funcstack")


class Servable(Protocol):
    def start(self) -> object: ...
    def stop(self) -> None: ...
    def pids(self) -> list[tuple[str, int]]: ...
    def dead_part(self) -> tuple[str, int | None] | None: ...
    def ended(self, name: str, code: int | None) -> str: ...
    def record_exit(self, name: str, code: int | None) -> list[str]: ...
    def log_path(self, name: str) -> Path: ...


#: A part found ended while a signal to the terminal's process group is being handled: Ctrl-C
#: reaches every process of the group at once, and a part may end before this process has run
#: its handler; one that ended so is the stop, not an unexpected exit (which says "exited
#: unexpectedly" and exits 1).
_SIGNAL_GRACE_SECONDS = 0.3


def serve(
    stack: Servable,
    pidfile: Path,
    *,
    banner: Callable[[], str],
    prog: str,
    starting: str,
    start: Callable[[], object] | None = None,
    out: TextIO | None = None,
    ready: Callable[[], str] | None = None,
    refused: Callable[[Exception | None], str] | None = None,
    before_stop: Callable[[], None] | None = None,
) -> int:
    """Start (``start``, default ``stack.start``), print the banner, serve until a signal or a
    dead part; stop everything."""
    stopping = threading.Event()
    in_start = [True]

    def on_signal(signum: int, _frame: object) -> None:
        first = not stopping.is_set()
        stopping.set()
        if first and in_start[0]:
            # Interrupt the start wherever it is: each part started so far is stopped on the
            # way out (a later signal only sets the flag: the stop is not interrupted).
            raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        return _serve(
            stack,
            pidfile,
            stopping,
            in_start,
            banner=banner,
            prog=prog,
            starting=starting,
            start=start or stack.start,
            out=out or sys.stdout,
            ready=ready,
            refused=refused,
            before_stop=before_stop or (lambda: None),
        )
    except KeyboardInterrupt:  # between the start's end and the serving loop
        if before_stop is not None:
            before_stop()
        stack.stop()
        stop_stray_children()
        pidfile.unlink(missing_ok=True)
        if refused is not None and in_start[0]:
            print(refused(None), flush=True)
        return 130


def _serve(
    stack: Servable,
    pidfile: Path,
    stopping: threading.Event,
    in_start: list[bool],
    *,
    banner: Callable[[], str],
    prog: str,
    starting: str,
    start: Callable[[], object],
    out: TextIO,
    ready: Callable[[], str] | None,
    refused: Callable[[Exception | None], str] | None,
    before_stop: Callable[[], None],
) -> int:
    print(starting, file=out, flush=True)
    try:
        start()
        in_start[0] = False
    except KeyboardInterrupt:
        before_stop()
        stack.stop()  # what start() had started, if it did not stop it itself
        stop_stray_children()  # a child being created when the interrupt landed
        print(
            "interrupted while starting; everything started so far is stopped.",
            file=out,
            flush=True,
        )
        if refused is not None:
            print(refused(None), flush=True)
        return 130
    except (PartStartError, SetupError) as exc:
        before_stop()
        stack.stop()
        stop_stray_children()
        print(f"{prog}: {exc}", file=sys.stderr, flush=True)
        if refused is not None:
            print(refused(exc), flush=True)
        return 1
    recorded = stack.pids()
    record_processes(pidfile, recorded)
    print(banner(), file=out, flush=True)
    if ready is not None:
        print(ready(), flush=True)
    exit_code = 0
    try:
        while not stopping.is_set():
            if stack.pids() != recorded:  # an instance restarted: its new pid
                recorded = stack.pids()
                record_processes(pidfile, recorded)
            dead = stack.dead_part()
            if dead is not None and stopping.wait(_SIGNAL_GRACE_SECONDS):
                break  # the part ended of the Ctrl-C sent to the whole process group
            if dead is not None:
                name, code = dead
                lines = stack.record_exit(name, code)
                print(
                    f"{name} {stack.ended(name, code)}; stopping the stack. Last lines of "
                    f"{stack.log_path(name)}:",
                    file=sys.stderr,
                    flush=True,
                )
                for line in lines:
                    print(f"  {line}", file=sys.stderr, flush=True)
                exit_code = 1
                break
            stopping.wait(0.5)
    finally:
        started = time.monotonic()
        print("stopping...", file=out, flush=True)
        before_stop()
        stack.stop()
        stop_stray_children()
        for name, pid in stack.pids():
            logger.info("%s (pid %s) stopped", name, pid)
        pidfile.unlink(missing_ok=True)
        print(f"stopped in {time.monotonic() - started:.1f} s.", file=out, flush=True)
    return exit_code
