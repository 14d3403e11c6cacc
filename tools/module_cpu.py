"""Where a test run's CPU goes, by test module: a pytest plugin and its summary.

The plugin (`-p tools.module_cpu`, or `PYTEST_ADDOPTS="-p tools.module_cpu"` through make)
writes, in each test process (each xdist worker), a JSON line per module run: the CPU of the
process itself and of its descendants meanwhile, read from /proc (those it reaped, and those
still running with what they reaped: the hosts and workers a fork server starts and reaps
count in the module that asked for them, and the session's servers' work in the module that
used them), and the wall time, to `MODULE_CPU_OUT` (default `.stack/module-cpu.jsonl`). A
process left to init is not counted; the xdist controller's shared endpoints are nobody's.

    rm -f .stack/module-cpu.jsonl
    PYTEST_ADDOPTS="-p tools.module_cpu" nice -n 10 make test-suite
    python -m tools.module_cpu .stack/module-cpu.jsonl

A process's collection and imports before its first module are not counted (about 10 s a
worker in the suite)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

__all__ = ["descendants", "main"]

_OUT = Path(os.environ.get("MODULE_CPU_OUT", ".stack/module-cpu.jsonl"))
_current: dict[str, object] = {}


def _now() -> tuple[float, float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return (own.ru_utime + own.ru_stime, descendants(), time.monotonic())


def descendants() -> float:
    """The CPU of the process's descendants: those it reaped, and those still running with
    what they reaped (a fork server's hosts and workers, reaped by it, not by this process,
    and a session's servers, reaped at its end). A process left to init is not counted."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        # utime + stime (its own), cutime + cstime (the children it reaped)
        times[pid] = (int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]))
    me = os.getpid()
    total = times.get(me, (0, 0))[1]
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    pending = list(children[me])
    while pending:
        pid = pending.pop()
        own, reaped = times[pid]
        total += own + reaped
        pending += children[pid]
    return total / ticks


def _flush(*, last: bool) -> None:
    module = _current.get("module")
    start = _current.get("start")
    if not isinstance(module, str) or not isinstance(start, tuple):
        return
    end = _now()
    line = {
        "module": module,
        "self": round(end[0] - start[0], 2),
        "children": round(end[1] - start[1], 2),
        "wall": round(end[2] - start[2], 2),
        "process": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "last": last,
    }
    _OUT.parent.mkdir(parents=True, exist_ok=True)
    with _OUT.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    # xdist's controller (its `dsession` plugin) sees its workers' tests start, in turn, and
    # its descendants are the workers: they count their own
    _current["controller"] = config.pluginmanager.hasplugin("dsession")


def pytest_runtest_logstart(nodeid: str) -> None:
    if _current.get("controller"):
        return
    module = nodeid.split("::", 1)[0]
    if module != _current.get("module"):
        _flush(last=False)
        _current.update(module=module, start=_now())


def pytest_sessionfinish() -> None:
    _flush(last=True)
    _current.pop("module", None)
    _current.pop("start", None)


def main(argv: list[str] | None = None) -> int:
    """Print the modules by CPU (the process's own + its reaped children's), most first."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0] if args else _OUT)
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for text in path.read_text("utf-8").splitlines():
        line = json.loads(text)
        name = line["module"] + (" (and the session's end)" if line["last"] else "")
        total = totals[name]
        total[0] += line["self"]
        total[1] += line["children"]
        total[2] += line["wall"]
    print(f"{'CPU s':>7} {'own':>6} {'children':>8} {'wall s':>7}  module")
    for name, (own, children, wall) in sorted(totals.items(), key=lambda kv: -sum(kv[1][:2])):
        print(f"{own + children:7.1f} {own:6.1f} {children:8.1f} {wall:7.1f}  {name}")
    print(f"{sum(t[0] + t[1] for t in totals.values()):7.1f} in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
