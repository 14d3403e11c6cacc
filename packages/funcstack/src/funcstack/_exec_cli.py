"""``funcstack exec -- COMMAND [ARG ...]``: services started once for several test runs.

Starts a Cosmos DB endpoint, a Service Bus endpoint (with its control channel) and an Azurite,
on free ports, in memory, nothing declared; writes their description to a file
(``funcstack.handoff.write_services``) and runs COMMAND with ``FUNCSTACK_SERVICES`` naming it.
Every ``funcstack_services`` fixture of the pytest runs under COMMAND (several suites, one after
another) then uses these services instead of starting its own: each provisions its declared
resources there and leaves them. The services stop when COMMAND ends, however it ends (its
failure, Ctrl-C, a SIGTERM to ``funcstack exec``, which COMMAND is sent too); the exit status
is COMMAND's (128 + the signal's number when a signal ended it).

Each service starts at its first connection (the Service Bus endpoint's, or its control
channel's: a suite's declarations): a command whose tests use none of them starts none. Their logs
and the services file are in ``--workdir`` (default: a temporary folder, removed at the end).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["EXEC_COMMAND", "ExecCommandError", "add_exec_command", "run_exec_command"]

EXEC_COMMAND = "exec"


class ExecCommandError(Exception):
    """A mistake on ``funcstack exec``'s command line, or a service that did not start."""


def add_exec_command(commands: Any) -> None:
    """Add ``exec`` and its options to the command's subparsers."""
    sub = commands.add_parser(
        EXEC_COMMAND,
        help="start the services once, run a command (several test runs) with "
        "FUNCSTACK_SERVICES naming them, stop them when it ends",
    )
    sub.add_argument(
        "--workdir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the services' logs and the services file here, kept (default: a temporary "
        "folder, removed at the end)",
    )
    sub.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARG ...]",
        help="the command to run with the services (after --)",
    )


def run_exec_command(args: argparse.Namespace, prog: str) -> int:
    """``funcstack exec``: the module's docstring."""
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise ExecCommandError("exec: no command given (funcstack exec -- COMMAND [ARG ...])")
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return _run(argv, args.workdir.resolve(), prog)
    folder = Path(tempfile.mkdtemp(prefix="funcstack-exec-"))
    try:
        return _run(argv, folder, prog)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(argv: list[str], folder: Path, prog: str) -> int:
    from funcstack.cosmos import start_cosmos
    from funcstack.handoff import SERVICES_VARIABLE, write_services
    from funcstack.servicebus import start_servicebus
    from funcstack.services import free_port, start_azurite, stop_all

    stops: list[tuple[str, Callable[[], None]]] = []
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    process: subprocess.Popen[bytes] | None = None
    held: list[int] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)  # it ends, then the services stop
        else:
            raise KeyboardInterrupt  # still starting: stop what started

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)  # the command is being started: sent on once it is

    signal.signal(signal.SIGTERM, on_term)
    try:
        try:
            cosmos = start_cosmos(port=free_port(), log_path=folder / "cosmos.log", lazy=True)
            stops.append(("cosmos", cosmos.stop))
            servicebus = start_servicebus(
                port=free_port(), log_path=folder / "servicebus.log", control=True, lazy=True
            )
            stops.append(("servicebus", servicebus.stop))
            azurite = start_azurite(folder / "azurite", folder / "azurite.log", lazy=True)
            stops.append(("azurite", azurite.stop))
        except Exception as exc:  # every start failure, said in one line
            raise ExecCommandError(f"exec: the services did not start: {exc}") from None
        services = folder / "services.json"
        write_services(services, cosmos, servicebus, azurite)
        # From here a Ctrl-C or a SIGTERM is the command's to act on: one that lands while the
        # command is being started (which it may have missed) is sent on to it once it is, and
        # funcstack exec waits for its end, then stops the services.
        signal.signal(signal.SIGINT, hold)
        signal.signal(signal.SIGTERM, hold)
        print(f"{prog} exec: services up ({SERVICES_VARIABLE}={services})", file=sys.stderr)
        sys.stderr.flush()
        try:
            process = subprocess.Popen(argv, env={**os.environ, SERVICES_VARIABLE: str(services)})
        except OSError as exc:
            raise ExecCommandError(
                f"exec: cannot run {argv[0]!r} ({exc.strerror or exc})"
            ) from None
        signal.signal(signal.SIGTERM, on_term)
        for signum in held:
            process.send_signal(signum)
        code = process.wait()  # a Ctrl-C reaches the command too (its process group): held
        return 128 - code if code < 0 else code
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
        stop_all(list(reversed(stops)))
