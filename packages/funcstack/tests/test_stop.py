"""``LocalStack.stop()`` means stopped: when it returns, none of the processes the stack started
runs any more -- its hosts, their language workers, its declared processes and whatever they
started in their process group, and the fork server its hosts were forked from -- so that a
caller starting again at once on the same ports or state finds everything ended. The fork
server is shared by the stacks of a process: it ends with the last of them to stop.

Two tests start parts that do not end when asked: a host whose worker ignores SIGTERM and is
busy in an invocation (the host's stop outlasts its grace, and it is killed while its worker
runs), a declared process whose child ignores SIGTERM (the process is killed, its child is
left). The fork server's are run in a process of their own (a server of its own, held by
their stacks only), which lists its process tree before and after each stop."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from funcstack import ProcessSpec
from funcstack.deadlines import LONG, LOOPBACK, SHORT, wait_for
from funcstack.functions_host import _forkserver
from funcstack.scaleout import AppInstances
from funcstack.stack import LocalStack, ServicePorts

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent


def processes() -> list[tuple[int, int, int]]:
    """Each live (not zombie) process's pid, parent and process group, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            stat = (entry / "stat").read_text()
            state, parent, group = stat[stat.rindex(")") + 2 :].split()[:3]
            if state != "Z":
                found.append((int(entry.name), int(parent), int(group)))
    return found


def descendants() -> set[int]:
    """This process's live descendants."""
    parents: dict[int, list[int]] = {}
    for pid, parent, _ in processes():
        parents.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def described(pids: set[int]) -> list[str]:
    """Each process's pid, parent, process group and command line (a process the fork server
    forked shows the server's)."""
    lines = []
    for pid in sorted(pids):
        with suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            parent, group = stat[stat.rindex(")") + 2 :].split()[1:3]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            lines.append(
                f"{pid} (parent {parent}, group {group}): {command.decode(errors='replace')[:160]}"
            )
    return lines


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """A stack of hosts and processes only (no endpoint is needed), stopped by the test."""
    local = LocalStack(
        workdir=tmp_path / "stack",
        ports=ServicePorts.free(),
        with_servicebus=False,
        with_azurite=False,
    )
    try:
        yield local
    finally:
        local.stop()


def left_running(before: set[int], groups: set[int]) -> list[str]:
    """What this test started that still runs: this process's descendants that were not there
    before, and the processes of the parts' process groups (``groups``: a process whose parent
    ended is no descendant of this one any more), the fork server aside only while another
    stack of this process holds it (the session's apps); each described, then killed."""
    grouped = {pid for pid, _, group in processes() if group in groups}
    held = _forkserver._holders and _forkserver._holders_pid == os.getpid()
    left = (descendants() - before | grouped) - {(held and _forkserver.server_pid()) or -1}
    described_left = described(left)
    for pid in left:  # not left to the next test
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return described_left


def test_a_host_killed_while_its_worker_is_busy_leaves_no_worker(
    stack: LocalStack, tmp_path: Path
) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copy(HERE / "functions_host" / "sample_stubborn_app.py", folder / "function_app.py")
    (folder / "host.json").write_text(json.dumps({"version": "2.0"}))
    hanging = tmp_path / "hanging.pid"
    before = descendants()
    app = stack.host_app(
        folder, port=0, instances=2, overrides={"SAMPLE_HANGING": str(hanging)}, restart=None
    )
    assert isinstance(app, AppInstances)

    def call() -> None:
        with suppress(OSError):  # the host is stopped under it
            urllib.request.urlopen(f"{app.url}/hang", timeout=SHORT).read()  # noqa: S310

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    wait_for(hanging.exists, "the worker's invocation began", SHORT)
    worker = int(hanging.read_text())
    groups = {inst.pid for inst in app.instances}
    assert worker in {pid for pid, _, group in processes() if group in groups}

    stack.stop()

    left = left_running(before, groups)
    assert not left, f"alive after stop(): {left}"
    caller.join(LOOPBACK)


#: A process that ignores SIGTERM and starts a child, in its process group, that does too.
STUBBORN = (
    "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "subprocess.Popen([sys.executable, '-c', 'import signal, sys, time; "
    'signal.signal(signal.SIGTERM, signal.SIG_IGN); open(sys.argv[1], "w").close(); '
    "time.sleep(600)', sys.argv[1]]); time.sleep(600)"
)


def test_a_declared_process_killed_leaves_nothing_it_started(
    stack: LocalStack, tmp_path: Path
) -> None:
    ready = tmp_path / "child.ready"
    before = descendants()
    command = shlex.join([sys.executable, "-c", STUBBORN, str(ready)])
    started = stack.host_process(ProcessSpec("stubborn", command, 2), restart=None)
    wait_for(ready.exists, "the declared process's child started", SHORT)
    groups = {inst.pid for inst in started.instances}

    stack.stop()

    left = left_running(before, groups)
    assert not left, f"alive after stop(): {left}"


#: Run in a process of its own: stacks with a host each, their process tree (this process's
#: descendants, from /proc) listed after each step; one JSON line per step.
TREE_PROBE = """
import json, os, sys, urllib.request
from pathlib import Path
from funcstack.deadlines import LOOPBACK
from funcstack.functions_host import _forkserver
from funcstack.stack import LocalStack, ServicePorts

def tree():
    parents = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        if entry.name.isdigit() and state != "Z":
            parents.setdefault(int(parent), []).append(int(entry.name))
    found, todo = [], [os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            command = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\\0", b" ")
            found.append(f"{child}: {command.decode(errors='replace')[:100]}")
            todo.append(child)
    return sorted(found)

def answers(url):
    with urllib.request.urlopen(f"{url}/ping", timeout=LOOPBACK) as reply:
        return reply.status

app, work = Path(sys.argv[1]), Path(sys.argv[2])
stacks = [
    LocalStack(workdir=work / name, with_servicebus=False, with_azurite=False)
    for name in sys.argv[3].split(",")
]
hosts = [stack.host_app(app, name="app", port=0) for stack in stacks]
print(json.dumps({"step": "started", "server": _forkserver.server_pid(), "tree": tree()}))
for stack, host in zip(stacks, hosts):
    stack.stop()
    others = [answers(h.url) for h in hosts[hosts.index(host) + 1 :]]
    step = {"step": "stopped", "server": _forkserver.server_pid(), "others": others}
    print(json.dumps({**step, "tree": tree()}), flush=True)
"""

PING_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="ping")
def ping(req: func.HttpRequest) -> str:
    return "pong"
"""


def stacks_stopped(tmp_path: Path, names: str) -> list[dict[str, Any]]:
    """``TREE_PROBE``'s steps for stacks ``names`` (comma-separated), each with a host."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "function_app.py").write_text(PING_APP)
    (app / "host.json").write_text(json.dumps({"version": "2.0"}))
    done = subprocess.run(
        [sys.executable, "-c", TREE_PROBE, str(app), str(tmp_path / "stacks"), names],
        capture_output=True,
        text=True,
        timeout=LONG,  # a few hosts started and stopped
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.skipif(not _forkserver.available(), reason="no fork server here")
def test_a_stack_stopped_leaves_no_process_the_fork_server_included(tmp_path: Path) -> None:
    started, stopped = stacks_stopped(tmp_path, "only")
    server = started["server"]
    assert server is not None
    # the host, its worker and the server ran (the endpoints start at a first connection)
    assert any(line.startswith(f"{server}: ") for line in started["tree"]), started
    assert len(started["tree"]) == 3, started["tree"]
    assert stopped["tree"] == [], f"alive after stop(): {stopped['tree']}"
    assert stopped["server"] is None


@pytest.mark.skipif(not _forkserver.available(), reason="no fork server here")
def test_the_fork_server_shared_by_two_stacks_ends_with_the_last_to_stop(tmp_path: Path) -> None:
    started, first, last = stacks_stopped(tmp_path, "first,last")
    server = started["server"]
    assert len(started["tree"]) == 5, started["tree"]  # two hosts, two workers, one server
    # the first stopped: the other's host still serves, forked by the same server
    assert first["server"] == server and first["others"] == [200]
    assert [line for line in first["tree"] if line.startswith(f"{server}: ")], first["tree"]
    assert len(first["tree"]) == 3, first["tree"]
    assert last["tree"] == [], f"alive after the last stop(): {last['tree']}"
