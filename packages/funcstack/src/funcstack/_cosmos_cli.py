"""``funcstack cosmos``: the local Cosmos DB endpoint alone, in the foreground until Ctrl-C, as
Microsoft's emulator runs (its well-known port 8081 and key), for a client that is not a
Functions app: a script, a notebook, another language's SDK, a service under test.

The endpoint keeps its state in ``.funcstack/state/cosmos/`` under the current folder (the
folder ``funcstack run`` and ``up`` keep it in; ``--in-memory`` keeps nothing, ``--fresh``
forgets it first) and is recorded as the folder's running stack, so ``funcstack split``,
``merge`` and ``partitions`` find it. Its certificate is signed by funcstack's local
authority (``cosmos/_tls.py``) and its address ``https://[::ffff:127.0.0.1]:<port>/``: the
banner says how a client trusts it (``SSL_CERT_FILE`` / ``REQUESTS_CA_BUNDLE``, or
azure-cosmos's ``ssl_config``), so that the client verifies every request. ``--json``: one
line on stdout once it is up (``{"ready": true, "endpoint", "connectionString", "caFile",
"caBundle", "clientCertFile", "clientKeyFile", "pid"}``), every other line on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["COSMOS_COMMAND", "CosmosCommandError", "add_cosmos_command", "run_cosmos_command"]

COSMOS_COMMAND = "cosmos"
#: The official emulator's port.
DEFAULT_PORT = 8081


class CosmosCommandError(Exception):
    """What stops ``funcstack cosmos`` before it starts, in one line (exit status 1)."""


def add_cosmos_command(commands: Any, state_folder: str) -> None:
    """Add ``cosmos`` to the command's subparsers."""
    cosmos = commands.add_parser(
        COSMOS_COMMAND,
        help="the Cosmos DB endpoint alone, until Ctrl-C (with a certificate a client verifies)",
    )
    cosmos.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the port on 127.0.0.1 (default: {DEFAULT_PORT}, the emulator's; 0: a free one)",
    )
    cosmos.add_argument(
        "--in-memory",
        action="store_true",
        help=f"keep nothing (default: the state in {state_folder}/state/cosmos/)",
    )
    cosmos.add_argument(
        "--fresh", action="store_true", help="forget the kept Cosmos DB state first"
    )
    cosmos.add_argument(
        "--json",
        action="store_true",
        help="once up, print one JSON line on stdout (the endpoint, its connection string, "
        "the certificate files) and nothing else there",
    )


class _Alone:
    """The endpoint as ``serving.serve`` serves a stack: started on its port, stopped at the end."""

    def __init__(self, workdir: Path, state_dir: Path | None, port: int) -> None:
        from funcstack.services import LocalServices

        self.services = LocalServices(workdir=workdir, state_dir=state_dir)
        self.port = port

    def start(self) -> object:
        from funcstack.services import free_port

        endpoint = self.services.run_cosmos(self.port or free_port())
        endpoint.started()  # at once: what this command is run for
        return endpoint

    def stop(self) -> None:
        self.services.stop()

    def pids(self) -> list[tuple[str, int]]:
        return self.services.pids()

    def dead_part(self) -> tuple[str, int | None] | None:
        return self.services.dead_part()

    def ended(self, name: str, code: int | None) -> str:
        return self.services.ended(name, code)

    def record_exit(self, name: str, code: int | None) -> list[str]:
        return self.services.record_exit(name, code)

    def log_path(self, name: str) -> Path:
        return self.services.log_path(name)


def run_cosmos_command(args: argparse.Namespace, workdir: Path, prog: str) -> int:
    """Serve the endpoint until Ctrl-C; print how to reach and trust it."""
    from funcstack.services import already_running, own_workdir, port_in_use
    from funcstack.serving import serve

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    pidfile = workdir / "pids.json"
    refusal = already_running(pidfile)
    if refusal:
        raise CosmosCommandError(f"{refusal}, or run this one from another folder")
    if not 0 <= args.port <= 65535:
        raise CosmosCommandError(f"--port {args.port}: a port number from 0 to 65535")
    if args.port and port_in_use(args.port):
        raise CosmosCommandError(
            f"port {args.port} is in use: another endpoint or emulator? Stop it, or use --port 0"
        )
    state_dir = None if args.in_memory else workdir / "state"
    if args.fresh:
        shutil.rmtree(workdir / "state" / "cosmos", ignore_errors=True)
    own_workdir(workdir)
    alone = _Alone(workdir, state_dir, args.port)
    out = sys.stderr if args.json else sys.stdout
    kept = "nothing kept" if state_dir is None else f"state in {state_dir / 'cosmos'}"
    return serve(
        alone,
        pidfile,
        banner=lambda: _banner(alone, kept),
        prog=prog,
        starting=f"{prog}: starting the Cosmos DB endpoint...",
        out=out,
        ready=(lambda: json.dumps(_ready(alone))) if args.json else None,
        refused=(lambda exc: json.dumps({"ready": False, "error": str(exc or "interrupted")}))
        if args.json
        else None,
    )


def _ready(alone: _Alone) -> dict[str, Any]:
    cosmos = alone.services.cosmos
    assert cosmos is not None and cosmos.tls is not None
    return {
        "ready": True,
        "endpoint": cosmos.endpoint,
        "connectionString": cosmos.connection_string,
        "caFile": str(cosmos.tls.ca_file),
        "caBundle": str(cosmos.tls.bundle_file),
        "clientCertFile": str(cosmos.tls.client_cert_file),
        "clientKeyFile": str(cosmos.tls.client_key_file),
        "pid": cosmos.started().pid,
    }


def _banner(alone: _Alone, kept: str) -> str:
    cosmos = alone.services.cosmos
    assert cosmos is not None and cosmos.tls is not None
    tls = cosmos.tls
    env = " ".join(f"{k}={v}" for k, v in tls.environment().items())
    pad = " " * 24
    return "\n".join(
        [
            f"Cosmos DB endpoint at {cosmos.endpoint} ({kept}; log: {alone.log_path('cosmos')})",
            f"  connection string   {cosmos.connection_string}",
            f"  certificate         signed by funcstack's local authority {tls.ca_file}",
            f"  trust it            export {env}",
            f"{pad}(the authorities this shell trusts, and funcstack's): a client, azure-cosmos",
            f"{pad}sync or aio, then verifies every request as it verifies Azure's, unchanged",
            "  or in code          an ssl_config naming the authority "
            "(funcstack: CosmosEndpoint.client_options()):",
            f"{pad}from azure.cosmos.documents import SSLConfiguration",
            f"{pad}tls = SSLConfiguration()",
            f"{pad}tls.SSLCaCerts = {str(tls.ca_file)!r}",
            f"{pad}tls.SSLCertFile = {str(tls.client_cert_file)!r}  # aio: a pair",
            f"{pad}tls.SSLKeyFile = {str(tls.client_key_file)!r}",
            f"{pad}CosmosClient(endpoint, key, ssl_config=tls)",
            "  split, merge        funcstack split|merge|partitions DATABASE CONTAINER "
            "(from this folder)",
            "Ctrl-C stops it.",
        ]
    )
