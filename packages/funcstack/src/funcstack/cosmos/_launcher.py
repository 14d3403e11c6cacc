"""Start / stop the local Cosmos DB endpoint (``node funcstack/cosmos/server.js``).

The endpoint is the npm package ``@vercel/cosmosdb-server`` 1.0.1 extended at start-up
(atomic batch, the change feed in both modes, TTL, 404/409/412, physical partitions, their
splits and merges, keep-alive); the unmodified ``azure-cosmos`` SDK talks to it over HTTPS,
verifying its certificate: one signed by funcstack's local certificate authority (``_tls.py``),
trusted through the environment funcstack gives what it starts (``LocalTls.environment()``) or
``CosmosEndpoint.client_options()``. Its address is ``https://[::ffff:127.0.0.1]:<port>/``
(127.0.0.1, IPv4-mapped), which azure-cosmos verifies where it would not verify 127.0.0.1.
``CosmosEndpoint`` also reaches its local-only routes (fault injection, a container's
physical partitions, a live split or merge: ``_control.py``).
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from funcstack._activation import (
    LISTEN_FDS_ENV,
    Activation,
    activated_stopped,
    listen_fds,
    listened_on,
)
from funcstack._cache import SetupError, node_executable, node_modules
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
from funcstack.cosmos._control import (
    PhysicalPartition,
    control,
    merge_partitions,
    physical_partitions,
    split_partition,
)
from funcstack.cosmos._tls import ADDRESS, LocalTls, local_tls
from funcstack.starts import record_start

logger = logging.getLogger(__name__)

COSMOS_DIR = Path(__file__).resolve().parent
SERVER_JS = COSMOS_DIR / "server.js"
#: Has a Node server started at its first connection listen on the sockets it was handed.
LISTEN_FDS_JS = COSMOS_DIR.parent / "node" / "listen_fds.js"
#: Has a Node stand-in end with the process that started it (funcstack/_processes.py).
OWNED_JS = COSMOS_DIR.parent / "node" / "owned.js"

#: The Cosmos DB emulator's well-known key (the local endpoint accepts any key).
EMULATOR_KEY = (
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU9DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
)


#: Node's heap limit for the endpoint: its default depends on the machine's memory (4 GB on
#: one of 24 GB, less on smaller ones), and a million kept documents of ~1 KB need about 2 GB.
HEAP_MB = 4096


class CosmosStartError(RuntimeError):
    """The local endpoint could not be started."""


@dataclass
class _LazyStart:
    """An endpoint's start at its first connection (``start_cosmos(lazy=True)``)."""

    activation: Activation | None = None
    process: subprocess.Popen[bytes] | None = None
    #: Set once the process wrote its ready line.
    ready: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class CosmosEndpoint:
    """A running local endpoint process. Without a state directory, state is in memory only:
    ``stop()`` loses it.

    ``verify_tls``: whether a client's default trust store verifies its certificate (False:
    it is signed by funcstack's local authority, ``tls``, which a process trusts through
    ``tls.environment()``, an azure-cosmos client through ``client_options()``, any other
    client through ``tls.ca_file``)."""

    endpoint: str
    key: str
    verify_tls: bool
    #: Its process, when started at once (``start_cosmos``); None when started at its first
    #: connection (``lazy``: ``process``) or by another process (``funcstack.handoff``).
    own_process: subprocess.Popen[bytes] | None
    port: int = 0
    _log: IO[bytes] | None = field(default=None, repr=False, compare=False)
    #: funcstack's local certificate authority and the endpoint's certificate (None: plain
    #: HTTP, or a certificate given to ``start_cosmos``).
    tls: LocalTls | None = None
    #: The start at a first connection (``lazy``) and the process it started.
    _lazy: _LazyStart | None = field(default=None, repr=False, compare=False)
    #: Started by another process, which stops it (``funcstack.handoff``): no process here,
    #: and it is stopped when its port no longer listens.
    handed: bool = False

    @property
    def connection_string(self) -> str:
        return f"AccountEndpoint={self.endpoint};AccountKey={self.key};"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """Its process; None until it starts when started at its first connection (``lazy``),
        and when another process started it (``funcstack.handoff``)."""
        if self._lazy is not None:
            return self._lazy.process
        return self.own_process

    @property
    def stopped(self) -> bool:
        """Stopped (``stop()``), or its process ended; not while it waits for a first
        connection."""
        if self.handed:
            return not listened_on("127.0.0.1", self.port)
        if self._lazy is not None:
            return activated_stopped(self._lazy.process, self._lazy.activation)
        return self.own_process is None or self.own_process.poll() is not None

    def started(self, timeout: float = 30.0) -> subprocess.Popen[bytes]:
        """Its process, started now if it waited for a first connection (``lazy``), once it
        answers; RuntimeError when another process started it (``funcstack.handoff``)."""
        if self._lazy is not None:
            if self._lazy.activation is not None:
                self._lazy.activation.fire()
            deadline = time.monotonic() + timeout
            while not self._lazy.ready.wait(0.05):
                process = self._lazy.process
                if process is None or process.poll() is not None or time.monotonic() > deadline:
                    raise CosmosStartError(
                        "the cosmos endpoint did not start: "
                        f"{describe_exit(process.poll() if process else None)}"
                    )
        process = self.process
        if process is None:
            raise RuntimeError("this Cosmos DB endpoint's process is another process's")
        return process

    def client_options(self) -> dict[str, Any]:
        """The keyword arguments that make an azure-cosmos client (sync or aio) verify the
        endpoint's certificate in a process whose environment does not trust funcstack's
        authority (``tls.environment()`` is that trust: what funcstack gives the hosts and
        processes it starts): ``CosmosClient(endpoint.endpoint, endpoint.key,
        **endpoint.client_options())``. An ``ssl_config`` naming the authority (it verifies
        the endpoint under any of its names, 127.0.0.1 and localhost too; the aio client then
        opens a connection per request: ``_tls.py``); ``connection_verify=verify_tls`` when
        the endpoint has no certificate of funcstack's."""
        if self.tls is None:
            return {"connection_verify": self.verify_tls}
        return self.tls.client_options()

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate (SIGTERM), wait, kill on timeout (and wait for the kill, up to
        ``KILLED_WAIT``); what is left of its process group too. Idempotent. Not one another process
        started (``funcstack.handoff``): that one stops it."""
        if self._lazy is not None and self._lazy.activation is not None:
            self._lazy.activation.close()
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                logger.warning("cosmos endpoint pid %s did not stop, killing", process.pid)
                process.kill()
                process.wait(timeout=max(timeout, KILLED_WAIT))
        end_group(process.pid)
        if process.stdout is not None and not process.stdout.closed:
            process.stdout.close()
        if self._log is not None and not self._log.closed:
            self._log.close()

    def inject_fault(
        self,
        status_code: int = 429,
        *,
        count: int = 1,
        retry_after_ms: int = 10,
        methods: list[str] | None = None,
        database: str | None = None,
        container: str | None = None,
    ) -> None:
        """Make the next ``count`` document requests fail with ``status_code`` (local only).

        429 carries ``x-ms-retry-after-ms`` like the service; ``methods`` limits the fault
        to those HTTP methods (e.g. ``["POST"]`` for creates, upserts, batches and queries).
        ``database`` (and ``container``, one of its containers) limits it to the requests on
        that database (that container): another database's requests pass and leave its count
        as it is, so two tests on one endpoint each fault their own. None: every request.
        """
        body: dict[str, object] = {
            "statusCode": status_code,
            "count": count,
            "retryAfterMs": retry_after_ms,
        }
        if methods is not None:
            body["operations"] = methods
        body |= _scope(database, container)
        self._control("POST", body)

    def clear_faults(self, *, database: str | None = None, container: str | None = None) -> None:
        """Clear the pending faults: every one, or (``database``, ``container``) those
        injected with that scope only."""
        scope = _scope(database, container)
        self._control("DELETE", scope or None)

    def _control(self, method: str, body: dict[str, object] | None) -> None:
        control(self.endpoint, method, "_emulators/faults", body)

    def physical_partitions(self, database: str, container: str) -> list[PhysicalPartition]:
        """The live physical partitions (partition key ranges) of a container, in EPK order,
        with how many documents each holds."""
        return physical_partitions(self.endpoint, database, container)

    def split(self, database: str, container: str, range_id: str | None = None) -> list[str]:
        """Split a physical partition of a container now, as the service does on its own:
        ``range_id`` (None: the one holding the most documents) is cut at the median EPK of
        its documents; returns the children's ids. Requests naming the parent answer 410 with
        sub-status 1002 from then on, and /pkranges lists the children with the parent in
        their ``parents``. CosmosControlError names a missing container or range."""
        return split_partition(self.endpoint, database, container, range_id)

    def merge(self, database: str, container: str, range_ids: list[str] | None = None) -> str:
        """Merge adjacent physical partitions of a container into one now, as Azure's merge
        does (``range_ids``: two or more adjacent ranges; None: the two adjacent ranges holding
        the fewest documents together); returns the merged range's id. Requests naming a
        merged range answer 410 with sub-status 1002 from then on, and /pkranges lists the
        merged range with them in its ``parents``; its LSN goes on from the highest of theirs.
        CosmosControlError names a missing container or range, or ranges not adjacent."""
        return merge_partitions(self.endpoint, database, container, range_ids)

    def stats(self, *, collect: bool = False, database: str | None = None) -> dict[str, Any]:
        """What the endpoint holds and how late its main thread runs (local only):
        ``memory`` (``rss``, its process's resident set, and ``heapUsed``, ``heapTotal``,
        ``external``, ``arrayBuffers``, its main thread's, in bytes, as Node's
        ``process.memoryUsage()``), ``documents`` (kept in every container) and
        ``eventLoop`` (``p50Ms``, ``p95Ms``, ``p99Ms``, ``maxMs``, ``samples``: how late the
        main thread ran a 1 ms timer since the last call, what a request arriving meanwhile
        waited; None at the first call, which starts measuring). With ``collect`` a full
        garbage collection runs first (it holds the endpoint for a moment: up to a second with
        a million documents), so the heap is what is kept. With ``database``, ``documents``
        counts that database's only (0 for one that does not exist)."""
        query: dict[str, str] = {"gc": "1"} if collect else {}
        if database is not None:
            query["database"] = database
        path = "_emulators/stats" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        answer: dict[str, Any] = control(self.endpoint, "GET", path)
        return answer

    def __enter__(self) -> CosmosEndpoint:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _scope(database: str | None, container: str | None) -> dict[str, object]:
    """The scope of a local-only control call (the database, and a container of it)."""
    if container is not None and database is None:
        raise ValueError("a container is named with its database")
    scope: dict[str, object] = {}
    if database is not None:
        scope["database"] = database
    if container is not None:
        scope["container"] = container
    return scope


#: The hosts azure-cosmos does not verify (it turns verification off for them, per request).
UNVERIFIED_HOSTS = frozenset({"127.0.0.1", "localhost"})


def _named(endpoint: str, host: str, port: int) -> str:
    """The address the endpoint is given as: ``https://[::ffff:127.0.0.1]:<port>/`` when it
    listens on 127.0.0.1 (or localhost), which azure-cosmos verifies (``_tls.py``); the one it
    listens on when that address cannot be reached (no IPv6 in this kernel), said in the log."""
    if host not in UNVERIFIED_HOSTS:
        return endpoint
    try:
        with socket.create_connection((ADDRESS, port), timeout=2.0):
            pass
    except OSError as exc:
        logger.warning(
            "the cosmos endpoint cannot be reached at [%s]:%s (%s): it is named %s, for which "
            "azure-cosmos turns TLS verification off (docs/cosmos.md, Certificate)",
            ADDRESS, port, exc, endpoint,
        )  # fmt: skip
        return endpoint
    return f"https://[{ADDRESS}]:{port}/"


def start_cosmos(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    log_path: Path | None = None,
    timeout: float = 30.0,
    tls: tuple[Path, Path] | None = None,
    extra_args: list[str] | None = None,
    state_dir: Path | None = None,
    state_fsync: bool = False,
    state_file: Path | None = None,
    lazy: bool = False,
) -> CosmosEndpoint:
    """Run the endpoint and wait for its ready line. ``port=0`` lets the OS pick a free port.

    ``lazy``: the port listens at once and the endpoint starts at the first connection
    (``funcstack._activation``; ``process`` is None until then, ``started()`` starts it): the
    connection waits in the port's backlog while it starts, about 0.3 s. A start that fails
    (a damaged journal) is said in its log, and its clients are refused.

    With ``state_dir`` the endpoint starts from the state kept there (when there is one) and
    writes each change to its journal before it answers, so an acknowledged write survives
    the process being killed; ``state_fsync`` also waits for the disk (fdatasync, shared by the
    answers waiting at once) before it answers, so it survives a power cut too. A state file
    of the earlier format beside the folder (``<state_dir>.json``) is converted and removed.
    ``state_file`` is the earlier name: ``state/cosmos.json`` means ``state_dir=state/cosmos``
    (and that file, if there, is converted). See docs/cosmos.md, "State across restarts"."""
    try:
        node = node_executable()
        modules = node_modules()  # npm ci into funcstack's cache on first use
    except SetupError as exc:
        raise CosmosStartError(str(exc)) from None
    cmd = [
        node,
        "--require",
        str(OWNED_JS),
        f"--max-old-space-size={HEAP_MB}",
        str(SERVER_JS),
        "--host",
        host,
        "--port",
        str(port),
        *(extra_args or []),
    ]
    if state_dir is None and state_file is not None:
        state_dir = state_file.with_suffix("") if state_file.suffix == ".json" else state_file
    local = _certificate(cmd, host, tls, extra_args)
    cmd += _state_options(state_dir, state_fsync)
    # server.js requires the npm package from funcstack's cache
    env = {"NODE_NO_WARNINGS": "1", "NODE_PATH": str(modules)}
    if lazy:
        scheme = "http" if local is None and tls is None else "https"
        identity = state_dir or port or None
        return _lazy_cosmos(cmd, host, port, log_path, env, local, scheme, identity)
    log: IO[bytes] | None = log_path.open("ab") if log_path is not None else None
    process = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=log if log is not None else subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        cwd=str(COSMOS_DIR),
        env=node_server_environment(**env),
        **OWN_PROCESS_GROUP,
    )
    record_start("cosmos", process.pid, identity=state_dir or port or None)
    ready = _await_ready(process, log, log_path, timeout)
    address = str(ready["endpoint"])
    endpoint = CosmosEndpoint(
        endpoint=_named(address, host, int(str(ready["port"]))) if local else address,
        key=EMULATOR_KEY,
        verify_tls=False,
        own_process=process,
        port=int(str(ready["port"])),
        _log=log,
        tls=local,
    )
    logger.info("cosmos endpoint ready at %s (pid %s)", endpoint.endpoint, process.pid)
    note(log_path, f"cosmos endpoint ready at {endpoint.endpoint} (pid {process.pid})")
    return endpoint


def _certificate(
    cmd: list[str], host: str, tls: tuple[Path, Path] | None, extra_args: list[str] | None
) -> LocalTls | None:
    """The certificate's options added to ``cmd``: the one given, or one of funcstack's local
    authority (returned) unless the endpoint is plain HTTP (``--no-ssl``)."""
    if tls is not None:
        cmd += ["--cert", str(tls[0]), "--key", str(tls[1])]
        return None
    if "--no-ssl" in (extra_args or []):
        return None
    local = local_tls([host])  # a certificate a client can trust and verify
    cmd += ["--cert", str(local.cert_file), "--key", str(local.key_file)]
    return local


def _state_options(state_dir: Path | None, state_fsync: bool) -> list[str]:
    if state_dir is None:
        if state_fsync:
            raise ValueError("state_fsync=True needs a state_dir to keep the state in")
        return []
    return ["--state-dir", str(state_dir), *(["--state-fsync"] if state_fsync else [])]


def _lazy_cosmos(
    cmd: list[str],
    host: str,
    port: int,
    log_path: Path | None,
    env: dict[str, str],
    local: LocalTls | None,
    scheme: str,
    identity: Path | int | None,
) -> CosmosEndpoint:
    """The endpoint of ``cmd`` listening on ``port`` (0: a free one) now, started at its first
    connection (``start_cosmos(lazy=True)``)."""
    lazy = _LazyStart()
    log: IO[bytes] | None = log_path.open("ab") if log_path is not None else None

    def launch(sockets: list[socket.socket]) -> None:
        [sock] = sockets
        bound = sock.getsockname()[1]
        at = cmd.index("--port")
        argv = [cmd[0], "--require", str(LISTEN_FDS_JS), *cmd[1 : at + 1], str(bound)]
        process = subprocess.Popen(
            [*argv, *cmd[at + 2 :]],
            stdout=subprocess.PIPE,
            stderr=log if log is not None else subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            cwd=str(COSMOS_DIR),
            env=node_server_environment(**env, **{LISTEN_FDS_ENV: listen_fds(sockets)}),
            pass_fds=(sock.fileno(),),
            **OWN_PROCESS_GROUP,
        )
        lazy.process = process
        record_start("cosmos", process.pid, identity=identity)
        threading.Thread(
            target=_await_lazy_ready, args=(lazy, process, log_path, endpoint), daemon=True
        ).start()

    lazy.activation = Activation([port], launch, name="cosmos", host=host)
    bound = lazy.activation.sockets[0].getsockname()[1]
    address = f"{scheme}://{host}:{bound}/"
    endpoint = CosmosEndpoint(
        endpoint=_named_unasked(address, host, bound) if local else address,
        key=EMULATOR_KEY,
        verify_tls=False,
        own_process=None,
        port=bound,
        _log=log,
        tls=local,
        _lazy=lazy,
    )
    note(log_path, f"cosmos endpoint at {endpoint.endpoint}; it starts at the first connection")
    return endpoint


def _await_lazy_ready(
    lazy: _LazyStart,
    process: subprocess.Popen[bytes],
    log_path: Path | None,
    endpoint: CosmosEndpoint,
) -> None:
    """Its ready line read (``lazy.ready`` set) and said in its log as an endpoint started at
    once says it (``funcstack partitions`` reads it), or its exit said there."""
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        ready = bool(json.loads(line).get("ready")) if line else False
    except (OSError, ValueError):  # not JSON, or its pipe closed by a stop meanwhile
        ready = False
    if ready:
        lazy.ready.set()
        logger.info("cosmos endpoint ready at %s (pid %s)", endpoint.endpoint, process.pid)
        note(log_path, f"cosmos endpoint ready at {endpoint.endpoint} (pid {process.pid})")
    else:
        note(log_path, f"cosmos endpoint did not start ({describe_exit(process.wait())})")


def _named_unasked(endpoint: str, host: str, port: int) -> str:
    """``_named`` for an endpoint not started yet: whether its IPv4-mapped address can be
    reached is asked of a socket of this process's, not of the endpoint's port (a connection
    to it would start the endpoint)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        probe.listen(1)
        if _named(endpoint, host, probe.getsockname()[1]) == endpoint:
            return endpoint
    return f"https://[{ADDRESS}]:{port}/"


def _await_ready(
    process: subprocess.Popen[bytes], log: IO[bytes] | None, log_path: Path | None, timeout: float
) -> dict[str, object]:
    """The endpoint's ready line; CosmosStartError (the endpoint stopped, its log closed) when
    it is not ready within ``timeout``, saying how it exited, what it wrote instead and the
    last lines of its log."""
    ready: dict[str, object] = {}
    assert process.stdout is not None
    stdout = process.stdout

    def read_ready() -> None:
        line = stdout.readline()
        if line:
            try:
                ready.update(json.loads(line))
            except ValueError:
                ready["error"] = line.decode("utf-8", "replace")

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    try:
        reader.join(timeout=max(0.0, deadline - time.monotonic()))
    except BaseException:  # interrupted: the endpoint does not outlive its start
        stop_child(process)
        if log is not None:
            log.close()
        raise
    if not ready.get("ready"):
        code = process.poll()
        if code is None:
            process.kill()
            process.wait(timeout=5)
            code = process.returncode
        if log is not None:
            log.close()
        lines = last_lines(log_path)
        raise CosmosStartError(
            f"the endpoint did not become ready ({describe_exit(code)}"
            + (f", output {str(ready['error']).strip()!r}" if ready.get("error") else "")
            + ")"
            + (f"; last lines of {log_path}: " + " | ".join(lines) if lines else "")
        )
    return ready
