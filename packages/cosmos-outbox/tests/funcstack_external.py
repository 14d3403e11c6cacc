"""funcstack's services for a test suite on another Python (3.9 - 3.12): ``funcstack up --json``
run from a Python 3.13 environment in a process of its own, and its connection strings.

funcstack needs Python 3.13 (its Functions host drives the worker library of Azure's Python 3.13
workers), so it cannot be installed into a 3.11 or 3.12 environment; an app on those versions
still tests its adapters against funcstack's Cosmos DB, Service Bus and Azurite endpoints
through the unmodified SDKs, which are the same on every Python. This file is that bridge, as
testcontainers' ``with PostgresContainer() as pg: pg.get_connection_url()`` is for a database:
start on free ports, yield the connection strings, always stop.

It imports only the standard library and uses no syntax after Python 3.9, so a suite on any
interpreter copies it into its tests folder (``docs/other-pythons.md`` has the conftest.py it
takes); on 3.13 it is ``funcstack.external``. The command is named by ``FUNCSTACK`` (a path to
the ``funcstack`` script of the 3.13 environment, or a command line) or passed in.

The services are the ones ``funcstack up`` starts (Cosmos DB, Service Bus, Azurite) with the
resources of ``config`` provisioned; a Functions host is not among them: an app's end-to-end
tests run under funcstack on 3.13 (docs/other-pythons.md says what that means).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["FUNCSTACK_VARIABLE", "ExternalServices", "ExternalStackError", "external_services"]

#: The environment variable naming the funcstack command of a Python 3.13 environment.
FUNCSTACK_VARIABLE = "FUNCSTACK"
#: How long the services may take to come up (a first start installs funcstack's Node packages).
START_TIMEOUT = 300.0
#: How long a stop may take before the process is killed.
STOP_TIMEOUT = 30.0


class ExternalStackError(RuntimeError):
    """The services could not be started: the command is missing, or funcstack refused or
    died (its last lines in the message)."""


@dataclass(frozen=True)
class ExternalServices:
    """The running services' connection strings (the same as funcstack's ``LocalStack``
    attributes of these names), and the whole JSON line ``funcstack up --json`` printed
    (``ready``). Annotations are strings (``from __future__``): they run on Python 3.9."""

    cosmos_connection_string: str
    servicebus_connection_string: str
    storage_connection_string: str
    pid: int
    ready: dict[str, Any] = field(repr=False)

    def cosmos_environment(self) -> dict[str, str]:
        """The variables that make a process's clients trust the Cosmos DB endpoint's
        certificate (funcstack's ``LocalTls.environment()``): for a process this one starts."""
        bundle = self.ready["cosmos_tls"]["bundle_file"]
        return {"REQUESTS_CA_BUNDLE": bundle, "SSL_CERT_FILE": bundle}

    def cosmos_client_options(self) -> dict[str, Any]:
        """The keyword arguments that make an azure-cosmos client (sync or aio) verify the
        Cosmos DB endpoint's certificate (funcstack's ``CosmosEndpoint.client_options()``)."""
        from azure.cosmos.documents import SSLConfiguration  # the suite's SDK

        tls = self.ready["cosmos_tls"]
        config = SSLConfiguration()
        config.SSLCaCerts = tls["ca_file"]
        config.SSLCertFile, config.SSLKeyFile = tls["client_cert_file"], tls["client_key_file"]
        return {"connection_verify": tls["ca_file"], "ssl_config": config}


def funcstack_command(command: str | Sequence[str] | None = None) -> list[str]:
    """The command line of ``funcstack``: ``command`` (a string is split as a shell would), else
    ``$FUNCSTACK``; ExternalStackError naming the variable when neither is given."""
    if command is None:
        command = os.environ.get(FUNCSTACK_VARIABLE, "")
        if not command.strip():
            raise ExternalStackError(
                f"{FUNCSTACK_VARIABLE} is not set: name the funcstack command of a Python 3.13 "
                "environment (python3.13 -m venv .funcstack && .funcstack/bin/pip install "
                f"funcstack; {FUNCSTACK_VARIABLE}=.funcstack/bin/funcstack)"
            )
    parts = shlex.split(command) if isinstance(command, str) else list(command)
    if not parts:
        raise ExternalStackError("an empty funcstack command")
    return parts


@contextlib.contextmanager
def external_services(
    command: str | Sequence[str] | None = None,
    *,
    config: Path | None = None,
    workdir: Path | None = None,
    start_timeout: float = START_TIMEOUT,
) -> Iterator[ExternalServices]:
    """Run ``funcstack up --json --free-ports --fresh`` (``--config config`` when given) in
    ``workdir`` (default: a temporary folder: its state is forgotten), wait for its JSON line,
    yield the connection strings; on the way out stop it as Ctrl-C does (it stops every part
    it started), killing it after ``STOP_TIMEOUT`` s."""
    argv = [*funcstack_command(command), "up", "--json", "--free-ports", "--fresh"]
    if config is not None:
        argv += ["--config", str(Path(config).resolve())]
    with contextlib.ExitStack() as cleanup:
        if workdir is None:
            workdir = Path(
                cleanup.enter_context(tempfile.TemporaryDirectory(prefix="funcstack-external-"))
            )
        try:
            process = subprocess.Popen(
                argv,
                cwd=workdir,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
        except OSError as exc:
            raise ExternalStackError(
                f"cannot run {argv[0]!r} ({FUNCSTACK_VARIABLE}): {exc.strerror or exc}"
            ) from None
        cleanup.callback(_stop, process)
        errors: list[str] = []
        threading.Thread(target=_collect, args=(process.stderr, errors), daemon=True).start()
        ready = _ready_line(process, start_timeout)
        if ready is None:
            tail = "\n".join(errors[-10:]) or "(nothing on stderr)"
            raise ExternalStackError(
                f"{shlex.join(argv)} did not come up (exit status {process.poll()}):\n{tail}"
            )
        threading.Thread(target=_collect, args=(process.stdout, []), daemon=True).start()
        yield ExternalServices(
            cosmos_connection_string=ready["cosmos"],
            servicebus_connection_string=ready["servicebus"],
            storage_connection_string=ready["storage"],
            pid=process.pid,
            ready=ready,
        )


def _ready_line(process: subprocess.Popen[str], timeout: float) -> dict[str, Any] | None:
    """The JSON line that says the services are up; None when the process ends (or the
    deadline passes) first."""
    found: list[dict[str, Any]] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            text = line.strip()
            if text.startswith("{"):
                with contextlib.suppress(ValueError):
                    document = json.loads(text)
                    if isinstance(document, dict) and document.get("ready") is True:
                        found.append(document)
                        return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return found[0] if found else None


def _collect(stream: IO[str] | None, into: list[str]) -> None:
    """Drain a pipe (so the process never blocks on it), keeping its lines."""
    for line in stream or ():
        into.append(line.rstrip("\n"))


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
