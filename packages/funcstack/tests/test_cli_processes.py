"""Processes as instances of a stack (``funcstack run --process NAME=COMMAND``): each instance
gets the app's settings in its environment (the environment winning), a port and a name of its
own, its log, its pid in ``run --json``'s line; ``funcstack instances`` kills (it comes back),
pauses, resumes and adds them as an app's instances; the stack's stop sends each a SIGTERM,
which it handles (a paused one too) while the services still run. The process is a tiny Python
script, not a relay: what is tested is funcstack's part. One stack for the module; its tests
run in order, each from where the last left it, the last stopping it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_cli import Cli, one_line, run_once

from funcstack.cli import main
from funcstack.deadlines import LOOPBACK, wait_for

pytestmark = pytest.mark.integration

APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="ping", methods=["GET"])
def ping(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("pong")
"""
SETTINGS = {
    "IsEncrypted": False,
    "Values": {
        "FUNCTIONS_WORKER_RUNTIME": "python",
        "CosmosConnection": "AccountEndpoint=https://localhost:8081/;AccountKey=a2V5;",
        "Greeting": "from the file",
        "OnlyInFile": "file",
    },
}
#: The process: answers /ready with what it was given; on SIGTERM, says so in a file and exits.
WORKER = """
import json, os, signal, socket, sys, time
from funcstack.deadlines import LOOPBACK
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import urlsplit

name = sys.argv[sys.argv.index("--name") + 1]
said = {k: os.environ.get(k) for k in
        ("CONTAINER_APP_REPLICA_NAME", "PORT", "CosmosConnection", "Greeting", "OnlyInFile")}
said.update(name=name, pid=os.getpid())

def on_term(signum, frame):
    # what a relay does on SIGTERM: release its leases, in Cosmos DB, which still runs (a
    # while after the signal: stopped at once, Cosmos DB would be gone by then)
    time.sleep(0.8)
    endpoint = urlsplit(os.environ["CosmosConnection"].split("AccountEndpoint=")[1].split(";")[0])
    try:
        socket.create_connection((endpoint.hostname, endpoint.port), timeout=LOOPBACK).close()
        cosmos = "cosmos-up"
    except OSError:
        cosmos = "cosmos-gone"
    with open(os.environ["WORKER_SIGTERMS"], "a") as out:
        out.write(name + ":" + cosmos + "\\n")
    sys.exit(0)

signal.signal(signal.SIGTERM, on_term)

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(said).encode()
        self.send_response(200 if self.path == "/ready" else 404)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

print("worker", name, "listening", flush=True)
HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""


@dataclass
class Running:
    cli: Cli
    folder: Path
    ready: dict[str, Any]

    def instances(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_once(self.folder, "instances", *args)

    def listed(self) -> dict[str, dict[str, Any]]:
        done = self.instances("list", "--json")
        assert done.returncode == 0, done.stderr
        apps = {app["app"]: app for app in json.loads(done.stdout)["apps"]}
        assert apps["worker"]["kind"] == "process"
        assert apps["web"]["kind"] == "app"
        return {inst["name"]: inst for inst in apps["worker"]["instances"]}

    def sigterms(self) -> list[str]:
        marks = self.folder / "sigterms"
        return sorted(marks.read_text().split()) if marks.exists() else []


#: A non-event's window: an instance killed with --no-restart is still down after the restart
#: policy's delay (1 s) and a look of its supervisor (every 0.2 s). A wrong restart would show
#: as "restarting" from that look on, however slow the machine.
PAST_THE_RESTART_DELAY = 1.5
#: A non-event's window: a paused instance (SIGSTOP) answers nothing (its connection accepted by
#: the kernel, no reply), however long one waits.
PAUSED_SILENCE = 1.0


def said(port: int, timeout: float = LOOPBACK) -> dict[str, Any] | None:
    """What the instance on ``port`` answers on /ready (None: no answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=timeout) as reply:
            return dict(json.loads(reply.read()))
    except (urllib.error.URLError, OSError):
        return None


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    folder = tmp_path_factory.mktemp("processes")
    app = folder / "web"
    app.mkdir()
    (app / "function_app.py").write_text(APP)
    (app / "host.json").write_text(json.dumps({"version": "2.0"}))
    (app / "local.settings.sample.json").write_text(json.dumps(SETTINGS))
    (folder / "worker.py").write_text(WORKER)
    cli = Cli(
        folder,
        [
            "run",
            "--app",
            "web",
            "--free-ports",
            "--json",
            "--process",
            f"worker={sys.executable} worker.py --name {{instance}}",
            "--process-instances",
            "worker=2",
            "--process-ready",
            "worker=http://127.0.0.1:{port}/ready",
        ],
        env={"Greeting": "from the environment", "WORKER_SIGTERMS": str(folder / "sigterms")},
        apart=True,
    ).start()
    try:
        ready = json.loads(cli.wait_for('{"ready": true'))
        yield Running(cli, folder, ready)
    finally:
        cli.kill()


def test_each_instance_runs_with_the_apps_settings_a_port_a_name_and_a_log(
    running: Running,
) -> None:
    ready = running.ready
    by_name = {inst["name"]: inst for inst in ready["instances"]["worker"]}
    assert sorted(by_name) == ["worker-1", "worker-2"]
    for name, inst in by_name.items():
        assert ready["pids"][name] == inst["pid"]
        assert inst["log"] == f".funcstack/{name}.log"
        answer = said(inst["port"])
        assert answer is not None
        assert answer == {
            "CONTAINER_APP_REPLICA_NAME": name,
            "PORT": str(inst["port"]),
            "CosmosConnection": ready["cosmos"],  # the local one, as the app's
            "Greeting": "from the environment",  # the environment wins over the file
            "OnlyInFile": "file",
            "name": name,  # {instance} in the command
            "pid": inst["pid"],
        }
        assert f"worker {name} listening" in (running.folder / inst["log"]).read_text()
    running.cli.wait_for("Ctrl-C stops everything.", errors=True)
    banner = "\n".join(running.cli.errors)
    assert "(2 instance(s); ready once http://127.0.0.1:{port}/ready answers 2xx" in banner


def test_a_killed_instance_comes_back_on_its_port_unless_asked_not_to(running: Running) -> None:
    before = running.listed()["worker-1"]
    done = running.instances("kill", "worker-1")
    assert done.returncode == 0, done.stderr
    assert "worker-1 killed" in done.stdout
    wait_for(
        lambda: (
            running.listed()["worker-1"]["state"] == "running"
            and running.listed()["worker-1"]["pid"] != before["pid"]
        ),
        "worker-1 back",
    )
    after = running.listed()["worker-1"]
    assert after["restarts"] == 1
    assert after["last_exit"] == "killed by SIGKILL"
    assert after["port"] == before["port"]
    answer = said(after["port"])
    assert answer is not None and answer["pid"] == after["pid"]
    assert running.sigterms() == []  # a SIGKILL: nothing handled

    done = running.instances("kill", "worker-2", "--no-restart")
    assert done.returncode == 0, done.stderr
    time.sleep(PAST_THE_RESTART_DELAY)  # a non-event: it stays down
    assert running.listed()["worker-2"]["state"] == "stopped"
    assert "not running" in one_line(running.instances("pause", "worker-2"))


def test_pause_and_resume(running: Running) -> None:
    port = running.listed()["worker-1"]["port"]
    assert running.instances("pause", "worker-1").returncode == 0
    assert running.listed()["worker-1"]["state"] == "paused"
    assert said(port, timeout=PAUSED_SILENCE) is None  # stopped: it answers nothing
    assert running.instances("resume", "worker-1").returncode == 0
    assert running.listed()["worker-1"]["state"] == "running"
    assert said(port) is not None


def test_add_starts_one_more_ready_instance(running: Running) -> None:
    done = running.instances("add", "worker")
    assert done.returncode == 0, done.stderr
    assert "worker-3 added" in done.stdout
    added = running.listed()["worker-3"]
    assert added["state"] == "running"
    answer = said(added["port"])  # ready when the answer came: it answers
    assert answer is not None and answer["CONTAINER_APP_REPLICA_NAME"] == "worker-3"


def test_stop_sends_each_running_instance_a_sigterm_even_a_paused_one(running: Running) -> None:
    assert running.instances("pause", "worker-3").returncode == 0
    assert running.cli.interrupt() == 0, running.cli.text
    # worker-2 was stopped before; each handled its SIGTERM while Cosmos DB still ran
    assert running.sigterms() == ["worker-1:cosmos-up", "worker-3:cosmos-up"]
    assert running.cli.leftovers() == []


def test_a_process_mistake_is_one_line_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "web"
    app.mkdir()
    (app / "function_app.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    for args, says in [
        (["--process-instances", "worker=2"], "no --process worker=COMMAND declared"),
        (["--process", "worker"], "--process worker: give NAME=VALUE"),
        (["--process", "web=true"], "web is already the name of a part"),
        (["--process", "w=true", "--process-instances", "w=0"], "a count, 1 or more"),
        (["--process", "w='unclosed"], "No closing quotation"),
    ]:
        assert main(["run", "--app", "web", *args]) == 1
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith("funcstack: ") and says in line, line
    assert not (tmp_path / ".funcstack").exists()  # nothing started
