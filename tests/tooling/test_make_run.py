"""`make run` (tools.stack.serve) as a user meets it, on free ports in a folder of its own: the
API's /health answers 200 only once the whole stack is up; Ctrl-C at any moment stops
everything, without a traceback (130 while starting, 0 once up); a part that dies is named
with the last lines of its own log, which say how it ended; a host whose app cannot be indexed
says why in one line (the worker's error, naming the function and the parameter).

Each test ends its run a way of its own, so each has a run of its own. Their endpoints: the
health test's run is the whole `make run`, its Cosmos DB and Service Bus endpoints its own,
stopped by its Ctrl-C; Ctrl-C while starting has a Cosmos DB endpoint of its own (as the
Cosmos DB endpoint is ready: the moment is that endpoint's start; as the subscriber host
listens: above the test, why); the part that dies is its own Cosmos DB endpoint, killed. The
Service Bus endpoint of the part that dies and of Ctrl-C as the subscriber host listens is the
run's (`shared_servicebus` of tests/conftest.py, handed to the run's process by
`funcstack.handoff`): the run makes its topic there under a name of its own and deletes it when
it stops, and never stops that endpoint (the test checks both). So does the run whose contacts
app's host is SIGKILLed: the stack restarts it on its port, as Azure restarts a host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from funcstack import deadlines
from funcstack.deadlines import LONG, LOOPBACK, SHORT
from funcstack.handoff import describe
from funcstack.servicebus import ServiceBusEndpoint, control_request
from funcstack.services import LocalServices, PartStartError
from tools.stack import ROOT, free_port, port_in_use

pytestmark = pytest.mark.integration

DRIVER = """
import json, logging, os, signal, sys
from pathlib import Path
from tools.stack import Ports, Stack, serve
args = json.loads(sys.argv[1])
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
logging.getLogger("azure").setLevel(logging.WARNING)

class CtrlC(logging.Handler):
    # Ctrl-C in its terminal (SIGINT to its process group) as the moment's line is logged
    def emit(self, record):
        if args["interrupt_at"] in record.getMessage():
            os.killpg(0, signal.SIGINT)

if args["interrupt_at"]:
    logging.getLogger().addHandler(CtrlC())
cosmos, servicebus, runner, subscriber = args["ports"]
shared = args["shared_servicebus"]  # the test process's, handed over (funcstack.handoff)
if shared:
    from funcstack.handoff import servicebus_from
stack = Stack(workdir=Path(args["workdir"]), with_subscriber=True,
              ports=Ports(cosmos=cosmos, servicebus=servicebus, runner=runner,
                          azurite=(0, 0, 0), subscriber=subscriber),
              settings_copy=Path(args["settings"]),
              shared_servicebus=servicebus_from(shared) if shared else None)
sys.exit(serve(stack, Path(args["pidfile"])))
"""


@dataclass
class Run:
    """One `make run` in a subprocess; its processes carry a mark in their environment."""

    workdir: Path
    ports: list[int] = field(default_factory=lambda: [free_port() for _ in range(4)])
    mark: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: the Service Bus endpoint it uses and does not own (`share`): funcstack.handoff's description
    shared_servicebus: dict[str, Any] | None = None
    output: list[str] = field(default_factory=list)
    process: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None

    @property
    def settings(self) -> Path:
        return self.workdir / "local.settings.json"

    @property
    def pidfile(self) -> Path:
        return self.workdir / "pids.json"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.ports[2]}/api"

    def start(self, *, interrupt_at: str = "") -> Run:
        """Started; with `interrupt_at`, Ctrl-C comes as the line holding it is logged (sent by
        the run itself: a test that waited for the line to send it came too late once, on a
        loaded machine, the stack up meanwhile)."""
        args = {
            "workdir": str(self.workdir / "stack"),
            "ports": self.ports,
            "settings": str(self.settings),
            "pidfile": str(self.pidfile),
            "interrupt_at": interrupt_at,
            "shared_servicebus": self.shared_servicebus,
        }
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MAKE_RUN_TEST_MARK": self.mark}
        # A process group of its own, as a job in a terminal: Ctrl-C is sent to the group.
        self.process = subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps(args)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            process_group=0,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def share(self, servicebus: ServiceBusEndpoint) -> Run:
        """The run on this Service Bus endpoint of the test process's, not one of its own."""
        self.shared_servicebus = describe(servicebus)
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line.rstrip("\n"))

    def wait_for(self, text: str, deadline: float = LONG) -> None:
        """Until a line holds `text` (a whole stack's start: LONG); a run that ended without it
        fails at once, with its output."""

        def printed() -> bool:
            assert self.process is not None
            if any(text in line for line in self.output):
                return True
            assert self.process.poll() is None, f"ended without {text!r}:\n{self.text}"
            return False

        try:
            deadlines.wait_for(printed, f"{text!r} printed", deadline)
        except deadlines.DeadlineError as exc:
            raise deadlines.DeadlineError(f"{exc}; the output:\n{self.text}") from None

    def interrupt(self) -> int:
        """Ctrl-C in its terminal: SIGINT to its process group."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        return self.exit_code()

    def exit_code(self) -> int:
        assert self.process is not None
        code = self.process.wait(SHORT)
        if self._reader is not None:  # the reader takes the last lines (it ends at their end)
            self._reader.join(LOOPBACK)
        return code

    @property
    def text(self) -> str:
        return "\n".join(self.output)

    def leftovers(self) -> list[str]:
        """Processes still running that this run started (its mark in their environment)."""
        found = []
        needle = f"MAKE_RUN_TEST_MARK={self.mark}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if (
                    needle in (entry / "environ").read_bytes()
                    and (entry / "stat").read_text().split(") ")[1][0] != "Z"
                ):
                    found.append(
                        (entry / "cmdline")
                        .read_bytes()
                        .replace(b"\0", b" ")
                        .decode(errors="replace")
                    )
            except (OSError, IndexError):
                continue
        return found

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(SHORT)
            except subprocess.TimeoutExpired:
                self.process.kill()


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    started = Run(tmp_path)
    try:
        yield started
    finally:
        started.kill()


def health(api: str) -> int:
    try:
        with urllib.request.urlopen(f"{api}/health", timeout=LOOPBACK) as reply:  # noqa: S310
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_health_answers_200_only_once_settings_are_written_and_the_subscriber_is_up(
    run: Run,
) -> None:
    run.start()

    def healthy() -> bool:
        assert run.process is not None and run.process.poll() is None, run.text
        return health(run.api) == 200

    deadlines.wait_for(healthy, "/health answering 200", LONG, every=0.02)
    assert run.settings.exists()
    assert json.loads(run.settings.read_text())["Values"]["ServiceBusConnection"]
    assert port_in_use(run.ports[3])  # the subscriber's host
    run.wait_for("Ctrl-C stops everything.")
    assert run.interrupt() == 0
    assert "Traceback" not in run.text
    assert "stopped in" in run.text
    assert run.leftovers() == []


def left_nothing_on(run: Run, servicebus: ServiceBusEndpoint) -> None:
    """The Service Bus endpoint the run shared still serves and holds none of its topic (its
    name: the run's settings)."""
    assert not servicebus.stopped
    topic = json.loads(run.settings.read_text())["Values"]["SERVICEBUS_TOPIC"]
    assert topic.startswith("contact-events-")  # a name of the run's own
    with pytest.raises(RuntimeError, match="not found"):  # nothing of that name to delete
        control_request(
            servicebus.host, servicebus.control_port or 0, {"op": "delete", "name": topic}
        )


# Both moments on a Cosmos DB endpoint of the run's own: on the test process's (round 19) one
# fresh-clone run printed the Cosmos DB SDK's background health check's failure (a logged
# traceback) at the Ctrl-C as the subscriber host listened; not reproduced in 6 runs beside 3
# busy loops, kept as it was until it is understood (git log -S'Round 19' -- docs/testing.md).
# As the subscriber host listens, the run's Service Bus endpoint is the test process's (round
# 20): the run made its topic there, and the Ctrl-C deletes it and leaves the endpoint serving.
# As the Cosmos DB endpoint is ready, nothing has connected to Service Bus yet, so none starts.
@pytest.mark.parametrize("moment", ["cosmos endpoint ready", "subscriber host listening"])
def test_ctrl_c_while_starting_stops_what_started_without_a_traceback(
    run: Run, moment: str, request: pytest.FixtureRequest
) -> None:
    shared: ServiceBusEndpoint | None = None
    if moment == "subscriber host listening":
        shared = request.getfixturevalue("shared_servicebus")
        run.share(shared)
    run.start(interrupt_at=moment)
    assert run.exit_code() == 130, run.text
    assert moment in run.text
    assert "Ctrl-C stops everything." not in run.text  # interrupted while starting
    assert "Traceback" not in run.text
    assert "interrupted while starting" in run.text
    assert run.leftovers() == []
    assert not run.pidfile.exists()
    if shared is not None:
        left_nothing_on(run, shared)


def test_a_part_that_dies_is_named_with_the_last_lines_of_its_own_log(
    run: Run, shared_servicebus: ServiceBusEndpoint
) -> None:
    """The part is its Cosmos DB endpoint, killed; its Service Bus endpoint the test process's."""
    run.share(shared_servicebus).start().wait_for("Ctrl-C stops everything.")
    [cosmos] = [p["pid"] for p in json.loads(run.pidfile.read_text()) if p["name"] == "cosmos"]
    os.kill(cosmos, signal.SIGKILL)
    assert run.exit_code() == 1
    assert "cosmos exited unexpectedly (killed by SIGKILL)" in run.text
    assert "Traceback" not in run.text
    log = (run.workdir / "stack" / "cosmos.log").read_text().splitlines()
    assert any("cosmos endpoint ready at" in line for line in log)
    assert log[-1].endswith(f"cosmos (pid {cosmos}) exited unexpectedly: killed by SIGKILL")
    assert log[-1] in run.text  # shown on the console too
    assert run.leftovers() == []
    left_nothing_on(run, shared_servicebus)


def test_a_host_killed_comes_back_on_its_port_and_sigterm_still_stops_everything(
    run: Run, shared_servicebus: ServiceBusEndpoint
) -> None:
    """The contacts app's host SIGKILLed from outside (a crash, the out-of-memory killer): the
    stack goes on, starts it again on its port (the banner's URLs answer again), says so in two
    lines, records its new pid; a SIGTERM (`kill PID`, a service manager) then stops everything
    it started, the new host and the fork server the hosts were forked from too."""
    run.share(shared_servicebus).start().wait_for("Ctrl-C stops everything.")
    [killed] = [p["pid"] for p in json.loads(run.pidfile.read_text()) if p["name"] == "runner"]
    port = run.ports[2]
    os.kill(killed, signal.SIGKILL)
    run.wait_for("runner restarted (pid ")
    [line] = [line for line in run.output if "runner restarted (pid " in line]
    restarted = int(line.split("runner restarted (pid ")[1].split(",")[0])
    assert line.endswith(f"127.0.0.1:{port})"), line  # the banner's port
    assert health(run.api) == 200, run.text
    exited = "runner exited unexpectedly (killed by SIGKILL); restarting it in "
    assert exited in run.text and f"s on 127.0.0.1:{port}, as Azure restarts" in run.text
    deadlines.wait_for(
        lambda: (
            {p["name"]: p["pid"] for p in json.loads(run.pidfile.read_text())}.get("runner")
            == restarted
        ),
        "the restarted host's pid recorded",
        SHORT,
    )
    log = (run.workdir / "stack" / "runner.log").read_text()
    assert f"runner (pid {killed}) exited unexpectedly: killed by SIGKILL" in log
    assert run.process is not None
    run.process.send_signal(signal.SIGTERM)
    assert run.exit_code() == 0, run.text
    assert "Traceback" not in run.text and "stopping the stack" not in run.text
    assert run.leftovers() == []
    left_nothing_on(run, shared_servicebus)


APP_WITHOUT_CONTEXT = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="probe")
def probe_ctx(req: func.HttpRequest, ctx: func.Context) -> func.HttpResponse:
    return func.HttpResponse("ok")
"""


def test_an_app_the_worker_cannot_index_fails_its_host_with_the_reason_in_one_line(
    tmp_path: Path,
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "function_app.py").write_text(APP_WITHOUT_CONTEXT)
    (app / "host.json").write_text('{"version": "2.0"}')
    parts = LocalServices(workdir=tmp_path / "stack")
    with pytest.raises(PartStartError) as failed:
        parts.run_host("api", app, settings={})
    message = str(failed.value)
    assert message.startswith("api did not start: worker init (indexing) failed: ")
    assert "cannot load the probe_ctx function" in message and "{'ctx'}" in message
    assert "\n" not in message
    log = parts.log_path("api").read_text()
    assert "Traceback" not in log
    assert parts.hosts == {}
