"""The local stack: Cosmos endpoint + Service Bus endpoint + Azurite + the Functions runner
hosting function_app.py (and, beside it on its own port, a second runner hosting the
subscriber app in subscriber/), wired through a generated local.settings.json.

`python -m emulators` (what `make run` calls) starts it on the well-known ports and serves
until Ctrl-C; tests use `Stack` on free ports and stop/kill parts of it to inject faults.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from emulators.cosmos.launcher import CosmosEndpoint, start_cosmos
from emulators.functions_host.launcher import RunningRunner, start_runner
from emulators.otel import ENV_VAR as OTEL_ENV_VAR
from emulators.provision import provision
from emulators.servicebus.launcher import ServiceBusEndpoint, start_servicebus

logger = logging.getLogger("emulators")
#: Seconds each part gets to exit on its own before it is killed (Ctrl-C within 3 s).
STOP_TIMEOUT = 1.5
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "local.settings.sample.json"
SUBSCRIBER_DIR = ROOT / "subscriber"
SUBSCRIBER_SAMPLE = SUBSCRIBER_DIR / "local.settings.sample.json"
NODE_BIN = ROOT / "emulators" / "node_modules" / ".bin"


@dataclass
class Ports:
    cosmos: int = 8081
    servicebus: int = 5672
    runner: int = 7071
    azurite: tuple[int, int, int] = (10000, 10001, 10002)
    subscriber: int = 7072

    @classmethod
    def free(cls) -> Ports:
        return cls(cosmos=0, servicebus=0, runner=0, azurite=(0, 0, 0), subscriber=0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Stack:
    workdir: Path
    ports: Ports = field(default_factory=Ports)
    with_servicebus: bool = True
    with_azurite: bool = False
    with_runner: bool = True
    #: The subscriber app (subscriber/) in a runner of its own, and its projection container.
    with_subscriber: bool = False
    subscriber_overrides: dict[str, str] = field(default_factory=dict)
    subscriber: RunningRunner | None = None
    settings_overrides: dict[str, str] = field(default_factory=dict)
    duplicate_window_seconds: float | None = None
    servicebus_settle_delay_ms: float = 0.0
    #: The Service Bus endpoint's message size limit in bytes (None: 256 KB, as on Standard);
    #: change it and call `restart_servicebus()` to move the namespace "to Premium".
    servicebus_max_message_size: int | None = None
    cosmos: CosmosEndpoint | None = None
    servicebus: ServiceBusEndpoint | None = None
    runner: RunningRunner | None = None
    azurite: subprocess.Popen[bytes] | None = None
    settings_file: Path | None = None
    #: Where the parts keep state across restarts (None: in memory only, as in tests).
    state_dir: Path | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self.cosmos = start_cosmos(
                port=self.ports.cosmos, log_path=self.workdir / "cosmos.log",
                state_file=self.state_dir / "cosmos.json" if self.state_dir else None)
            if self.with_servicebus:
                self.start_servicebus()
            if self.with_azurite:
                self._start_azurite()
            values = self.settings()
            provision(
                self.cosmos.connection_string,
                database=values["COSMOS_DATABASE"],
                container=values["COSMOS_CONTAINER"],
                lease_container=values["COSMOS_LEASE_CONTAINER"],
                projection_container=(
                    self.subscriber_settings()["PROJECTION_CONTAINER"]
                    if self.with_subscriber else None
                ),
                verify_tls=self.cosmos.verify_tls,
            )
            self.settings_file = self.workdir / "local.settings.json"
            write_settings(self.settings_file, values)
            if self.with_runner:
                self.start_runner()
            if self.with_subscriber:
                self.start_subscriber()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every part at once; each is killed if it has not exited within 2 s."""
        stop_all([("runner", self.stop_runner), ("subscriber", self.stop_subscriber),
                  ("servicebus", self.stop_servicebus),
                  ("azurite", self._stop_azurite), ("cosmos", self._stop_cosmos)])

    def pids(self) -> list[tuple[str, int]]:
        parts: list[tuple[str, int]] = [
            (name, part.process.pid)
            for name, part in (("cosmos", self.cosmos), ("servicebus", self.servicebus),
                               ("runner", self.runner), ("subscriber", self.subscriber))
            if part is not None
        ]
        if self.azurite is not None:
            parts.append(("azurite", self.azurite.pid))
        return parts

    def dead_part(self) -> tuple[str, int | None] | None:
        """The first part whose process has exited, with its exit code."""
        for name, part in (("cosmos", self.cosmos), ("servicebus", self.servicebus),
                           ("runner", self.runner), ("subscriber", self.subscriber)):
            if part is not None and part.process.poll() is not None:
                return name, part.process.returncode
        if self.azurite is not None and self.azurite.poll() is not None:
            return "azurite", self.azurite.returncode
        return None

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- parts, for fault injection ----------------------------------------------------------

    def start_servicebus(self) -> ServiceBusEndpoint:
        port = self.servicebus.port if self.servicebus else self.ports.servicebus
        self.servicebus = start_servicebus(
            port=port, log_path=self.workdir / "servicebus.log",
            duplicate_window_seconds=self.duplicate_window_seconds,
            settle_delay_ms=self.servicebus_settle_delay_ms,
            state_file=self.state_dir / "servicebus.state" if self.state_dir else None,
            max_message_size=self.servicebus_max_message_size,
        )
        self.ports.servicebus = self.servicebus.port
        return self.servicebus

    def stop_servicebus(self) -> None:
        if self.servicebus is not None:
            self.servicebus.stop(timeout=STOP_TIMEOUT)

    def start_runner(self, **overrides: str) -> RunningRunner:
        assert self.settings_file is not None
        port = self.runner.port if self.runner else self.ports.runner
        self.runner = start_runner(
            app_dir=ROOT, settings_file=self.settings_file, port=port,
            # Passed explicitly so they win over anything inherited from the environment.
            settings={**self.settings(), **overrides},
            log_path=self.workdir / "runner.log",
        )
        self.ports.runner = self.runner.port
        return self.runner

    def stop_runner(self) -> None:
        if self.runner is not None:
            self.runner.stop(timeout=STOP_TIMEOUT)

    def start_subscriber(self, **overrides: str) -> RunningRunner:
        """The subscriber app in a runner of its own (the host runs one app per instance)."""
        port = self.subscriber.port if self.subscriber else self.ports.subscriber
        self.subscriber = start_runner(
            app_dir=SUBSCRIBER_DIR, port=port,
            settings={**self.subscriber_settings(), **overrides},
            log_path=self.workdir / "subscriber.log",
        )
        self.ports.subscriber = self.subscriber.port
        return self.subscriber

    def stop_subscriber(self) -> None:
        if self.subscriber is not None:
            self.subscriber.stop(timeout=STOP_TIMEOUT)

    def kill_runner(self) -> None:
        if self.runner is not None:
            self.runner.kill()

    def _stop_cosmos(self) -> None:
        if self.cosmos is not None:
            self.cosmos.stop(timeout=STOP_TIMEOUT)

    def _start_azurite(self) -> None:
        exe = NODE_BIN / "azurite"
        if not exe.exists():
            raise RuntimeError("azurite is not installed: run `npm ci --prefix emulators`")
        blob, queue, table = (p or free_port() for p in self.ports.azurite)
        self.ports.azurite = (blob, queue, table)
        data = self.workdir / "azurite"
        data.mkdir(exist_ok=True)
        log = (self.workdir / "azurite.log").open("ab")
        self.azurite = subprocess.Popen(
            [str(exe), "--silent", "--skipApiVersionCheck", "--loose", "--location", str(data),
             "--blobHost", "127.0.0.1", "--blobPort", str(blob),
             "--queueHost", "127.0.0.1", "--queuePort", str(queue),
             "--tableHost", "127.0.0.1", "--tablePort", str(table)],
            stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while not port_in_use(blob):
            if self.azurite.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"azurite did not start; see {self.workdir / 'azurite.log'}")
            time.sleep(0.1)

    def _stop_azurite(self) -> None:
        if self.azurite is not None and self.azurite.poll() is None:
            # Azurite finishes in-flight work on the first SIGINT/SIGTERM but keeps running
            # until a second one; it writes its data (--location) as it goes, so a kill
            # after the grace period loses nothing.
            for grace in (0.3, STOP_TIMEOUT):
                self.azurite.send_signal(signal.SIGINT)
                with suppress(subprocess.TimeoutExpired):
                    self.azurite.wait(grace)
                    return
            self.azurite.kill()
            self.azurite.wait(STOP_TIMEOUT)

    # -- settings ----------------------------------------------------------------------------

    def settings(self) -> dict[str, str]:
        """The sample's values with this stack's real endpoints."""
        values: dict[str, str] = json.loads(SAMPLE.read_text())["Values"]
        assert self.cosmos is not None
        values["CosmosDBConnection"] = self.cosmos.connection_string
        values["COSMOS_VERIFY_TLS"] = "true" if self.cosmos.verify_tls else "false"
        if self.servicebus is not None:
            values["ServiceBusConnection"] = self.servicebus.connection_string
        if self.with_azurite:
            blob, queue, table = self.ports.azurite
            values["AzureWebJobsStorage"] = azurite_connection_string(blob, queue, table)
        values.update(self.settings_overrides)
        return values

    def subscriber_settings(self) -> dict[str, str]:
        """The subscriber sample's values with this stack's real endpoints."""
        values: dict[str, str] = json.loads(SUBSCRIBER_SAMPLE.read_text())["Values"]
        main = self.settings()
        for name in ("CosmosDBConnection", "COSMOS_VERIFY_TLS", "ServiceBusConnection",
                     "AzureWebJobsStorage", "COSMOS_DATABASE", "SERVICEBUS_TOPIC"):
            if name in main:
                values[name] = main[name]
        if OTEL_ENV_VAR in main:
            values[OTEL_ENV_VAR] = main[OTEL_ENV_VAR]
        values.update(self.subscriber_overrides)
        return values

    @property
    def api_url(self) -> str:
        assert self.runner is not None
        return self.runner.url


def azurite_connection_string(blob: int, queue: int, table: int) -> str:
    if (blob, queue, table) == (10000, 10001, 10002):
        return "UseDevelopmentStorage=true"
    account = "devstoreaccount1"
    key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    return (f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};"
            f"BlobEndpoint=http://127.0.0.1:{blob}/{account};"
            f"QueueEndpoint=http://127.0.0.1:{queue}/{account};"
            f"TableEndpoint=http://127.0.0.1:{table}/{account};")


def write_settings(path: Path, values: Mapping[str, str]) -> None:
    sample = json.loads(SAMPLE.read_text())
    sample["Values"] = dict(values)
    path.write_text(json.dumps(sample, indent=2) + "\n")


# -- `make run` ---------------------------------------------------------------------------------

PIDFILE = ROOT / ".stack" / "pids.json"
EXAMPLE = json.dumps({"firstName": "Ada", "lastName": "Lovelace", "email": "ada@example.com",
                      "companyName": "Engines"}, separators=(",", ":"))


@dataclass(frozen=True)
class OwnProcess:
    """A process this stack started, recorded so that a later `make run` can tell whether
    it still runs — by PID *and* kernel start time *and* command line, so a reused PID never
    passes for one of ours."""

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


def running_stack(pidfile: Path) -> list[OwnProcess]:
    """The processes of a stack recorded in ``pidfile`` that still run (never signalled)."""
    try:
        recorded = json.loads(pidfile.read_text())
        procs = [OwnProcess(**entry) for entry in recorded]
    except (OSError, ValueError, TypeError):
        return []
    return [p for p in procs if p.alive()]


def stop_all(parts: list[tuple[str, Callable[[], None]]]) -> None:
    """Stop the parts at once (in parallel); each kills its process if it lingers."""
    threads = [threading.Thread(target=_quietly, args=(stop,), name=f"stop-{name}")
               for name, stop in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _quietly(stop: Callable[[], None]) -> None:
    with suppress(Exception):
        stop()


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("azure").setLevel(logging.WARNING)  # no per-request SDK HTTP logging
    running = running_stack(PIDFILE)
    if running:
        listed = ", ".join(f"{p.name} (pid {p.pid})" for p in running)
        print(f"a local stack is already running from this checkout: {listed}.\n"
              "Stop it first (Ctrl-C in its terminal); it was left untouched.", file=sys.stderr)
        return 1
    PIDFILE.unlink(missing_ok=True)  # stale: none of its processes runs any more
    ports = Ports()
    busy = [p for p in (ports.cosmos, ports.servicebus, ports.runner, ports.subscriber,
                        *ports.azurite)
            if port_in_use(p)]
    if busy:
        print(f"ports already in use: {busy} (another local stack or emulator?); "
              "stop it first", file=sys.stderr)
        return 1
    workdir = ROOT / ".stack"
    # The worker exports telemetry as OTLP/JSON lines here (emulators/otel.py; `make status`).
    otel_dir = workdir / "otel"
    # `SERVICEBUS_MAX_MESSAGE_SIZE=1048576 make run`: a namespace with Premium's larger messages.
    size = os.environ.get("SERVICEBUS_MAX_MESSAGE_SIZE")
    if size is not None and not size.isdigit():
        print("SERVICEBUS_MAX_MESSAGE_SIZE must be a number of bytes", file=sys.stderr)
        return 1
    stack = Stack(workdir=workdir, ports=ports, with_azurite=True, with_subscriber=True,
                  state_dir=workdir / "state",
                  settings_overrides={OTEL_ENV_VAR: str(otel_dir)},
                  servicebus_max_message_size=int(size) if size else None)
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print("starting the local stack (Cosmos, Service Bus, Azurite, Functions runners for the "
          "contacts app and the subscriber)...",
          flush=True)
    stack.start()
    own = [OwnProcess.of(name, pid) for name, pid in stack.pids()]
    PIDFILE.write_text(json.dumps([p.__dict__ for p in own if p is not None]))
    assert stack.settings_file is not None
    shutil.copyfile(stack.settings_file, ROOT / "local.settings.json")
    api = stack.api_url
    print(f"""
  API          {api}   (OpenAPI: {api}/openapi.json, health: {api}/health)
  Cosmos DB    {stack.cosmos.endpoint if stack.cosmos else ''}  (well-known emulator key)
  Service Bus  amqp://127.0.0.1:{stack.ports.servicebus}  topic contact-events / all-events
  Subscriber   subscriber/ on port {stack.ports.subscriber}: contact-events / contact-projection
               -> Cosmos container contact-projections (log: .stack/subscriber.log)
  Azurite      blob/queue/table on {', '.join(map(str, stack.ports.azurite))}
  Settings     local.settings.json (generated; `func start` works against this stack)
  State        .stack/state (kept across restarts; `make reset` forgets it)
  Logs         .stack/*.log      Watch events: make tail
  Telemetry    .stack/otel/{{metrics,traces}}.jsonl (OTLP/JSON)   Summary: make status

  curl -s -X POST {api}/contacts -H 'content-type: application/json' \\
       -d '{EXAMPLE}'

Ctrl-C stops everything.""", flush=True)
    exit_code = 0
    try:
        while not stopping.is_set():
            dead = stack.dead_part()
            if dead is not None:
                name, code = dead
                print(f"{name} exited unexpectedly (exit code {code}); see .stack/{name}.log. "
                      "Stopping the stack.", file=sys.stderr, flush=True)
                exit_code = 1
                break
            stopping.wait(0.5)
    finally:
        started = time.monotonic()
        print("stopping...", flush=True)
        stack.stop()
        for name, pid in stack.pids():
            logger.info("%s (pid %s) stopped", name, pid)
        PIDFILE.unlink(missing_ok=True)
        print(f"stopped in {time.monotonic() - started:.1f} s.", flush=True)
    return exit_code
