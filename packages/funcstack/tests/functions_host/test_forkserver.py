"""The fork server (``functions_host/_forkserver.py``): a host forked from a process that
imported the host's modules once serves as one started by exec does, its exit is told as a
``subprocess.Popen``'s, it is started by exec where a fork would differ, and nothing it forked
outlives the process that started it. A forked host's language worker is forked by the same
server, is the process an exec'd one is, and ends with its host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from funcstack.deadlines import LONG, LOOPBACK, SHORT, wait_for
from funcstack.functions_host import _forkserver, _forkserver_server
from funcstack.functions_host._forkserver import ForkedHost
from funcstack.functions_host._launcher import (
    HostOptions,
    RunningRunner,
    _host_command,
    start_runner,
)
from funcstack.functions_host.testing import call

from .conftest import make_app_dir

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not _forkserver.available(), reason="no fork server here"),
]

SETTINGS = {"FUNCTIONS_WORKER_RUNTIME": "python", "SAMPLE_ROUTE": "by-setting"}


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_app_dir(tmp_path_factory.mktemp("forked"), "sample_http_app.py", SETTINGS)


@pytest.fixture
def host(app_dir: Path, tmp_path: Path) -> Iterator[RunningRunner]:
    runner = _start(app_dir, tmp_path / "host.log", SAMPLE_SETTING="given")
    try:
        yield runner
    finally:
        runner.stop()


def _start(app_dir: Path, log: Path, **settings: str) -> RunningRunner:
    return start_runner(
        app_dir=app_dir,
        settings_file=app_dir / "local.settings.json",
        settings=settings,
        log_path=log,
    )


def _stat(pid: int) -> list[str]:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if int(_stat(int(entry.name))[1]) == pid:
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def _workers(host: int) -> list[int]:
    """The host's language worker: the live processes of its process group but the host."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = _stat(int(entry.name))
        except (OSError, ValueError):
            continue
        if int(stat[2]) == host and int(entry.name) != host and stat[0] != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return _stat(pid)[0] != "Z"
    except OSError:
        return False


def _sockets(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def test_a_forked_host_serves_its_app_as_a_process_group_of_its_own(host: RunningRunner) -> None:
    assert isinstance(host.process, ForkedHost)
    pid = host.process.pid
    assert call(f"{host.url}/items/abc").json()["id"] == "abc"  # type: ignore[index]
    assert call(f"{host.url}/setting").body == b"given"  # the request's environment, the app's
    assert os.getpgid(pid) == pid
    server = _forkserver.server_pid()
    assert server is not None and int(_stat(pid)[1]) == server  # the server is its parent
    worker = _workers(pid)
    assert len(worker) == 1 and int(_stat(worker[0])[1]) == server  # its worker, forked too
    # nothing of the server's own (its socket, its other hosts' sockets) is left in the host
    # but the one socket it tells the server what it imported on and asks for its worker on;
    # none in the worker
    assert len(_sockets(pid) & _sockets(server)) == 1
    assert _sockets(worker[0]) & _sockets(server) == set()
    assert host.process.poll() is None and host.process.returncode is None
    with pytest.raises(subprocess.TimeoutExpired):
        host.process.wait(0.1)  # a non-event: still running


def test_a_forked_host_and_its_worker_start_without_runpys_warning(
    app_dir: Path, tmp_path: Path
) -> None:
    """The host and its worker run as `python -m` runs them, though the server imported their
    modules first: runpy's "found in sys.modules ... prior to execution" RuntimeWarning was in
    every host's log, twice (the host's module, the worker's)."""
    log = tmp_path / "host.log"
    runner = _start(app_dir, log, SAMPLE_SETTING="given")
    try:
        assert isinstance(runner.process, ForkedHost)
        assert call(f"{runner.url}/items/abc").json()["id"] == "abc"  # type: ignore[index]
    finally:
        runner.stop()
    said = log.read_text("utf-8", "replace")
    assert "RuntimeWarning" not in said and "found in sys.modules" not in said, said[-2000:]


def test_terminate_stops_a_forked_host_cleanly_and_kill_is_told_as_popen_tells_it(
    app_dir: Path, tmp_path: Path
) -> None:
    first = _start(app_dir, tmp_path / "first.log")
    second = _start(app_dir, tmp_path / "second.log")
    try:
        worker = _workers(second.process.pid)
        assert len(worker) == 1
        first.process.terminate()
        second.process.kill()
        assert first.process.wait(SHORT) == 0  # its clean stop, as on a SIGTERM
        assert second.process.wait(SHORT) == -signal.SIGKILL
        assert second.process.poll() == -signal.SIGKILL
        second.process.kill()  # an exited host: nothing sent, as Popen
        assert "host stopped" in (tmp_path / "first.log").read_text()
        assert _gone_within(worker) == []  # the worker dies with its host
    finally:
        first.stop()
        second.stop()


def _spawn(app_dir: Path, args: list[str], **settings: str) -> ForkedHost | None:
    cmd, env, base = _host_command(HostOptions(app_dir, settings), "127.0.0.1", 0)
    return _forkserver.spawn(
        [*cmd[3:], *args], env=env, server_env=base, cwd=str(app_dir), stderr=None
    )


def test_an_exit_code_is_told_as_the_interpreter_makes_it(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text("raise RuntimeError('not an app')\n")
    usage = _spawn(tmp_path, ["--no-such-option"])  # argparse: SystemExit(2)
    broken = _spawn(tmp_path, [])  # the worker's indexing error: not ready, exit code 1
    assert usage is not None and broken is not None
    assert usage.wait(SHORT) == 2
    assert broken.wait(SHORT) == 1
    assert broken.stdout is not None
    said = json.loads(broken.stdout.readline())
    assert said["ready"] is False and "not an app" in said["error"]


def test_a_host_is_started_by_exec_where_a_fork_would_differ(
    app_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an interpreter setting read at start: a forked host would have the server's
    runner = _start(app_dir, tmp_path / "host.log", PYTHONHASHSEED="7")
    try:
        assert isinstance(runner.process, subprocess.Popen)
        assert call(f"{runner.url}/items/abc").status == 200
    finally:
        runner.stop()
    assert _spawn(app_dir, ["--no-such-option"], SSL_CERT_DIR=str(tmp_path)) is None
    # a file no import finds, named as a module the server imported (the Contacts app's
    # azure.yaml): forked
    (tmp_path / "function_app.py").write_text((app_dir / "function_app.py").read_text())
    (tmp_path / "multidict.yaml").write_text("name: app\n")
    beside = _spawn(tmp_path, ["--no-such-option"])
    assert beside is not None and beside.wait(SHORT) == 2
    # the app's folder holds a module of a name the server imported (a package, a module):
    # a new interpreter's
    (tmp_path / "multidict").mkdir()
    assert _spawn(tmp_path, ["--no-such-option"]) is None
    (tmp_path / "multidict").rmdir()
    (tmp_path / "yarl.py").write_text("")
    assert _spawn(tmp_path, ["--no-such-option"]) is None
    # switched off
    monkeypatch.setenv(_forkserver.ENV_VAR, "0")
    assert _spawn(app_dir, ["--no-such-option"]) is None
    monkeypatch.delenv(_forkserver.ENV_VAR)
    forked = _spawn(app_dir, ["--no-such-option"])
    assert forked is not None and forked.wait(SHORT) == 2


def test_a_forked_host_has_the_import_path_a_new_interpreter_has(tmp_path: Path) -> None:
    given = os.pathsep.join(["rel", "/abs", "", "x/../y"])
    fresh = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path))"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": given},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(fresh.stdout)[1:5] == _forkserver_server._python_path(
        {"PYTHONPATH": given}, str(tmp_path)
    )


PROBE = """
import json, os, subprocess, sys, time
from pathlib import Path
from funcstack._processes import stop_stray_children
from funcstack.deadlines import LOOPBACK, SHORT
from funcstack.functions_host import _forkserver, _forkserver_server
from funcstack.functions_host._launcher import start_runner

def workers(pid):  # its process group's, but itself
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[2]) == pid and int(entry.name) != pid:
            found.append(int(entry.name))
    return found

app_dir = Path(sys.argv[1])
runner = start_runner(
    app_dir=app_dir, settings_file=app_dir / "local.settings.json", log_path=sys.argv[2]
)
assert isinstance(runner.process, _forkserver.ForkedHost)
server = _forkserver.server_pid()
pids = {"host": runner.process.pid, "workers": workers(runner.process.pid), "server": server}
print(json.dumps(pids), flush=True)
if sys.argv[3] == "stray":
    os.kill(runner.process.pid, 19)  # SIGSTOP: a host that does not stop on SIGTERM
    stop_stray_children(grace=0.5)
    print(json.dumps({"host": runner.process.wait(LOOPBACK), "server": _forkserver.server_pid()}))
elif sys.argv[3] == "server":
    os.kill(server, 9)
    print(json.dumps({"host": runner.process.wait(SHORT)}))
elif sys.argv[3] == "stalled":
    os.kill(server, 19)  # SIGSTOP: a server that reaps nothing (as one starved under load)
    runner.process.kill()
    try:
        print(json.dumps({"host": runner.process.wait(SHORT)}))
    except subprocess.TimeoutExpired:
        print(json.dumps({"host": f"not seen to end within {SHORT:g} s"}))
    finally:
        os.kill(server, 18)  # SIGCONT
else:
    time.sleep(120)
"""


def _probe(app_dir: Path, tmp_path: Path, how: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    process = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(app_dir), str(tmp_path / "host.log"), how],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"the probe ended ({process.wait()})"
    return process, json.loads(line)


def _gone_within(pids: list[int], deadline: float = SHORT) -> list[int]:
    """Those of `pids` still alive once all are gone or past `deadline` (0: now)."""
    end = time.monotonic() + deadline
    while any(_alive(pid) for pid in pids) and time.monotonic() < end:
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


def test_the_hosts_end_with_the_process_that_started_them(app_dir: Path, tmp_path: Path) -> None:
    process, pids = _probe(app_dir, tmp_path, "sleep")
    everything = [pids["host"], *pids["workers"], pids["server"]]
    assert len(pids["workers"]) == 1 and _gone_within(everything, 0) == everything
    process.kill()  # SIGKILL: nothing of it runs to stop them
    process.wait(LOOPBACK)
    assert _gone_within(everything) == []


def test_stray_children_include_the_forked_hosts(app_dir: Path, tmp_path: Path) -> None:
    process, pids = _probe(app_dir, tmp_path, "stray")
    try:
        assert process.stdout is not None
        after = json.loads(process.stdout.readline())
        # killed after the grace, as a child of the process's own would be; then the server
        assert after == {"host": -signal.SIGKILL, "server": None}
        assert _gone_within([pids["host"], *pids["workers"], pids["server"]]) == []
    finally:
        process.kill()
        process.wait(LOOPBACK)


def test_a_host_whose_server_is_killed_ends_too(app_dir: Path, tmp_path: Path) -> None:
    process, pids = _probe(app_dir, tmp_path, "server")
    try:
        assert process.stdout is not None
        after = json.loads(process.stdout.readline())
        assert after == {"host": _forkserver.UNKNOWN_EXIT}  # its status went with the server
        assert _gone_within([pids["host"], *pids["workers"]]) == []
    finally:
        process.kill()
        process.wait(LOOPBACK)


def test_a_host_whose_end_its_stalled_server_does_not_tell_is_seen_to_end(
    app_dir: Path, tmp_path: Path
) -> None:
    """The host's end is seen on its pidfd: a wait returns once the server has not told it
    within the grace (``STATUS_GRACE``), rather than running out (round 21: under a load of
    12-20 a stop waited 15 s for a server that did not tell a killed host's end)."""
    process, pids = _probe(app_dir, tmp_path, "stalled")
    try:
        assert process.stdout is not None
        after = json.loads(process.stdout.readline())
        assert after == {"host": _forkserver.UNKNOWN_EXIT}  # ended; its status never told
        assert _gone_within([pids["host"], *pids["workers"]]) == []
    finally:
        process.kill()
        process.wait(LOOPBACK)


#: Run in a process of its own: a server (this process's ``_Server``) with a child that is
#: killed, and a hint from a host that ended naming two modules whose imports take 1.5 s each;
#: prints which of them were imported when the child's end was told, and when a request sent
#: after that was answered.
TOLD_FIRST_PROBE = """
import json, os, select, signal, socket, sys, threading, time
from funcstack.deadlines import LOOPBACK
from funcstack.functions_host import _forkserver_server as fs

sys.path.insert(0, sys.argv[1])
control, starter = socket.socketpair()  # the starter's end kept open: the server serves
server = fs._Server(control, os.getppid(), list(sys.path))
pid = os.fork()
if pid == 0:
    time.sleep(60)
    os._exit(0)
pidfd = os.pidfd_open(pid)
ours, theirs = socket.socketpair()
server.children[pidfd] = fs._Child(pid, pidfd, theirs)
server.hints_w.send(json.dumps(["azure.funcstack_slow_a", "azure.funcstack_slow_b"]).encode())
os.kill(pid, signal.SIGKILL)
# both wait at the server's first look: the child's end (its pidfd readable, not reaped) too
assert select.select([pidfd], [], [], LOOPBACK)[0], "the child not ended by its SIGKILL"

def learned():
    return [getattr(sys.modules.get(f"azure.funcstack_slow_{n}"), "done", False) for n in "ab"]

def watch():
    status = json.loads(ours.recv(4096))["status"]
    told = {"status": status, "learned when told": learned()}
    # then a request (one the server refuses: no host to fork), as a host's start asks
    asking, answering = socket.socketpair()
    socket.send_fds(starter, [b"{}"], [0, 1, 2, answering.fileno()])
    told["answer"] = json.loads(asking.recv(4096))
    told["learned when answered"] = learned()
    print(json.dumps(told), flush=True)
    os._exit(0)

threading.Thread(target=watch, daemon=True).start()
server.serve()
"""


def test_a_hosts_end_is_told_before_what_hosts_imported_is_learned(tmp_path: Path) -> None:
    """An ended host's end is answered before the server imports what hosts imported (it
    imported them all first); a host's start waits for them, so that it is forked with them."""
    (tmp_path / "azure").mkdir()
    for name in ("a", "b"):
        (tmp_path / "azure" / f"funcstack_slow_{name}.py").write_text(
            "import time\ntime.sleep(1.5)\ndone = True\n"
        )
    done = subprocess.run(
        [sys.executable, "-c", TOLD_FIRST_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    told = json.loads(done.stdout)
    assert os.waitstatus_to_exitcode(told["status"]) == -signal.SIGKILL
    assert told["learned when told"] == [False, False]  # told first; the imports after
    assert "exec" in told["answer"]  # the request refused (not one to fork) ...
    assert told["learned when answered"] == [True, True]  # ... once both were imported


COSMOS_OUTPUT_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="put", methods=["POST"])
@app.cosmos_db_output(
    arg_name="doc", database_name="db", container_name="items", connection="COSMOS"
)
def put(req: func.HttpRequest, doc: func.Out[func.Document]) -> str:
    doc.set(func.Document.from_dict({"id": "1"}))
    return "OK"
"""


LEARN_PROBE = """
import json, sys, urllib.request
from pathlib import Path
from funcstack.deadlines import SHORT, wait_for
from funcstack.functions_host import _forkserver
from funcstack.functions_host._launcher import start_runner

def loaded(pid):  # pyexpat: a C extension azure.cosmos.aio loads
    return "pyexpat" in Path(f"/proc/{pid}/maps").read_text()

app = Path(sys.argv[1])
runner = start_runner(app_dir=app, settings={"COSMOS": sys.argv[2]}, log_path=app / "host.log")
server = _forkserver.server_pid()
# the output is written after the function: azure.cosmos.aio imported, then refused
request = urllib.request.Request(f"{runner.url}/put", data=b"{}", method="POST")
try:
    urllib.request.urlopen(request, timeout=SHORT)
except OSError:
    pass
seen = {"host": loaded(runner.process.pid), "server before": loaded(server)}
runner.stop()
seen["server after"] = wait_for(lambda: loaded(server), "the server's import", every=0.1)
print(json.dumps(seen))
"""


def test_the_server_imports_what_an_ended_host_imported_for_its_app(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(COSMOS_OUTPUT_APP)
    cosmos = "AccountEndpoint=https://127.0.0.1:9/;AccountKey=a2V5;"  # nothing listens
    # in a process of its own: a server of its own, which imported nothing for an app yet
    done = subprocess.run(
        [sys.executable, "-c", LEARN_PROBE, str(tmp_path), cosmos],
        capture_output=True,
        text=True,
        timeout=LONG,  # a host started, asked once and stopped
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # told by the host as it ended, imported for the next ones
    assert json.loads(done.stdout) == {"host": True, "server before": False, "server after": True}


SELF_APP = """
import json, os, signal, sys, time
from pathlib import Path
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="hang")
async def hang(req: func.HttpRequest) -> str:  # the worker's event loop held: no EOF seen
    Path(req.params["mark"]).touch()
    time.sleep(60)
    return "late"


@app.route(route="self")
def me(req: func.HttpRequest) -> str:
    main = sys.modules["__main__"]
    return json.dumps({
        "argv": [sys.argv[0], *[a for a in sys.argv[1:] if a.startswith("--")]],
        "main": [main.__name__, main.__spec__.name, main.__file__],
        "cwd": os.getcwd(),
        "path": sys.path,
        "env": dict(os.environ),
        "group": os.getpgid(0) == int(sys.argv[sys.argv.index("--host-pid") + 1]),
        "fds": len(os.listdir("/proc/self/fd")),
        "signals": {
            s.name: str(signal.getsignal(s))
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE)
        },
        "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "stdio": [os.readlink(f"/proc/self/fd/{fd}").split(":")[0] for fd in (0, 1, 2)],
        "stdout": [sys.stdout.line_buffering, sys.stdout.write_through, sys.stdout.encoding],
        "app": "function_app" in sys.modules and "azure.functions" in sys.modules,
    })
"""


@pytest.fixture(scope="module")
def self_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("self")
    (folder / "function_app.py").write_text(SELF_APP)
    (folder / "lib").mkdir()
    return folder


def test_a_forked_worker_is_the_process_an_exec_one_is(self_app: Path, tmp_path: Path) -> None:
    seen = {}
    for how, settings in (("forked", {}), ("exec", {_forkserver.ENV_VAR: "0"})):
        runner = start_runner(
            app_dir=self_app,
            settings=settings,
            extra_import_paths=[self_app / "lib"],
            log_path=tmp_path / "host.log",  # the same stderr
        )
        try:
            assert isinstance(runner.process, ForkedHost)
            [worker] = _workers(runner.process.pid)
            parent = int(_stat(worker)[1])
            assert parent == (_forkserver.server_pid() if how == "forked" else runner.process.pid)
            answer = call(f"{runner.url}/self")
            assert answer.status == 200, answer.body
            seen[how] = json.loads(answer.body)
        finally:
            runner.stop()
    forked, exec_ = seen["forked"], seen["exec"]
    del exec_["env"][_forkserver.ENV_VAR]
    assert forked == exec_
    assert forked["group"] and forked["argv"][0].endswith("_worker.py")
    assert str(self_app / "lib") in forked["path"]


def test_a_forked_worker_ends_when_its_host_is_killed(self_app: Path, tmp_path: Path) -> None:
    runner = start_runner(app_dir=self_app, log_path=tmp_path / "host.log")
    try:
        [worker] = _workers(runner.process.pid)
        assert int(_stat(worker)[1]) == _forkserver.server_pid()
        # busy in its app's code: it would not see the host's connection close
        mark = tmp_path / "hanging"

        def hang() -> None:
            with suppress(OSError):  # the host is killed before it answers
                call(f"{runner.url}/hang?mark={mark}")

        threading.Thread(target=hang, daemon=True).start()
        wait_for(mark.exists, "the worker in its app's code")
        os.kill(runner.process.pid, signal.SIGKILL)
        assert runner.process.wait(SHORT) == -signal.SIGKILL
        assert _gone_within([worker]) == []
    finally:
        runner.stop()


def test_a_worker_is_started_by_exec_where_a_fork_would_differ(
    self_app: Path, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "function_app.py").write_text(SELF_APP)
    runner = start_runner(app_dir=app, log_path=tmp_path / "host.log")
    try:
        assert isinstance(runner.process, ForkedHost)
        [worker] = _workers(runner.process.pid)
        assert int(_stat(worker)[1]) == _forkserver.server_pid()
        # the app's folder now holds a module of a name the server imported for the workers:
        # the worker started again is a new interpreter (the host's child), as before
        (app / "azure_functions_runtime").mkdir()
        os.kill(worker, signal.SIGKILL)
        assert _gone_within([worker]) == []
        assert call(f"{runner.url}/self").status == 200
        [again] = _workers(runner.process.pid)
        assert again != worker and int(_stat(again)[1]) == runner.process.pid
    finally:
        runner.stop()


def test_workers_are_started_by_exec_when_the_fork_server_is_off(
    app_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_forkserver.ENV_VAR, "0")
    runner = _start(app_dir, tmp_path / "host.log")
    try:
        assert isinstance(runner.process, subprocess.Popen)
        [worker] = _workers(runner.process.pid)
        assert int(_stat(worker)[1]) == runner.process.pid
        assert call(f"{runner.url}/items/abc").status == 200
    finally:
        runner.stop()
