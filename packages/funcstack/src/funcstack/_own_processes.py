"""The processes a stack started, recorded so that a later run from the same folder can tell
whether they still run without ever signalling a stranger (``funcstack run``'s and ``make
run``'s pidfile); and the folder a stack keeps its state and logs in."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OwnProcess", "already_running", "own_workdir", "record_processes", "running_stack"]


@dataclass(frozen=True)
class OwnProcess:
    """A process a stack started, recorded so that a later run can tell whether it still
    runs — by PID *and* kernel start time *and* command line, so a reused PID never passes
    for one of ours."""

    name: str
    pid: int
    start_time: str
    cmdline: str

    @classmethod
    def of(cls, name: str, pid: int) -> OwnProcess | None:
        identity = _identity(pid)
        return None if identity is None else cls(name, pid, *identity)

    def alive(self) -> bool:
        return _identity(self.pid) == (self.start_time, self.cmdline)


def _identity(pid: int) -> tuple[str, str] | None:
    """(start time in clock ticks since boot, command line) of a live process, from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has exited
        return None
    return fields[19], cmdline.replace(b"\0", b" ").decode("utf-8", "replace").strip()


def record_processes(pidfile: Path, pids: list[tuple[str, int]]) -> None:
    """Write the processes' identities, whole: a reader never sees half a file (it is written
    again while the stack runs, when an instance is restarted)."""
    own = [OwnProcess.of(name, pid) for name, pid in pids]
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    written = pidfile.with_name(f".{pidfile.name}.new")
    written.write_text(json.dumps([p.__dict__ for p in own if p is not None]))
    written.replace(pidfile)


def running_stack(pidfile: Path) -> list[OwnProcess]:
    """The processes recorded in ``pidfile`` that still run (never signalled)."""
    try:
        recorded = json.loads(pidfile.read_text())
        procs = [OwnProcess(**entry) for entry in recorded]
    except (OSError, ValueError, TypeError):
        return []
    return [p for p in procs if p.alive()]


def already_running(pidfile: Path) -> str | None:
    """Why a stack cannot start from the folder of ``pidfile`` (one of its own runs there: the
    processes it recorded, in one line), or None; a stale pidfile is removed."""
    running = running_stack(pidfile)
    if running:
        listed = ", ".join(f"{p.name} (pid {p.pid})" for p in running)
        return (
            f"a stack is already running from this folder: {listed}; stop it first "
            "(Ctrl-C in its terminal)"
        )
    pidfile.unlink(missing_ok=True)
    return None


def own_workdir(workdir: Path) -> None:
    """Make the folder a stack keeps its state and logs in, ignored by git."""
    workdir.mkdir(parents=True, exist_ok=True)
    ignore = workdir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# made by funcstack: its state and logs\n*\n")
