"""``funcstack run`` / ``up`` as a user meets them, in a folder of their own on free ports: an app
copied out of this repository runs with one command, its events reach its topic (received with
the unmodified SDK); Ctrl-C stops everything, also while a client keeps posting, and leaves no
process; state persists per project folder unless --fresh; what a user can get wrong is one
line naming the cause, exit status 1, no traceback."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest
from azure.servicebus import ServiceBusClient

from funcstack.deadlines import LONG, LOOPBACK, SHORT, DeadlineError, wait_for

pytestmark = pytest.mark.integration
HELLO = Path(__file__).resolve().parent / "apps" / "hello"


@dataclass
class Cli:
    """One ``funcstack`` command in a subprocess (its own process group, like a job in a
    terminal); every process it starts carries a mark in its environment."""

    cwd: Path
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    mark: str = field(default_factory=lambda: uuid.uuid4().hex)
    output: list[str] = field(default_factory=list)
    process: subprocess.Popen[str] | None = None
    #: Keep stderr apart (in ``errors``) instead of with stdout in ``output``.
    apart: bool = False
    errors: list[str] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Cli:
        # Python's tracebacks on a fatal signal: a command that does not end is sent SIGABRT,
        # and says where each of its Python processes was (``exit_code``).
        env = {
            "PYTHONFAULTHANDLER": "1",
            **os.environ,
            **self.env,
            "FUNCSTACK_TEST_MARK": self.mark,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "funcstack", *self.args],
            cwd=self.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if self.apart else subprocess.STDOUT,
            text=True,
            process_group=0,
        )
        self.readers.append(
            threading.Thread(
                target=self._read, args=(self.process.stdout, self.output), daemon=True
            )
        )
        if self.apart:
            self.readers.append(
                threading.Thread(
                    target=self._read, args=(self.process.stderr, self.errors), daemon=True
                )
            )
        for reader in self.readers:
            reader.start()
        return self

    @staticmethod
    def _read(stream: IO[str] | None, into: list[str]) -> None:
        if stream is None:
            return
        with stream:  # closed at its end: no pipe left open for the garbage collector to find
            for line in stream:
                into.append(line.rstrip("\n"))

    def wait_for(self, text: str, deadline: float = LONG, *, errors: bool = False) -> str:
        """The first line holding ``text`` (of stderr with ``errors``, when kept apart), once
        the command prints it (LONG: a stack started with its apps); failing at once, with all
        it printed, when the command ends without it."""

        def found() -> str | None:
            lines = [line for line in (self.errors if errors else self.output) if text in line]
            if lines:
                return lines[0]
            assert self.process is not None
            if self.process.poll() is not None:
                for reader in self.readers:  # what it printed last, read to the end
                    reader.join(LOOPBACK)
                lines = [line for line in (self.errors if errors else self.output) if text in line]
                if not lines:
                    raise AssertionError(
                        f"funcstack ended ({self.process.returncode}) without printing "
                        f"{text!r}:\n{self.text}"
                    )
                return lines[0]
            return None

        try:
            return wait_for(found, f"funcstack printing a line holding {text!r}", deadline)
        except DeadlineError as exc:
            raise DeadlineError(f"{exc}; it printed:\n{self.text}") from None

    def drained(self) -> None:
        """Once the command has ended: its output read to the end (its pipes closed by every
        process that held them; one still held is a process left running)."""
        for reader in self.readers:
            reader.join(LOOPBACK)
            assert not reader.is_alive(), (
                f"funcstack's output still open {LOOPBACK:g} s after it ended: a process it "
                f"started holds it ({self.leftovers()})"
            )

    def interrupt(self) -> int:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        return self.exit_code()

    def exit_code(self, deadline: float = SHORT) -> int:
        """Its exit status, once it ends (SHORT: a stack stopped, its hosts, instances and
        services; LONG for a command that runs suites)."""
        assert self.process is not None
        try:
            code = self.process.wait(deadline)
        except subprocess.TimeoutExpired:
            raise AssertionError(self._hung(deadline)) from None
        self.drained()  # its last lines (e.g. "stopped in") read before the test reads them
        return code

    def _hung(self, deadline: float) -> str:
        """What a command that did not end within ``deadline`` was doing: each of its processes
        (state, the kernel function it waits in), then each Python one's traceback -- sent
        SIGABRT, it prints them (``PYTHONFAULTHANDLER``) -- in all it printed; none is left."""
        marked, found = self._marked(), []
        for pid, command in marked.items():
            try:
                state = (Path("/proc") / str(pid) / "stat").read_text().split(") ")[1][0]
                waits = (Path("/proc") / str(pid) / "wchan").read_text()
            except (OSError, IndexError):
                continue
            found.append(f"  {pid} [{state}, waiting in {waits or '-'}] {command}")
        for pid, command in marked.items():  # each read before any is ended
            if "python" in command:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            assert self.process is not None
            self.process.wait(LOOPBACK)
        self.kill_leftovers()
        for reader in self.readers:
            reader.join(LOOPBACK)
        processes = "\n".join(found)
        return (
            f"funcstack {self.args[0]} had not ended {deadline:g} s later; its "
            f"processes then:\n{processes}\nit printed (Python's tracebacks at the end):\n"
            f"{self.text}"
        )

    @property
    def text(self) -> str:
        return "\n".join([*self.output, *self.errors])

    def _marked(self) -> dict[int, str]:
        """The processes still running that carry this command's mark: pid -> command line."""
        found = {}
        needle = f"FUNCSTACK_TEST_MARK={self.mark}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if (
                    needle in (entry / "environ").read_bytes()
                    and (entry / "stat").read_text().split(") ")[1][0] != "Z"
                ):
                    found[int(entry.name)] = (
                        (entry / "cmdline")
                        .read_bytes()
                        .replace(b"\0", b" ")
                        .decode(errors="replace")
                    )
            except (OSError, IndexError):
                continue
        return found

    def leftovers(self) -> list[str]:
        return list(self._marked().values())

    def kill_leftovers(self) -> None:
        """SIGKILL every process carrying this command's mark (a failed test's clean-up)."""
        for pid in self._marked():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(SHORT)
            except subprocess.TimeoutExpired:
                self.process.kill()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty folder holding a copy of the hello app (its config beside it)."""
    shutil.copytree(HELLO, tmp_path / "hello", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.fixture
def clis() -> Iterator[list[Cli]]:
    started: list[Cli] = []
    try:
        yield started
    finally:
        for cli in started:
            cli.kill()


def post(url: str, body: object) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(  # noqa: S310 - the local host's URL
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    try:
        # SHORT: a function's answer, its first call importing the SDKs it writes through
        with urllib.request.urlopen(request, timeout=SHORT) as reply:  # noqa: S310
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def test_an_app_copied_out_runs_with_one_command_and_ctrl_c_stops_it_under_load(
    project: Path,
    clis: list[Cli],
) -> None:
    cli = Cli(project, ["run", "--app", "hello", "--free-ports"]).start()
    clis.append(cli)
    cli.wait_for("Ctrl-C stops everything.")
    assert "Traceback" not in cli.text
    url = re.search(r"http://127\.0\.0\.1:\d+/api", cli.wait_for("  hello ")).group(0)  # type: ignore[union-attr]
    servicebus = cli.wait_for("Endpoint=sb://").split()[-1]
    assert "cosmos container hello/greetings: created" in cli.text
    status, greeting = post(f"{url}/greetings", {"name": "Ada"})
    assert status == 201, cli.text
    with (
        ServiceBusClient.from_connection_string(servicebus) as client,
        client.get_subscription_receiver("greetings", "all", max_wait_time=SHORT) as receiver,
    ):
        [message] = receiver.receive_messages(max_wait_time=SHORT)  # at its arrival
        receiver.complete_message(message)
    assert message.message_id == greeting["id"]
    assert json.loads(str(message)) == greeting
    settings = json.loads((project / "hello" / "local.settings.json").read_text())
    assert settings["Values"]["ServiceBusConnection"] == servicebus
    assert (project / ".funcstack" / ".gitignore").read_text().endswith("*\n")

    # Ctrl-C while a client keeps posting: everything stops, nothing is left
    posting = threading.Event()
    answers: list[int] = []

    def keep_posting() -> None:
        while not posting.is_set():
            try:
                answers.append(post(f"{url}/greetings", {"name": "load"})[0])
            except OSError:
                answers.append(0)

    clients = [threading.Thread(target=keep_posting, daemon=True) for _ in range(4)]
    for client_thread in clients:
        client_thread.start()
    wait_for(lambda: answers.count(201) >= 20, "20 greetings created by the posting clients")
    try:
        assert cli.interrupt() == 0, cli.text
    finally:
        posting.set()
        for client_thread in clients:
            client_thread.join(SHORT)  # its last post answered or refused
    assert "stopped in" in cli.text
    assert "Traceback" not in cli.text
    assert cli.leftovers() == []
    assert not (project / ".funcstack" / "pids.json").exists()


def test_state_persists_per_project_folder_unless_fresh(project: Path, clis: list[Cli]) -> None:
    first = Cli(project, ["up", "--free-ports", "--config", "hello/funcstack.json"]).start()
    clis.append(first)
    first.wait_for("Ctrl-C stops everything.")
    assert "cosmos container hello/greetings: created" in first.text
    second = one_line(run_once(project, "up", "--free-ports"))
    assert "a stack is already running from this folder: cosmos (pid" in second
    assert first.interrupt() == 0
    again = Cli(
        project, ["up", "--free-ports", "--config", "hello/funcstack.json", "--json"]
    ).start()
    clis.append(again)
    ready = json.loads(again.wait_for('{"ready": true'))
    assert set(ready) >= {"cosmos", "servicebus", "storage"}
    assert "cosmos container hello/greetings: exists" in again.text
    assert again.interrupt() == 0
    fresh = Cli(
        project, ["up", "--free-ports", "--config", "hello/funcstack.json", "--fresh"]
    ).start()
    clis.append(fresh)
    fresh.wait_for("Ctrl-C stops everything.")
    assert "cosmos container hello/greetings: created" in fresh.text
    assert fresh.interrupt() == 0
    assert fresh.leftovers() == []


def run_once(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "funcstack", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=LONG,  # a refusal said at once, or after a stack and its apps started
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("funcstack: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_an_app_folder_without_function_app_py_is_one_line(project: Path) -> None:
    (project / "empty").mkdir()
    assert "no function_app.py in" in one_line(run_once(project, "run", "--app", "empty"))
    assert "--app nowhere: no such folder" in one_line(run_once(project, "run", "--app", "nowhere"))
    # with --json, the one line a script reads from stdout says so too
    done = run_once(project, "run", "--app", "nowhere", "--json")
    assert "--app nowhere: no such folder" in one_line(done)
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"ready": False, "error": "--app nowhere: no such folder"}
    ]


REFUSED_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="orders")
def orders(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("orders")


@app.event_hub_message_trigger(arg_name="event", event_hub_name="clicks", connection="Hubs")
def clicks(event: func.EventHubEvent) -> None:
    pass
"""


def test_run_json_says_a_refused_app_in_one_line_on_stdout(project: Path) -> None:
    """An app with a trigger funcstack cannot serve is refused at start; with --json, stdout
    holds one line saying so, with the app and each refusal (it held nothing before: a script
    waiting for the ready line waited for the exit instead)."""
    app = project / "clicks"
    app.mkdir()
    (app / "function_app.py").write_text(REFUSED_APP)
    done = run_once(project, "run", "--app", "clicks", "--free-ports", "--json")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "funcstack: clicks did not start: the app's bindings cannot all be served" in (
        done.stderr
    )
    [line] = done.stdout.splitlines()
    refused = json.loads(line)
    assert (refused["ready"], refused["part"]) == (False, "clicks")
    assert refused["error"].startswith("clicks did not start: the app's bindings cannot all")
    assert refused["refusals"] == [
        "function 'clicks', binding 'event' (eventHubTrigger, in): the trigger type "
        "eventHubTrigger is not served by funcstack"
    ]


def test_a_bad_config_file_is_one_line_naming_it(project: Path) -> None:
    (project / "bad.json").write_text('{"Cosmos": {"Databases": [}')
    line = one_line(run_once(project, "up", "--free-ports", "--config", "bad.json"))
    assert f"{project / 'bad.json'}: not valid JSON" in line


def test_a_busy_port_is_one_line_naming_it(project: Path) -> None:
    sample = project / "hello" / "local.settings.sample.json"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        document = json.loads(sample.read_text())
        document["Host"]["LocalHttpPort"] = port
        sample.write_text(json.dumps(document))
        line = one_line(run_once(project, "run", "--app", "hello"))
    assert f"{port} (hello)" in line and "--free-ports" in line


def test_missing_node_is_one_line(project: Path) -> None:
    bare = project / "bin"
    bare.mkdir()
    line = one_line(run_once(project, "up", "--free-ports", env={"PATH": str(bare)}))
    assert "node was not found on PATH" in line and "Node.js >= 20" in line


def test_run_keeps_the_users_local_settings_and_says_in_one_line_what_it_changed(
    project: Path,
    clis: list[Cli],
) -> None:
    """The user's own setting and their own Service Bus namespace in Azure are kept; the local
    connections of an earlier run (the well-known ports) move to this run's free ports; the
    line names settings, never values. (No declared resources: nothing here connects to the
    stand-ins, which then never start; their connections are written all the same.)"""
    app = project / "hello"
    (app / "funcstack.json").unlink()
    sample = json.loads((app / "local.settings.sample.json").read_text())
    theirs = (
        "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=send;"
        "SharedAccessKey=their-secret-value="
    )
    values = {**sample["Values"], "MY_FEATURE_FLAG": "on", "ServiceBusConnection": theirs}
    values["FUNCTIONS_HOST_COSMOS_VERIFY_TLS"] = "false"  # what funcstack wrote before
    (app / "local.settings.json").write_text(
        json.dumps({"IsEncrypted": False, "Values": values, "Host": {"LocalHttpPort": 7071}})
    )
    cli = Cli(project, ["run", "--app", "hello", "--free-ports"]).start()
    clis.append(cli)
    cli.wait_for("Ctrl-C stops everything.")
    said = [line.strip() for line in cli.output if "local.settings.json: " in line]
    assert said == [
        "local.settings.json: updated AzureWebJobsStorage, CosmosConnection (the "
        "local endpoints); removed FUNCTIONS_HOST_COSMOS_VERIFY_TLS (the local endpoint is "
        "verified); kept ServiceBusConnection (not a local endpoint)"
    ], cli.text
    assert "their-secret-value" not in cli.text
    cosmos = cli.wait_for("AccountEndpoint=").split()[-1]
    assert cli.interrupt() == 0
    written = json.loads((app / "local.settings.json").read_text())
    assert written["Values"]["MY_FEATURE_FLAG"] == "on"
    assert written["Values"]["ServiceBusConnection"] == theirs
    assert written["Values"]["CosmosConnection"] == cosmos
    assert written["Host"] == {"LocalHttpPort": 7071}
    assert "FUNCTIONS_HOST_COSMOS_VERIFY_TLS" not in written["Values"]


KEYED_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


@app.route(route="orders", methods=["GET"])
def orders(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("orders")
"""


def test_run_with_enforce_keys_prints_each_apps_keys_and_requires_them(
    project: Path,
    clis: list[Cli],
) -> None:
    app = project / "keyed"
    app.mkdir()
    (app / "function_app.py").write_text(KEYED_APP)
    cli = Cli(
        project, ["run", "--app", "keyed", "--free-ports", "--enforce-keys", "--json"], apart=True
    ).start()
    clis.append(cli)
    ready = json.loads(cli.wait_for('{"ready": true'))  # stdout: the one JSON line
    cli.wait_for("Ctrl-C stops everything.", errors=True)  # the banner, on stderr
    url = ready["apps"]["keyed"]
    found = re.search(r"keys: function \(default\) (\S+)   master (\S+)", cli.text)
    assert found, cli.text
    function_key, master_key = found.groups()
    # the script's line carries the keys the terminal shows
    assert ready["keys"] == {"keyed": {"function": function_key, "master": master_key}}
    assert len(cli.output) == 1

    def status(target: str, headers: dict[str, str] | None = None) -> int:
        request = urllib.request.Request(target, headers=headers or {})  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=SHORT) as reply:  # noqa: S310
                return int(reply.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert status(f"{url}/orders") == 401
    assert status(f"{url}/orders", {"x-functions-key": function_key}) == 200
    assert status(f"{url}/orders?code={master_key}") == 200
    assert cli.interrupt() == 0
    logs = "".join(p.read_text() for p in (project / ".funcstack").glob("*.log"))
    assert function_key not in logs and master_key not in logs


SHOP_APP = """
import logging

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
log = logging.getLogger("shop")


@app.route(route="greet/{name}", methods=["POST"])
def greet(req: func.HttpRequest) -> func.HttpResponse:
    log.info("greeting %s", req.route_params["name"])
    print("printed by greet")
    return func.HttpResponse("hi", status_code=201)


@app.route(route="fail")
async def fail(req: func.HttpRequest) -> func.HttpResponse:
    log.warning("about to fail")
    raise ValueError("the shop is closed")


@app.route(route="hush")
def hush(req: func.HttpRequest) -> func.HttpResponse:
    log.info("hushed sync")
    return func.HttpResponse("")


@app.route(route="whisper")
async def whisper(req: func.HttpRequest) -> func.HttpResponse:
    log.info("hushed async")
    return func.HttpResponse("")
"""

#: host.json: a key funcstack does not honour; the terminal's levels per function (the line per
#: invocation is category Function.<name>, the app's logging Function.<name>.User)
SHOP_HOST_JSON = {
    "version": "2.0",
    "singleton": {"lockPeriod": "00:00:15"},
    "logging": {"logLevel": {"Function.hush": "Warning", "Function.whisper.User": "Warning"}},
}


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    app = tmp_path / "shop"
    app.mkdir()
    (app / "function_app.py").write_text(SHOP_APP)
    (app / "host.json").write_text(json.dumps(SHOP_HOST_JSON))
    return tmp_path


def request(method: str, url: str) -> int:
    call = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)  # noqa: S310
    try:
        with urllib.request.urlopen(call, timeout=SHORT) as reply:  # noqa: S310
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def app_url(cli: Cli, app: str) -> str:
    found = re.search(r"http://127\.0\.0\.1:\d+/api", cli.wait_for(f"  {app} "))
    assert found, cli.text
    return found.group(0)


def test_run_shows_a_line_per_invocation_and_the_apps_logging_as_func_start_does(
    shop: Path,
    clis: list[Cli],
) -> None:
    cli = Cli(shop, ["run", "--app", "shop", "--free-ports"]).start()
    clis.append(cli)
    cli.wait_for("Ctrl-C stops everything.")
    url = app_url(cli, "shop")
    assert [
        request("POST", f"{url}/greet/Ada"),
        request("GET", f"{url}/fail"),
        request("GET", f"{url}/hush"),
        request("GET", f"{url}/whisper"),
        request("POST", f"{url}/greet/Bob"),
    ] == [201, 500, 200, 200, 201]
    last = cli.wait_for("POST /api/greet/Bob -> 201")  # the terminal's lines come in order
    assert re.fullmatch(
        r"\[\d\d:\d\d:\d\d\.\d{3}\] shop: Executed 'Functions\.greet' "
        r"\(Succeeded, httpTrigger, POST /api/greet/Bob -> 201, "
        r"Duration=\d+ms\)",
        last,
    ), last
    shown = [re.sub(r"^\[[\d:.]+\] ", "", line) for line in cli.output]
    executed = next(
        i
        for i, line in enumerate(shown)
        if line.startswith(
            "shop: Executed 'Functions.greet' (Succeeded, httpTrigger, POST /api/greet/Ada -> 201, "
            "Duration="
        )
    )
    assert "shop: greeting Ada" in shown, cli.text
    assert shown.index("shop: greeting Ada") < executed  # the app's line, then the invocation's
    assert "shop: printed by greet" in shown  # what the app prints (its own pipe: any order)
    failed = shown.index("shop: WARNING about to fail") + 1
    assert re.fullmatch(
        r"shop: ERROR Executed 'Functions\.fail' \(Failed, httpTrigger, GET "
        r"/api/fail, Duration=\d+ms\)",
        shown[failed],
    ), shown[failed]
    error = shown[failed + 1 : shown.index("shop: greeting Bob")]
    assert error[0] == "    ValueError: the shop is closed"  # the error in full, indented
    assert "    Traceback (most recent call last):" in error
    assert '        raise ValueError("the shop is closed")' in error
    assert any(line.startswith("shop: Executed 'Functions.whisper' (Succeeded") for line in shown)
    assert not [line for line in shown if "hushed" in line or "Functions.hush'" in line]
    assert any(
        line.startswith(
            "shop: WARNING host.json: singleton (lockPeriod) is not honoured by funcstack"
        )
        for line in shown
    )
    assert cli.interrupt() == 0
    log = (shop / ".funcstack" / "shop.log").read_text()
    for once in (
        "greeting Ada",
        "hushed sync",
        "hushed async",
        "Executed 'Functions.hush'",
        "printed by greet",
        "Traceback (most recent call last):",
    ):
        assert log.count(once) == (2 if once == "printed by greet" else 1), once
    settings = [line for line in log.splitlines() if "app settings: " in line]
    assert len(settings) == 1 and "skipping setting" not in log


def test_run_quiet_keeps_the_terminal_to_the_banner(shop: Path, clis: list[Cli]) -> None:
    cli = Cli(shop, ["run", "--app", "shop", "--free-ports", "--quiet"]).start()
    clis.append(cli)
    cli.wait_for("Ctrl-C stops everything.")
    url = app_url(cli, "shop")
    assert request("POST", f"{url}/greet/Ada") == 201
    log = shop / ".funcstack" / "shop.log"
    wait_for(lambda: "Executed 'Functions.greet'" in log.read_text(), "the invocation in shop.log")
    assert cli.interrupt() == 0
    assert "greeting Ada" in log.read_text()
    assert not [line for line in cli.output if "greet" in line or "singleton" in line], cli.text


def test_run_with_instances_lists_them_each_with_its_log_behind_the_apps_url(
    project: Path,
    clis: list[Cli],
) -> None:
    """``--instances 2``: two hosts of the app, each with its log, listed in the banner; the
    app's URL is the front (which spreads requests: tests/functions_host/test_scaleout.py).
    Killed where no teardown runs (SIGKILL: a CI's timeout, the out-of-memory killer), it
    leaves nothing running all the same: the endpoints (each in a process group of its own)
    see their starter gone, the hosts' fork server its starter's socket closed."""
    cli = Cli(project, ["run", "--app", "hello", "--free-ports", "--instances", "2", "--json"])
    clis.append(cli.start())
    ready = json.loads(cli.wait_for('{"ready": true'))
    cli.wait_for("Ctrl-C stops everything.")
    url = re.search(r"http://127\.0\.0\.1:\d+/api", cli.wait_for("  hello ")).group(0)  # type: ignore[union-attr]
    assert "2 instances, requests spread over the HTTP ones" in cli.text
    for name in ("hello-1", "hello-2"):
        line = cli.wait_for(f"instance {name} (whole app, pid ")
        assert f"log: .funcstack/{name}.log" in line
    created = [post(f"{url}/greetings", {"name": f"Ada {i}"}) for i in range(4)]
    assert [status for status, _ in created] == [201] * 4
    logs = {
        name: (project / ".funcstack" / f"{name}.log").read_text()
        for name in ("hello-1", "hello-2")
    }
    assert all("host listening" in log for log in logs.values())
    # Azurite, which starts at its first connection (the app uses no storage), started first
    blob = re.search(r"BlobEndpoint=http://[^;]*:([0-9]+)/", ready["storage"])
    assert blob is not None, ready["storage"]
    socket.create_connection(("127.0.0.1", int(blob.group(1))), timeout=LOOPBACK).close()
    started = ("cosmos/server.js", "funcstack.servicebus", "azurite", "_forkserver_server")
    wait_for(
        lambda: all(any(s in line for line in cli.leftovers()) for s in started),
        f"every endpoint and the fork server running ({', '.join(started)})",
    )
    assert cli.process is not None
    os.killpg(cli.process.pid, signal.SIGKILL)
    cli.process.wait(LOOPBACK)
    try:
        wait_for(lambda: not cli.leftovers(), "every process of the killed stack gone")
    except DeadlineError as exc:
        raise DeadlineError(f"{exc}; still running: {cli.leftovers()}") from None
    finally:
        cli.kill_leftovers()  # the test's own clean-up: the guarantee is the wait above


def test_run_restarts_an_apps_host_killed_on_its_port_as_azure_restarts_a_host(
    project: Path, clis: list[Cli]
) -> None:
    """The app's host SIGKILLed from outside (a crash): the run goes on, starts it again on its
    port (the URL it printed answers again), says so on stderr and records the new pid; Ctrl-C
    then stops everything, the new host too."""
    cli = Cli(project, ["run", "--app", "hello", "--free-ports"]).start()
    clis.append(cli)
    cli.wait_for("Ctrl-C stops everything.")
    url = app_url(cli, "hello")
    pidfile = project / ".funcstack" / "pids.json"
    [killed] = [p["pid"] for p in json.loads(pidfile.read_text()) if p["name"] == "hello"]
    os.kill(killed, signal.SIGKILL)
    line = cli.wait_for("hello restarted (pid ")
    restarted = int(line.split("(pid ")[1].split(",")[0])
    port = url.split(":")[2].split("/")[0]
    assert line.endswith(f"127.0.0.1:{port})"), line
    exited = cli.wait_for("hello exited unexpectedly (killed by SIGKILL); restarting it in ")
    assert f"on 127.0.0.1:{port}, as Azure restarts a host that dies" in exited
    status, created = post(f"{url}/greetings", {"name": "Ada"})
    assert status == 201, created
    wait_for(
        lambda: (
            {p["name"]: p["pid"] for p in json.loads(pidfile.read_text())}["hello"] == restarted
        ),
        "the restarted host's pid recorded",
    )
    assert cli.interrupt() == 0, cli.text
    assert "Traceback" not in cli.text and "stopping the stack" not in cli.text
    assert cli.leftovers() == []


def test_a_bad_instances_value_is_one_line_naming_it(project: Path) -> None:
    line = one_line(run_once(project, "run", "--app", "hello", "--instances", "http=none"))
    assert "--instances http=none: instances: 'none' is not a count of instances" in line
