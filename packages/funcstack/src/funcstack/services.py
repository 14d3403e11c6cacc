"""Launch the local stand-ins together: a Cosmos DB endpoint, a Service Bus endpoint (entities
from a given config file), Azurite, and local Functions hosts for given app folders and
settings, in one work folder, stopped together.

Generic: it knows no app. What to run (which apps, which settings, which entities) comes from
the caller; an app's own wiring builds on `LocalServices` (this repository's is in tools/).
Also here: free ports, and the identity of the processes a stack started, so a later run can
tell whether they still run without ever signalling a stranger.
"""

from __future__ import annotations

import errno
import functools
import logging
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from funcstack._activation import (
    LISTEN_FDS_ENV,
    Activation,
    activated_stopped,
    listen_fds,
    listened_on,
)
from funcstack._cache import SetupError, node_executable, node_modules
from funcstack._host_restarts import HostRestarts
from funcstack._own_processes import (
    OwnProcess,
    already_running,
    own_workdir,
    record_processes,
    running_stack,
)
from funcstack._processes import (
    KILLED_WAIT,
    OWN_PROCESS_GROUP,
    describe_exit,
    end_group,
    last_lines,
    node_server_environment,
    note,
    stop_child,
)
from funcstack.cosmos._launcher import CosmosEndpoint, CosmosStartError, start_cosmos
from funcstack.functions_host import _forkserver
from funcstack.functions_host._launcher import (
    HostOptions,
    RunnerStartError,
    RunningRunner,
    launch_host,
)
from funcstack.scaleout import RestartPolicy
from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus
from funcstack.starts import record_start

__all__ = [
    "AZURITE_ACCOUNT",
    "AZURITE_KEY",
    "STOP_TIMEOUT",
    "Azurite",
    "LocalServices",
    "OwnProcess",
    "PartStartError",
    "already_running",
    "azurite_connection_string",
    "describe_exit",
    "free_port",
    "last_lines",
    "own_workdir",
    "port_in_use",
    "record_processes",
    "running_stack",
    "start_azurite",
    "stop_all",
]

logger = logging.getLogger("funcstack")

#: Seconds each part gets to exit on its own before it is killed (Ctrl-C within 3 s).
STOP_TIMEOUT = 1.5
#: Azurite's well-known development account and key (public, in Azurite's documentation).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


#: Run before Azurite's main script (`node --require`): see the file.
_AZURITE_PRELOAD = Path(__file__).parent / "node" / "azurite_preload.js"
#: Run before a Node stand-in started at its first connection: see the file.
_LISTEN_FDS = Path(__file__).parent / "node" / "listen_fds.js"
#: Run before every Node stand-in: it ends with the process that started it (see the file).
_OWNED = Path(__file__).parent / "node" / "owned.js"

#: Where `free_port` looks first: above the ports this stack knows (Azurite's 10000-10002).
_FREE_PORTS_FROM = 10100


def free_port() -> int:
    """A port free now, for a server that binds it a moment later: one below the kernel's
    ephemeral range when there is room, so that no outgoing connection's local port (which
    comes from that range) can take it in between; else one the kernel gives."""
    below = _ephemeral_ports()[0]
    for _ in range(64):
        if below - 1 <= _FREE_PORTS_FROM:
            break
        port = random.randint(_FREE_PORTS_FROM, below - 1)  # not a secret
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@functools.cache
def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux; elsewhere the IANA
    range, 49152-65535)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49152, 65535


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# -- Azurite ------------------------------------------------------------------------------------


def azurite_connection_string(blob: int, queue: int, table: int) -> str:
    if (blob, queue, table) == (10000, 10001, 10002):
        return "UseDevelopmentStorage=true"
    account = AZURITE_ACCOUNT
    return (
        f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{blob}/{account};"
        f"QueueEndpoint=http://127.0.0.1:{queue}/{account};"
        f"TableEndpoint=http://127.0.0.1:{table}/{account};"
    )


@dataclass
class Azurite:
    ports: tuple[int, int, int]
    #: None until it starts, when started at its first connection (``lazy``).
    process: subprocess.Popen[bytes] | None = None
    _activation: Activation | None = field(default=None, repr=False)
    #: Started by another process, which stops it (``funcstack.handoff``): ``process`` is None
    #: here, and it is stopped when its blob port no longer listens.
    handed: bool = False

    @property
    def connection_string(self) -> str:
        return azurite_connection_string(*self.ports)

    @property
    def stopped(self) -> bool:
        """Stopped (``stop()``), or its process ended; not while it waits for a first
        connection."""
        if self.handed:
            return not listened_on("127.0.0.1", self.ports[0])
        return activated_stopped(self.process, self._activation)

    def started(self, timeout: float = 30.0) -> subprocess.Popen[bytes]:
        """Its process, started now if it waited for a first connection, once it listens on
        its three ports."""
        if self._activation is not None:
            self._activation.fire()
        deadline = time.monotonic() + timeout
        while self.process is None or not all(port_in_use(p) for p in self.ports):
            if time.monotonic() > deadline or (
                self.process is not None and self.process.poll() is not None
            ):
                raise RuntimeError("azurite did not start")
            time.sleep(0.05)
        return self.process

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        if self._activation is not None:
            self._activation.close()
        if self.process is None or self.process.poll() is not None:
            return
        # Azurite finishes in-flight work on the first SIGINT/SIGTERM but keeps running until a
        # second one; it writes its data (--location) as it goes, so a kill after the grace
        # period loses nothing.
        for grace in (0.3, timeout):
            self.process.send_signal(signal.SIGINT)
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
                break
        else:
            self.process.kill()
            self.process.wait(max(timeout, KILLED_WAIT))
        end_group(self.process.pid)


#: How many times a lazy Azurite's free ports are chosen when one was taken before its bind.
_PORT_CHOICES = 5


def start_azurite(
    data_dir: Path,
    log_path: Path,
    ports: tuple[int, int, int] = (0, 0, 0),
    *,
    lazy: bool = False,
) -> Azurite:
    """Azurite (npm) for blob, queue and table on ``ports`` (0: a free port each). ``lazy``:
    the ports listen at once and Azurite starts at the first connection to any of them
    (``funcstack._activation``); until then ``process`` is None (``started()`` starts it)."""
    node = node_executable()
    exe = node_modules() / ".bin" / "azurite"  # npm ci into funcstack's cache on first use
    if not exe.exists():
        raise RuntimeError(f"{exe} is missing: remove {exe.parents[1]} to have it installed again")
    data_dir.mkdir(parents=True, exist_ok=True)

    def chosen() -> tuple[int, int, int]:
        blob, queue, table = (p or free_port() for p in ports)
        return blob, queue, table

    if lazy:
        # a free port chosen here can be taken by another process before it is bound: chosen
        # again then (a port given is not)
        for attempt in range(1, _PORT_CHOICES + 1):
            bound = chosen()
            command = _azurite_command(node, exe, data_dir, bound)
            try:
                return _lazy_azurite(command, log_path, data_dir, bound)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or all(ports) or attempt == _PORT_CHOICES:
                    raise
    blob, queue, table = chosen()
    command = _azurite_command(node, exe, data_dir, (blob, queue, table))
    process = _launch(command, log_path, data_dir)
    deadline = time.monotonic() + 30
    try:
        # Azurite listens on blob, then queue, then table (azurite.js starts them one after
        # the other): ready is all three, or a queue or table client's first call is refused
        # and waits out the SDK's retries.
        while not all(port_in_use(port) for port in (blob, queue, table)):
            if process.poll() is not None or time.monotonic() > deadline:
                code = process.poll()
                lines = last_lines(log_path)
                raise RuntimeError(
                    f"azurite did not start ({describe_exit(code)})"
                    + (f"; last lines of {log_path}: " + " | ".join(lines) if lines else "")
                )
            time.sleep(0.1)
    except BaseException:  # not started, or interrupted: it does not outlive its start
        stop_child(process)
        raise
    note(
        log_path,
        f"azurite listening on blob {blob}, queue {queue}, table {table} (pid {process.pid})",
    )
    return Azurite(process=process, ports=(blob, queue, table))


def _azurite_command(
    node: str, exe: Path, data_dir: Path, ports: tuple[int, int, int]
) -> list[str]:
    blob, queue, table = ports
    return [
        node,
        # Azurite loads the Application Insights SDK at start even with telemetry off (0.85 s of
        # its 1.4 s of CPU): the preload has it load at its first use instead.
        "--require",
        str(_AZURITE_PRELOAD),
        "--require",
        str(_OWNED),
        str(exe.resolve()),
        "--silent",
        "--skipApiVersionCheck",
        "--loose",
        # Azurite sends usage data to Application Insights unless told not to; a local stand-in
        # keeps to the machine (and this network does not reach it anyway).
        "--disableTelemetry",
        "--location",
        str(data_dir),
        *("--blobHost", "127.0.0.1", "--blobPort", str(blob)),
        *("--queueHost", "127.0.0.1", "--queuePort", str(queue)),
        *("--tableHost", "127.0.0.1", "--tablePort", str(table)),
    ]


def _lazy_azurite(
    command: list[str], log_path: Path, data_dir: Path, ports: tuple[int, int, int]
) -> Azurite:
    """Azurite listening on ``ports`` now, started at the first connection to any of them."""
    azurite = Azurite(ports=ports)

    def launch(sockets: list[socket.socket]) -> None:
        azurite.process = _launch(
            [command[0], "--require", str(_LISTEN_FDS), *command[1:]],
            log_path,
            data_dir,
            env={LISTEN_FDS_ENV: listen_fds(sockets)},
            pass_fds=tuple(s.fileno() for s in sockets),
        )
        note(log_path, f"azurite started at a first connection (pid {azurite.process.pid})")

    azurite._activation = Activation(ports, launch, name="azurite")
    blob, queue, table = ports
    note(
        log_path,
        f"azurite listening on blob {blob}, queue {queue}, table {table}; "
        "it starts at the first connection",
    )
    return azurite


def _launch(
    command: list[str],
    log_path: Path,
    data_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=node_server_environment(**(env or {})),
            pass_fds=pass_fds,
            **OWN_PROCESS_GROUP,
        )
    record_start("azurite", process.pid, identity=data_dir)
    return process


# -- the parts together -------------------------------------------------------------------------


class PartStartError(RuntimeError):
    """A part of the stack did not start: which, and why in a line or two (its own reason, or
    how it exited and the last lines of its log)."""

    def __init__(self, part: str, detail: str) -> None:
        super().__init__(f"{part} did not start: {detail}")
        self.part = part
        self.detail = detail


@dataclass
class LocalServices:
    """The endpoints and Functions hosts started in ``workdir`` (a ``<part>.log`` each).

    Each ``run_*`` starts its part, or starts it again on the port it had (a restart after
    ``stop_part``). Hosts are named by the caller; ``stop()`` stops the hosts, then the
    endpoints. A part asked for port 0 gets ``free_port()``'s, below the kernel's ephemeral
    range: bound by the kernel's choice, it would sit in that range, and while the part is
    stopped an outgoing connection could take it as its local port, so that the restart found
    it in use.
    """

    workdir: Path
    #: Where the endpoints keep state across restarts (None: in memory only, as in tests).
    state_dir: Path | None = None
    cosmos: CosmosEndpoint | None = None
    servicebus: ServiceBusEndpoint | None = None
    azurite: Azurite | None = None
    hosts: dict[str, RunningRunner] = field(default_factory=dict)
    #: A host run alone (``run_host``, ``LocalStack.host_app`` without instances) that exits is
    #: started again on its port under this policy, as Azure restarts a host that dies
    #: (``_host_restarts``); None: it stays down, and ``dead_part`` reports it.
    #: ``on_host_event``: a line for each exit, restart and give-up (else logged).
    host_restart: RestartPolicy | None = None
    on_host_event: Callable[[str], None] | None = field(default=None, repr=False)
    _restarts: HostRestarts | None = field(default=None, init=False, repr=False)

    def _state(self, name: str) -> Path | None:
        return self.state_dir / name if self.state_dir else None

    def log_path(self, name: str) -> Path:
        """The log of a part (`<workdir>/<name>.log`)."""
        return self.workdir / f"{name}.log"

    def run_cosmos(self, port: int = 0) -> CosmosEndpoint:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with _starting("cosmos"):
            # at its first connection: a stack whose apps use no Cosmos DB and declare none of
            # its resources never starts it
            self.cosmos = start_cosmos(
                port=self.cosmos.port if self.cosmos else port or free_port(),
                log_path=self.log_path("cosmos"),
                state_dir=self._state("cosmos"),
                lazy=True,
            )
        return self.cosmos

    def run_servicebus(
        self,
        port: int = 0,
        *,
        config: Path | None = None,
        duplicate_window_seconds: float | None = None,
        settle_delay_ms: float = 0.0,
        max_message_size: int | None = None,
    ) -> ServiceBusEndpoint:
        """The Service Bus endpoint with the entities of ``config`` (the official emulator's
        Config.json shape; None: an empty namespace)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with _starting("servicebus"):
            # at its first connection: a stack whose apps use no Service Bus never starts it
            self.servicebus = start_servicebus(
                port=self.servicebus.port if self.servicebus else port or free_port(),
                config=config,
                log_path=self.log_path("servicebus"),
                duplicate_window_seconds=duplicate_window_seconds,
                settle_delay_ms=settle_delay_ms,
                state_file=self._state("servicebus.state"),
                max_message_size=max_message_size,
                lazy=True,
            )
        return self.servicebus

    def run_azurite(self, ports: tuple[int, int, int] = (0, 0, 0)) -> Azurite:
        """Azurite on ``ports``, listening at once and started at its first connection (a
        stack whose apps use no storage never starts it: ``start_azurite(lazy=True)``)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with _starting("azurite"):
            self.azurite = start_azurite(
                self.workdir / "azurite",
                self.log_path("azurite"),
                self.azurite.ports if self.azurite else ports,
                lazy=True,
            )
        return self.azurite

    def run_host(
        self,
        name: str,
        app_dir: Path,
        settings: Mapping[str, str],
        port: int = 0,
        settings_file: Path | None = None,
        *,
        python: str | None = None,
        extra_import_paths: Sequence[str | Path] = (),
        enforce_keys: bool = False,
        group: str | None = None,
        on_console: Callable[[Mapping[str, Any]], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> RunningRunner:
        """A Functions host for the app in ``app_dir`` (one app per host, as in Azure);
        ``settings`` are given to it and win over ``settings_file`` (whose values the rest of
        the environment wins over, as with Core Tools). The app's folder is the only entry on
        its worker's import path, unless ``extra_import_paths`` opts into more; ``python`` is
        the worker's interpreter (default: this one). ``enforce_keys``: keys required by auth
        level, as in Azure (the result's ``function_key``/``master_key``). ``group``: the host
        serves that function group only (``http``, ``function:<name>``). ``on_console``: the
        terminal's records (``start_runner``). ``cancel``: set, it gives up a start still
        waiting for the host (``start_runner``). ``start_host`` with a ``HostOptions``."""
        options = HostOptions(
            Path(app_dir),
            dict(settings),
            settings_file,
            python=python,
            extra_import_paths=tuple(Path(p) for p in extra_import_paths),
            enforce_keys=enforce_keys,
            group=group,
            on_console=on_console,
        )
        runner = self.start_host(name, options, port=port, cancel=cancel)
        self.supervise(name)
        return runner

    def supervise(self, name: str) -> None:
        """Host ``name``, run alone, restarted when it exits (``host_restart``; nothing
        without one)."""
        if self.host_restart is None:
            return
        if self._restarts is None:
            self._restarts = HostRestarts(self, self.host_restart, self.on_host_event)
        self._restarts.watch(name)

    def start_host(
        self,
        name: str,
        options: HostOptions,
        *,
        port: int = 0,
        cancel: threading.Event | None = None,
    ) -> RunningRunner:
        """The host ``options`` describe, named ``name`` (its log ``<name>.log``), on ``port``
        (0: a free one), or, started again, on the port it had; ready when this returns."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        previous = self.hosts.get(name)
        _forkserver.hold(self)  # the process's fork server runs until its last stack stops
        with _starting(name):
            self.hosts[name] = launch_host(
                options,
                port=previous.port if previous else port or free_port(),
                log_path=self.log_path(name),
                cancel=cancel,
            )
        return self.hosts[name]

    def _parts(
        self,
    ) -> list[tuple[str, CosmosEndpoint | ServiceBusEndpoint | Azurite | RunningRunner]]:
        fixed = [
            ("cosmos", self.cosmos),
            ("servicebus", self.servicebus),
            ("azurite", self.azurite),
        ]
        return [*((n, p) for n, p in fixed if p is not None), *self.hosts.items()]

    def stop_part(self, name: str) -> None:
        if self._restarts is not None:  # stopped on purpose: not restarted
            self._restarts.forget(name)
        for part_name, part in self._parts():
            if part_name == name:
                part.stop(timeout=STOP_TIMEOUT)

    def kill_host(self, name: str) -> None:
        if name in self.hosts:
            self.hosts[name].kill()

    def stop(self) -> None:
        """Stop the hosts at once, then the endpoints at once; each part is killed if it has
        not exited within 1.5 s, and what is left of its process group with it (a host's
        language worker), waited for until it has ended. The hosts first, while the endpoints
        still answer: a Cosmos DB trigger releases its leases as it stops (the Azure host does
        at shutdown), which it cannot do once Cosmos DB is gone; its next start would wait out
        their expiry. Last, the fork server its hosts were forked from ends when no other stack
        of this process holds it (``functions_host._forkserver.release``)."""
        restarts, self._restarts = self._restarts, None
        if restarts is not None:  # first: the hosts stopped are not taken for crashed ones
            restarts.stop()
        hosts = set(self.hosts)
        for group in (
            [(name, part) for name, part in self._parts() if name in hosts],
            [(name, part) for name, part in self._parts() if name not in hosts],
        ):
            stop_all(
                [(name, functools.partial(part.stop, timeout=STOP_TIMEOUT)) for name, part in group]
            )
        _forkserver.release(self)

    def pids(self) -> list[tuple[str, int]]:
        """Each part's process (not a part waiting for its first connection)."""
        return [
            (name, part.process.pid) for name, part in self._parts() if part.process is not None
        ]

    def dead_part(self) -> tuple[str, int | None] | None:
        """The first part whose process has exited, with its exit code (a host being restarted
        is not; one given up after failures at start is)."""
        restarted = self._restarted()
        for name, part in self._parts():
            process = part.process  # None: a part waiting for its first connection
            if name not in restarted and process is not None and process.poll() is not None:
                return name, process.returncode
        return None

    def _restarted(self) -> set[str]:
        """The parts restarted when they exit: the hosts under ``host_restart``."""
        restarts = self._restarts
        return {name for name in self.hosts if restarts is not None and restarts.watched(name)}

    def ended(self, name: str, code: int | None) -> str:
        """How a dead part ended, for the console: ``exited unexpectedly (killed by SIGKILL)``,
        or, a host given up, ``failed at start 3 times in a row (last: ...)``."""
        given_up = self._restarts.given_up(name) if self._restarts is not None else None
        return given_up or f"exited unexpectedly ({describe_exit(code)})"

    def record_exit(self, name: str, code: int | None) -> list[str]:
        """Note in a part's own log that its process exited unexpectedly (a process that dies
        of a signal writes nothing itself; a host given up is noted by its supervisor); the last
        lines of that log, for the console."""
        pid = next((pid for part, pid in self.pids() if part == name), None)
        if self._restarts is None or self._restarts.given_up(name) is None:
            note(
                self.log_path(name),
                f"{name} (pid {pid}) exited unexpectedly: {describe_exit(code)}",
            )
        return last_lines(self.log_path(name))


@contextmanager
def _starting(part: str) -> Iterator[None]:
    """A part's start failure as PartStartError naming the part (interruptions pass)."""
    try:
        yield
    except PartStartError:
        raise
    except (RunnerStartError, CosmosStartError, SetupError, RuntimeError, OSError) as exc:
        raise PartStartError(part, str(exc)) from exc


def stop_all(parts: list[tuple[str, Callable[[], None]]]) -> None:
    """Stop the parts at once (in parallel); each kills its process if it lingers. A stop that
    fails is logged, naming its part; the others go on."""
    threads = [
        threading.Thread(target=_logged, args=(name, stop), name=f"stop-{name}")
        for name, stop in parts
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _logged(name: str, stop: Callable[[], None]) -> None:
    try:
        stop()
    except Exception as exc:
        logger.warning("%s did not stop cleanly: %s: %s", name, type(exc).__name__, exc)
