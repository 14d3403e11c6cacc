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

from funcstack.functions_host import _forkserver, _forkserver_libraries
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


def _forked_by(worker: int) -> str:
    """Who forked the worker: the "server", a "template" of the server's (its child) or its
    "host" (exec)."""
    parent = int(_stat(worker)[1])
    server = _forkserver.server_pid()
    if parent == server:
        return "server"
    if server is not None and int(_stat(parent)[1]) == server and _workers(parent) == []:
        return "template"
    return "host"


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
    assert len(worker) == 1 and _forked_by(worker[0]) != "host"  # its worker, forked too
    # nothing of the server's own (its socket, its other hosts' sockets) is left in the host
    # but the one socket it tells the server what it imported on and asks for its worker on;
    # in the worker, that one too (it tells what it imported), nothing of its parent's else
    told = _sockets(pid) & _sockets(server)
    assert len(told) == 1
    assert _sockets(worker[0]) & _sockets(int(_stat(worker[0])[1])) == told
    assert host.process.poll() is None and host.process.returncode is None
    with pytest.raises(subprocess.TimeoutExpired):
        host.process.wait(0.1)


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
        assert first.process.wait(15) == 0  # its clean stop, as on a SIGTERM
        assert second.process.wait(15) == -signal.SIGKILL
        assert second.process.poll() == -signal.SIGKILL
        second.process.kill()  # an exited host: nothing sent, as Popen
        assert "host stopped" in (tmp_path / "first.log").read_text()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in worker)  # the worker dies with its host
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
    assert usage.wait(30) == 2
    assert broken.wait(30) == 1
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
    assert beside is not None and beside.wait(30) == 2
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
    assert forked is not None and forked.wait(30) == 2


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
    assert json.loads(fresh.stdout)[1:5] == _forkserver_libraries.python_path(
        {"PYTHONPATH": given}, str(tmp_path)
    )


PROBE = """
import json, os, sys, time
from pathlib import Path
from funcstack._processes import stop_stray_children
from funcstack.functions_host import _forkserver
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

def start():
    return start_runner(
        app_dir=app_dir, settings_file=app_dir / "local.settings.json", log_path=sys.argv[2]
    )

def parent(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])

app_dir = Path(sys.argv[1])
for _ in range(120):  # up to 60 s: each worker tells its libraries, a template imports them
    runner = start()
    server = _forkserver.server_pid()
    if [parent(pid) for pid in workers(runner.process.pid)] == workers(server):  # the template's
        break
    runner.stop()
    time.sleep(0.5)
assert isinstance(runner.process, _forkserver.ForkedHost)
pids = {"host": runner.process.pid, "workers": workers(runner.process.pid), "server": server}
pids["templates"] = workers(server)
print(json.dumps(pids), flush=True)
if sys.argv[3] == "stray":
    os.kill(runner.process.pid, 19)  # SIGSTOP: a host that does not stop on SIGTERM
    stop_stray_children(grace=0.5)
    print(json.dumps({"host": runner.process.wait(5), "server": _forkserver.server_pid()}))
elif sys.argv[3] == "server":
    os.kill(server, 9)
    print(json.dumps({"host": runner.process.wait(15)}))
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


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


def test_the_hosts_end_with_the_process_that_started_them(app_dir: Path, tmp_path: Path) -> None:
    process, pids = _probe(app_dir, tmp_path, "sleep")
    everything = [pids["host"], *pids["workers"], pids["server"], *pids["templates"]]
    assert len(pids["workers"]) == 1 and len(pids["templates"]) == 1
    assert int(_stat(pids["workers"][0])[1]) == pids["templates"][0]  # forked by the template
    assert _gone_within(everything, 0) == everything
    process.kill()  # SIGKILL: nothing of it runs to stop them
    process.wait(10)
    assert _gone_within(everything, 10) == []


def test_stray_children_include_the_forked_hosts(app_dir: Path, tmp_path: Path) -> None:
    process, pids = _probe(app_dir, tmp_path, "stray")
    try:
        assert process.stdout is not None
        after = json.loads(process.stdout.readline())
        # killed after the grace, as a child of the process's own would be; then the server
        assert after == {"host": -signal.SIGKILL, "server": None}
        everything = [pids["host"], *pids["workers"], pids["server"], *pids["templates"]]
        assert _gone_within(everything, 5) == []
    finally:
        process.kill()
        process.wait(10)


def test_a_host_whose_server_is_killed_ends_too(app_dir: Path, tmp_path: Path) -> None:
    process, pids = _probe(app_dir, tmp_path, "server")
    try:
        assert process.stdout is not None
        after = json.loads(process.stdout.readline())
        assert after == {"host": _forkserver.UNKNOWN_EXIT}  # its status went with the server
        assert _gone_within([pids["host"], *pids["workers"], *pids["templates"]], 5) == []
    finally:
        process.kill()
        process.wait(10)


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
import json, sys, time, urllib.request
from pathlib import Path
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
    urllib.request.urlopen(request, timeout=60)
except OSError:
    pass
seen = {"host": loaded(runner.process.pid), "server before": loaded(server)}
runner.stop()
deadline = time.monotonic() + 10
while not loaded(server) and time.monotonic() < deadline:
    time.sleep(0.1)
seen["server after"] = loaded(server)
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
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # told by the host as it ended, imported for the next ones
    assert json.loads(done.stdout) == {"host": True, "server before": False, "server after": True}


SELF_APP = """
import json, os, re, signal, sys, time
from pathlib import Path
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="hang")
async def hang(req: func.HttpRequest) -> str:  # the worker's event loop held: no EOF seen
    Path(req.params["mark"]).touch()
    time.sleep(60)
    return "late"


def fds():  # what each descriptor is, numbers aside
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(re.sub("[0-9]+", "", os.readlink(f"/proc/self/fd/{fd}")))
        except OSError:  # listdir's own
            continue
    return sorted(found)


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
        "fds": fds(),
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


def _start_forked_by(how: str, app: Path, log: Path, **options: Any) -> RunningRunner:
    """A host whose worker ``how`` forked ("template": the server's template, once the
    workers before taught it the app's libraries; "server"; "host": exec)."""
    for _ in range(120):  # up to 60 s: a loaded machine's template imports slower
        runner = start_runner(app_dir=app, log_path=log, **options)
        [worker] = _workers(runner.process.pid)
        if _forked_by(worker) == how:
            return runner
        runner.stop()  # its worker tells the server what its app imported
        time.sleep(0.5)  # the template imports it
    raise AssertionError(f"no worker forked by the {how}")


@pytest.fixture(scope="module")
def self_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("self")
    (folder / "function_app.py").write_text(SELF_APP)
    (folder / "lib").mkdir()
    return folder


def test_a_forked_worker_is_the_process_an_exec_one_is(self_app: Path, tmp_path: Path) -> None:
    seen = {}
    for how in ("template", "server", "host"):
        settings = {_forkserver.ENV_VAR: "0"} if how == "host" else {}
        if how == "server":  # its PYTHONPATH holds a package named as one of the app's libraries
            (self_app / "lib" / "markupsafe").mkdir()
        runner = _start_forked_by(
            how,
            self_app,
            tmp_path / "host.log",  # the same stderr
            settings=settings,
            extra_import_paths=[self_app / "lib"],
        )
        try:
            assert isinstance(runner.process, ForkedHost)
            answer = call(f"{runner.url}/self")
            assert answer.status == 200, answer.body
            seen[how] = json.loads(answer.body)
        finally:
            runner.stop()
            with suppress(FileNotFoundError):
                (self_app / "lib" / "markupsafe").rmdir()
    del seen["host"]["env"][_forkserver.ENV_VAR]
    for how in ("template", "server"):  # and the socket it tells the server what it imported on
        seen[how]["fds"].remove("socket:[]")
    assert seen["template"] == seen["server"] == seen["host"]
    assert seen["template"]["group"] and seen["template"]["argv"][0].endswith("_worker.py")
    assert str(self_app / "lib") in seen["template"]["path"]


OWN_APP = """
import json, os
import azure.functions as func
import werkzeug

import helper

found = getattr(werkzeug, "patched_by", None)  # what a worker before might have left
werkzeug.patched_by = os.getpid()
app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="own")
def own(req: func.HttpRequest) -> str:
    from funcstack.functions_host import _forkserver

    return json.dumps({
        "found": found,
        "preloaded": sorted({"werkzeug", "function_app", "helper"} & _forkserver.forked_with),
        "helper": helper.__file__,
    })
"""


def test_a_worker_forked_with_its_apps_libraries_imports_its_own_modules_afresh(
    tmp_path: Path,
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "function_app.py").write_text(OWN_APP)
    (app / "helper.py").write_text("")
    seen = []
    for _ in range(2):
        runner = _start_forked_by("template", app, tmp_path / "host.log")
        try:
            answer = call(f"{runner.url}/own")
            assert answer.status == 200, answer.body
            seen.append(json.loads(answer.body))
        finally:
            runner.stop()
    # the library preloaded, as the worker before left it, never patched; the app's modules
    # not preloaded, imported from its folder
    expected = {"found": None, "preloaded": ["werkzeug"], "helper": str(app / "helper.py")}
    assert seen == [expected, expected]


def test_only_the_libraries_found_outside_the_workers_own_folders_are_preloaded() -> None:
    report = {
        "entries": ["/venv/site-packages", "/app", "/repo/src", "/extra"],
        "specific": ["/app", "/extra/../extra"],  # its folder, its PYTHONPATH
        "imported": [["werkzeug", 0], ["function_app", 1], ["domain", 1], ["lib", 2], ["x", 3]],
    }
    # the app's folder and an extra entry are on the server's path too: still the app's
    base_path = ["/venv/site-packages", "/repo/src", "/app", "/extra"]
    assert _forkserver_libraries.libraries(report, base_path) == ["werkzeug", "lib"]


LIBRARIES = """
import json, os, sys
from funcstack.functions_host._forkserver_libraries import import_libraries

sys.path.insert(0, sys.argv[1])
names = json.loads(sys.argv[2])
read, spoiled, why = import_libraries(names, {"SAME": "1", "OTHER": "worker's"})
print(json.dumps([read, spoiled, why]))
"""

LIBRARY = {
    "reads.py": "import os\nos.environ.get('SAME'); os.getenv('UNSET')\n",
    "reads_other.py": "import os\nos.environ['OTHER']\n",
    "brings.py": "import reads_other\n",
    "lists.py": "import os\ndict(os.environ)\n",
    "where.py": "import pathlib\npathlib.Path.cwd()\n",
    "spawns.py": "import threading, time\nthreading.Thread(target=time.sleep, args=(5,)).start()\n",
}


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["reads"], [{"SAME": "1", "UNSET": None}, [], ""]),
        (
            ["reads", "reads_other", "where"],
            [{"SAME": "1", "UNSET": None}, ["reads_other"], "OTHER"],
        ),
        (["lists", "reads"], [{}, ["lists"], "listed the environment"]),
        (["where"], [{}, ["where"], "read the working folder"]),
        (["spawns", "reads"], [{}, ["spawns"], "started a thread"]),
        (["brings"], [{}, ["brings", "reads_other"], "OTHER"]),  # and what its import brought
    ],
)
def test_a_library_is_preloaded_only_if_its_import_reads_no_setting_otherwise_and_starts_no_thread(
    tmp_path: Path, names: list[str], expected: list[Any]
) -> None:
    for name, text in LIBRARY.items():
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        [sys.executable, "-c", LIBRARIES, str(tmp_path), json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "SAME": "1", "OTHER": "the server's"},
    )
    read, spoiled, why = json.loads(done.stdout)
    assert [read, spoiled] == expected[:2]
    assert expected[2] in why


OTEL_APP = """
import azure.functions as func
import opentelemetry.trace  # reads OTEL_PYTHON_CONTEXT when imported

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="ok")
def ok(req: func.HttpRequest) -> str:
    return "ok"


@app.route(route="preloaded")
def preloaded(req: func.HttpRequest) -> str:
    import json, os
    from funcstack.functions_host import _forkserver

    names = {"azure.functions", "opentelemetry.trace"} & _forkserver.forked_with
    return json.dumps({"parent": os.getppid(), "preloaded": sorted(names)})
"""


SPOIL_PROBE = """
import json, sys, time
from pathlib import Path
from funcstack.functions_host import _forkserver
from funcstack.functions_host._launcher import start_runner
from funcstack.functions_host.testing import call

app = Path(sys.argv[1])
# the first worker has the setting otherwise: opentelemetry.trace is not kept, the template
# replaced by one without it
otherwise = {"OTEL_PYTHON_CONTEXT": "contextvars_context"}
start_runner(app_dir=app, settings=otherwise, log_path=app / "host.log").stop()
server = _forkserver.server_pid()
for _ in range(120):  # up to 60 s: a loaded machine's template imports slower
    runner = start_runner(app_dir=app, log_path=app / "host.log")
    try:
        answer = json.loads(call(f"{runner.url}/preloaded").body)
    finally:
        runner.stop()
    if answer["parent"] != server:  # the template's
        break
    time.sleep(0.5)
print(json.dumps(answer["preloaded"]))
"""


def test_a_library_that_reads_a_setting_the_worker_has_otherwise_is_not_preloaded(
    tmp_path: Path,
) -> None:
    (tmp_path / "function_app.py").write_text(OTEL_APP)
    # in a process of its own: a server of its own, which learned nothing yet
    done = subprocess.run(
        [sys.executable, "-c", SPOIL_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["azure.functions"]


DIFFER_PROBE = """
import json, sys, time
from pathlib import Path
from funcstack.functions_host import _forkserver
from funcstack.functions_host._launcher import start_runner
from funcstack.functions_host.testing import call

def preloaded(app, module):  # until app's worker is the template's, with module preloaded
    for _ in range(120):  # taught by the workers before (up to 60 s)
        runner = start_runner(app_dir=app, log_path=app / "host.log")
        try:
            answer = json.loads(call(f"{runner.url}/preloaded").body)
        finally:
            runner.stop()
        if answer["parent"] != _forkserver.server_pid() and module in answer["preloaded"]:
            break
        time.sleep(0.5)
    return answer

app = Path(sys.argv[1])
answer = preloaded(app, "opentelemetry.trace")
server = _forkserver.server_pid()
preloaded(Path(sys.argv[2]), "wave")  # the template imports more: what they read is added
otherwise = {"OTEL_PYTHON_CONTEXT": "contextvars_context"}
runner = start_runner(app_dir=app, settings=otherwise, log_path=app / "host.log")
try:
    other = json.loads(call(f"{runner.url}/preloaded").body)
finally:
    runner.stop()
print(json.dumps([answer["parent"] != server, other["parent"] == server, other["preloaded"]]))
"""


def test_a_worker_whose_setting_a_library_read_at_import_differs_is_forked_without_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "function_app.py").write_text(OTEL_APP)
    (tmp_path / "more").mkdir()
    more = OTEL_APP.replace("import opentelemetry.trace", "import wave").replace(
        '"opentelemetry.trace"}', '"wave"}'
    )
    (tmp_path / "more" / "function_app.py").write_text(more)
    # in a process of its own: a server of its own, which learned nothing yet
    done = subprocess.run(
        [sys.executable, "-c", DIFFER_PROBE, str(tmp_path), str(tmp_path / "more")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # the template's before; the server's then, with the worker library only
    assert json.loads(done.stdout) == [True, True, []]


def test_a_forked_worker_ends_when_its_host_is_killed(self_app: Path, tmp_path: Path) -> None:
    # forked by the template: it ends its workers when their host ends
    runner = _start_forked_by("template", self_app, tmp_path / "host.log")
    try:
        [worker] = _workers(runner.process.pid)
        # busy in its app's code: it would not see the host's connection close
        mark = tmp_path / "hanging"

        def hang() -> None:
            with suppress(OSError):  # the host is killed before it answers
                call(f"{runner.url}/hang?mark={mark}")

        threading.Thread(target=hang, daemon=True).start()
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists()
        os.kill(runner.process.pid, signal.SIGKILL)
        assert runner.process.wait(15) == -signal.SIGKILL
        assert _gone_within([worker], 10) == []
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
        assert _forked_by(worker) != "host"
        # the app's folder now holds a module of a name the server imported for the workers:
        # the worker started again is a new interpreter (the host's child), as before
        (app / "azure_functions_runtime").mkdir()
        os.kill(worker, signal.SIGKILL)
        assert _gone_within([worker], 10) == []
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
