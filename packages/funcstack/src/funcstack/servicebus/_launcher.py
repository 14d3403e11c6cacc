"""Start the local Service Bus endpoint as a subprocess (so tests can stop and restart it)."""

from __future__ import annotations

import json
import logging
import selectors
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from funcstack._activation import Activation, activated_stopped, listened_on
from funcstack._processes import (
    KILLED_WAIT,
    OWN_PROCESS_GROUP,
    describe_exit,
    end_group,
    last_lines,
    owned_environment,
    stop_child,
)
from funcstack.servicebus._config import connection_string, load_config
from funcstack.starts import record_start

logger = logging.getLogger("funcstack.servicebus")


@dataclass
class ServiceBusEndpoint:
    """A running endpoint process. ``stop()`` ends it; its state survives only with a
    ``state_file``, where what it acknowledges is written first (a SIGKILL loses none of it)."""

    host: str
    port: int
    #: None until it starts, when started at its first connection (``lazy``).
    process: subprocess.Popen[str] | None
    _log: IO[str] | None = None
    tls_port: int | None = None
    control_port: int | None = None
    #: One line per entity setting of the config the endpoint does not honour (logged at start
    #: by this process too, so that ``funcstack run`` and a test's log show them).
    warnings: list[str] = field(default_factory=list)
    _activation: Activation | None = field(default=None, repr=False)
    #: Started by another process, which stops it (``funcstack.handoff``): ``process`` is None
    #: here, and it is stopped when its port no longer listens.
    handed: bool = False

    @property
    def connection_string(self) -> str:
        return connection_string(self.host, self.port)

    @property
    def stopped(self) -> bool:
        """Stopped (``stop()``), or its process ended; not while it waits for a first
        connection."""
        if self.handed:
            return not listened_on(self.host, self.port)
        return activated_stopped(self.process, self._activation)

    def started(self, timeout: float = 20.0) -> subprocess.Popen[str]:
        """Its process, started now if it waited for a first connection (``lazy``)."""
        if self._activation is not None:
            self._activation.fire()
        if self.process is None:
            raise RuntimeError("the Service Bus endpoint did not start")
        return self.process

    def stop(self, timeout: float = 10.0) -> None:
        if self._activation is not None:
            self._activation.close()
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=max(timeout, KILLED_WAIT))
        end_group(self.process.pid)
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None


def start_servicebus(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    config: Path | None = None,
    log_path: Path | None = None,
    timeout: float = 20.0,
    duplicate_window_seconds: float | None = None,
    settle_delay_ms: float = 0.0,
    log_level: str = "INFO",
    tls: tuple[int, Path, Path] | None = None,
    control: bool = False,
    state_file: Path | None = None,
    max_message_size: int | None = None,
    lazy: bool = False,
) -> ServiceBusEndpoint:
    """Run ``python -m funcstack.servicebus`` and wait for its ready line.

    Entities come from ``config`` (the official emulator's Config.json shape); without one the
    namespace starts empty (entities can be created with ``control=True``). Pass the ``port``
    of a stopped endpoint to start a new one on the same port. ``lazy``: the port (and the
    control channel's, with ``control``) listens at once and the endpoint starts at the first
    connection to either (``funcstack._activation``; not with ``tls``); ``config`` is read
    here first, so that a mistake in it is refused now, and its warnings logged now.
    """
    cmd = [
        sys.executable, "-m", "funcstack.servicebus",
        "--host", host, "--port", str(port), "--log-level", log_level,
        *_options(
            config=config,
            duplicate_window_seconds=duplicate_window_seconds,
            settle_delay_ms=settle_delay_ms,
            max_message_size=max_message_size,
            tls=tls,
            control=control,
            state_file=state_file,
        ),
    ]  # fmt: skip
    if lazy:
        return _lazy(cmd, host, port, config, duplicate_window_seconds, log_path, state_file)
    log = log_path.open("a", encoding="utf-8") if log_path is not None else None
    process = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=log if log is not None else subprocess.DEVNULL,
        text=True,
        env=owned_environment(),
        **OWN_PROCESS_GROUP,
    )
    record_start("servicebus", process.pid, identity=state_file or port or None)
    try:
        ready = _ready_line(process, timeout)
    except BaseException:  # interrupted: the endpoint does not outlive its start
        stop_child(process)
        if log is not None:
            log.close()
        raise
    if ready is not None:
        warnings = [str(line) for line in ready.get("warnings") or []]
        for line in warnings:
            logger.warning("%s", line)
        return ServiceBusEndpoint(
            host=host,
            port=int(ready["port"]),
            process=process,
            _log=log,
            tls_port=ready.get("tls_port"),
            control_port=ready.get("control_port"),
            warnings=warnings,
        )
    code = process.poll()
    stop_child(process)
    if log is not None:
        log.close()
    lines = last_lines(log_path)
    raise RuntimeError(
        f"the Service Bus endpoint did not become ready within {timeout:g} s (port {port}, "
        f"{describe_exit(code)})"
        + (f"; last lines of {log_path}: " + " | ".join(lines) if lines else "")
    )


def _options(
    *,
    config: Path | None,
    duplicate_window_seconds: float | None,
    settle_delay_ms: float,
    max_message_size: int | None,
    tls: tuple[int, Path, Path] | None,
    control: bool,
    state_file: Path | None,
) -> list[str]:
    """The endpoint's command-line options for what ``start_servicebus`` is given."""
    args = []
    if config is not None:
        args += ["--config", str(config)]
    if duplicate_window_seconds is not None:
        args += ["--duplicate-window-seconds", str(duplicate_window_seconds)]
    if settle_delay_ms:
        args += ["--settle-delay-ms", str(settle_delay_ms)]
    if max_message_size is not None:
        args += ["--max-message-size", str(max_message_size)]
    if tls is not None:
        args += ["--tls-port", str(tls[0]), "--tls-cert", str(tls[1]), "--tls-key", str(tls[2])]
    if control:
        args += ["--control-port", "0"]
    if state_file is not None:
        args += ["--state-file", str(state_file)]
    return args


def _ready_line(process: subprocess.Popen[str], timeout: float) -> dict[str, Any] | None:
    """The endpoint's ready line, or None when it exits, closes its output or is not ready
    within ``timeout``."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                return None
            if selector.select(remaining):
                line = process.stdout.readline()
                if not line:
                    return None
                ready: dict[str, Any] = json.loads(line)
                if ready.get("ready"):
                    return ready
    finally:
        selector.close()


def _lazy(
    cmd: list[str],
    host: str,
    port: int,
    config: Path | None,
    duplicate_window_seconds: float | None,
    log_path: Path | None,
    state_file: Path | None,
) -> ServiceBusEndpoint:
    """The endpoint of ``cmd`` started at its first connection on ``port`` (0: a free one)."""
    if "--tls-port" in cmd:
        raise ValueError("a Service Bus endpoint with TLS starts at once")
    control = "--control-port" in cmd
    try:  # as the endpoint reads it at its start, refused now rather than at a first connection
        warnings = load_config(config, duplicate_window_seconds=duplicate_window_seconds).warnings
    except KeyError as error:
        raise RuntimeError(f"{config}: a required key is missing: {error}") from None
    except (ValueError, TypeError) as error:  # RuleError, ConfigError: the file and the cause
        raise RuntimeError(str(error)) from None
    for line in warnings:
        logger.warning("%s", line)
    endpoint = ServiceBusEndpoint(host=host, port=port, process=None, warnings=list(warnings))

    def launch(sockets: list[socket.socket]) -> None:
        sock = sockets[0]
        argv = list(cmd)
        at = argv.index("--port")
        argv[at + 1] = str(sock.getsockname()[1])
        argv += ["--listen-fd", str(sock.fileno())]
        if control:  # the control channel's socket too
            at = argv.index("--control-port")
            argv[at + 1] = str(sockets[1].getsockname()[1])
            argv += ["--control-listen-fd", str(sockets[1].fileno())]
        log = log_path.open("a", encoding="utf-8") if log_path is not None else None
        endpoint._log = log
        endpoint.process = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=log if log is not None else subprocess.DEVNULL,
            text=True,
            pass_fds=tuple(s.fileno() for s in sockets),
            env=owned_environment(),
            **OWN_PROCESS_GROUP,
        )
        record_start("servicebus", endpoint.process.pid, identity=state_file or port or None)

    ports = [port, 0] if control else [port]
    endpoint._activation = Activation(ports, launch, name="servicebus", host=host)
    endpoint.port = endpoint._activation.sockets[0].getsockname()[1]
    if control:
        endpoint.control_port = endpoint._activation.sockets[1].getsockname()[1]
    return endpoint
