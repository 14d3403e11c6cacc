"""The ``funcstack`` command.

``funcstack run --app DIR [--app DIR2] [--config FILE]``: start the services, provision the
declared resources, create each app's ``local.settings.json`` from its sample (or, when it
exists, update only its local connection strings and missing keys, saying which), start a
Functions host per app and print their URLs; serve until Ctrl-C. ``--enforce-keys``: the hosts
require function keys by auth level, as in Azure, and each app's keys are printed. The terminal
shows what ``func start`` shows, prefixed by the app's (or instance's) name: a line per invocation
(function, trigger, status, duration; a failure's error in full), the app's own logging, the
hosts' warnings and errors; ``--quiet`` keeps it to the banner (the logs have everything).
``--instances N`` (or function groups apart, ``--instances http=2,relay_events=3``): each app
scaled out as in Azure (``funcstack.scaleout``), one log per instance, a front on the app's
port; once for every app, or once per ``--app`` in their order.
``--process NAME=COMMAND`` (``--process-instances NAME=N``, ``--process-ready NAME=URL``): a
command run as instances of the stack beside the apps, with the first app's settings
(``_process_instances``), driven by ``funcstack instances`` as an app's instances.
``funcstack up [--config FILE]``: the services only (for tests and other tools).
``funcstack exec [--workdir DIR] -- COMMAND``: the services started once (free ports, in
memory, nothing declared) for the command's test runs, ``FUNCSTACK_SERVICES`` naming them (the
pytest plugin's ``funcstack_services`` uses them), stopped when it ends (``_exec_cli.py``).
``funcstack setup``: install the Node packages and the Functions RPC messages into the cache
now (both happen on first use otherwise).
``funcstack cosmos [--port N] [--in-memory] [--fresh] [--json]``: the Cosmos DB endpoint alone,
until Ctrl-C, with a certificate a client verifies (``_cosmos_cli.py``).
``funcstack split DATABASE CONTAINER [--range ID]``: split a physical partition of a container
of the stack running from this folder (``run`` or ``up``), as Azure does on its own; ``funcstack
merge DATABASE CONTAINER [--range ID ...]`` merges adjacent ones, as Azure's partition merge;
``funcstack partitions DATABASE CONTAINER`` lists them (``_partitions_cli.py``).
``funcstack instances [list|kill|pause|resume|add]``: the instances of the apps ``run`` serves
from this folder, through its control channel (``_instances_cli.py``, ``_stack_control.py``).
An app's host that exits is restarted as Azure restarts a host (on its port: its URL is the
same) or replaces an instance (``run --instances``; ``scaleout.RestartPolicy``,
``_host_restarts``); each exit, restart and give-up is a line on stderr; a host given up after
3 failures at start in a row stops the run (exit status 1).
``--json`` (``run`` and ``up``): stdout holds one JSON line once the stack is up (connection
strings, URLs, ports, pids) and nothing else; every other line goes to stderr.

State (Cosmos DB documents, Service Bus messages, Azurite's data) and logs are kept in
``.funcstack/`` under the current folder; ``--fresh`` forgets the state first.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from funcstack._banner import banner, ready_line, shown
from funcstack._cache import SetupError, cache_root, setup
from funcstack._cosmos_cli import (
    COSMOS_COMMAND,
    CosmosCommandError,
    add_cosmos_command,
    run_cosmos_command,
)
from funcstack._exec_cli import (
    EXEC_COMMAND,
    ExecCommandError,
    add_exec_command,
    run_exec_command,
)
from funcstack._instances_cli import (
    INSTANCES_COMMAND,
    InstancesCommandError,
    add_instances_command,
    run_instances,
)
from funcstack._partitions_cli import (
    PARTITION_COMMANDS,
    PartitionCommandError,
    add_partition_commands,
    run_partition_command,
)
from funcstack.config import ConfigError, StackConfig, load_config

if TYPE_CHECKING:  # the stack's modules load the SDKs: imported by run and up only
    from funcstack._process_instances import ProcessSpec
    from funcstack.functions_host import RunningRunner
    from funcstack.scaleout import AppInstances
    from funcstack.stack import ServicePorts

__all__ = ["CONFIG_FILE", "STATE_FOLDER", "main"]

#: The declared-resources file looked for when --config is not given.
CONFIG_FILE = "funcstack.json"
#: Where a project's stack keeps its state and logs (under the current folder).
STATE_FOLDER = ".funcstack"
PROG = "funcstack"


class UsageError(Exception):
    """A mistake on the command line or in the project (one line, exit status 1)."""


@dataclass
class App:
    directory: Path
    name: str
    port: int


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="A Docker-free local Azure stack for Python Functions apps."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(commands)
    up = commands.add_parser("up", help="the services only (Cosmos DB, Service Bus, Azurite)")
    up.add_argument(
        "--json",
        action="store_true",
        help="once up, print one JSON line on stdout (connection strings, ports, pids) and "
        "nothing else there: every other line goes to stderr",
    )
    _common(up)
    commands.add_parser(
        "setup", help="install the Node packages and the Functions RPC messages into the cache now"
    )
    add_cosmos_command(commands, STATE_FOLDER)
    add_partition_commands(commands, STATE_FOLDER)
    add_instances_command(commands, STATE_FOLDER)
    add_exec_command(commands)
    return parser


def _common(sub: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``up`` share."""
    sub.add_argument(
        "--config",
        type=Path,
        default=None,
        help=f"declared resources (default: ./{CONFIG_FILE}, else the first "
        "app's, when there is one)",
    )
    sub.add_argument(
        "--fresh", action="store_true", help=f"forget the state kept in {STATE_FOLDER}/ first"
    )
    sub.add_argument(
        "--free-ports",
        action="store_true",
        help="free ports instead of the well-known ones (8081, 5672, "
        "10000-10002; apps 7071, 7072, ...)",
    )


def _add_run(commands: Any) -> None:
    """Add ``run`` and its options to the command's subparsers."""
    run = commands.add_parser("run", help="the services and a Functions host per app")
    run.add_argument(
        "--app",
        type=Path,
        action="append",
        required=True,
        metavar="DIR",
        help="a Functions app folder (function_app.py); repeat for more apps",
    )
    run.add_argument(
        "--enforce-keys",
        action="store_true",
        help="require function keys by auth level, as in Azure (function: the "
        "function or master key; admin: the master key); the keys are "
        "printed per app. Default: no checks, as with func start",
    )
    run.add_argument(
        "--quiet",
        action="store_true",
        help="keep the terminal to the banner: no line per invocation, no app "
        f"logging (they stay in {STATE_FOLDER}/<app>.log)",
    )
    run.add_argument(
        "--instances",
        action="append",
        default=None,
        metavar="N|GROUP=N,...",
        help="host instances per app, as Azure scales out: a count (the whole app "
        "on each), or function groups apart as on Flex Consumption "
        "(http=2,function:NAME=3; the groups not named get one); once for "
        "every app or once per --app. Default: 1",
    )
    run.add_argument(
        "--process",
        action="append",
        default=None,
        metavar="NAME=COMMAND",
        help="also run COMMAND (a relay, a worker) as instances NAME-1, ... "
        "beside the apps, with the first app's settings in their environment (the environment "
        "winning), PORT and CONTAINER_APP_REPLICA_NAME their own ({port}, {instance} in "
        "COMMAND); supervised and driven as the apps' instances; repeat for more processes",
    )
    run.add_argument(
        "--process-instances",
        action="append",
        default=None,
        metavar="NAME=N",
        help="how many instances of process NAME (default: 1)",
    )
    run.add_argument(
        "--process-ready",
        action="append",
        default=None,
        metavar="NAME=URL",
        help="an instance of process NAME is ready once URL answers 2xx ({port}, {instance} "
        "replaced; e.g. http://127.0.0.1:{port}/ready); without it, once started",
    )
    run.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="the interpreter the apps' workers run with (default: this one); "
        "it needs funcstack and the apps' requirements installed",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help="once up, print one JSON line on stdout (connection strings, the apps' URLs, "
        "ports, pids) and nothing else there: every other line goes to stderr",
    )
    _common(run)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    as_json = bool(getattr(args, "json", False))
    try:
        if args.command == "setup":
            return _setup()
        if args.command == COSMOS_COMMAND:
            return run_cosmos_command(args, Path.cwd() / STATE_FOLDER, PROG)
        if args.command in PARTITION_COMMANDS:
            return run_partition_command(args, Path.cwd() / STATE_FOLDER)
        if args.command == INSTANCES_COMMAND:
            return run_instances(args, Path.cwd() / STATE_FOLDER)
        if args.command == EXEC_COMMAND:
            return run_exec_command(args, PROG)
        return _start(args)
    except (
        UsageError,
        ConfigError,
        SetupError,
        PartitionCommandError,
        InstancesCommandError,
        CosmosCommandError,
        ExecCommandError,
    ) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        if as_json:  # a script reading stdout gets its one line
            print(_refused_line(exc), flush=True)
        return 1


def _setup() -> int:
    modules, wheel = setup()
    print(
        f"{PROG}: Node packages in {modules.parent}; Functions RPC messages {wheel} "
        f"(cache: {cache_root()})"
    )
    return 0


def _config(explicit: Path | None, apps: Sequence[Path]) -> StackConfig | None:
    if explicit is not None:
        return load_config(explicit)
    for candidate in (Path.cwd() / CONFIG_FILE, *(app / CONFIG_FILE for app in apps[:1])):
        if candidate.is_file():
            return load_config(candidate)
    return None


def _apps(dirs: Sequence[Path], free: bool) -> list[App]:
    from funcstack.stack import DEFAULT_HOST_PORT

    apps: list[App] = []
    wanted: list[int | None] = []
    for given in dirs:
        directory = given.resolve()
        if not directory.is_dir():
            raise UsageError(f"--app {given}: no such folder")
        if not (directory / "function_app.py").is_file():
            raise UsageError(
                f"--app {given}: no function_app.py in {directory} (a Python "
                "Functions app, v2 programming model)"
            )
        port = _local_http_port(directory)
        names = {a.name for a in apps}
        name = directory.name or "app"
        while name in names:
            name += "-2"
        apps.append(App(directory, name, 0))
        wanted.append(port)
    taken = {p for p in wanted if p is not None}
    next_port = DEFAULT_HOST_PORT
    for app, port in zip(apps, wanted, strict=True):
        if free:
            continue
        if port is None:
            while next_port in taken:
                next_port += 1
            port = next_port
            taken.add(port)
        app.port = port
    ports = [a.port for a in apps if a.port]
    if len(set(ports)) != len(ports):
        raise UsageError(
            f"two apps want the same port ({', '.join(map(str, ports))}): change "
            "Host.LocalHttpPort in a local.settings.json or its sample"
        )
    return apps


def _instances(given: list[str] | None, apps: list[App]) -> dict[str, str]:
    """Each app's ``--instances`` (checked now: a mistake is one line before anything
    starts)."""
    from funcstack.scaleout import parse_instances

    values = list(given or ["1"])
    if len(values) == 1:
        values *= len(apps)
    if len(values) != len(apps):
        raise UsageError(
            f"--instances given {len(values)} times for {len(apps)} apps: give it "
            "once (every app) or once per --app"
        )
    for value in values:
        try:
            parse_instances(value)
        except ValueError as exc:
            raise UsageError(f"--instances {value}: {exc}") from None
    return {app.name: value for app, value in zip(apps, values, strict=True)}


def _process_specs(args: argparse.Namespace, apps: list[App]) -> list[ProcessSpec]:
    """The processes ``--process`` declares, with their ``--process-instances`` and
    ``--process-ready`` (checked now: a mistake is one line before anything starts)."""
    from funcstack._process_instances import parse_processes

    try:
        return parse_processes(  # `up` has none of these: the services only
            getattr(args, "process", None) or [],
            getattr(args, "process_instances", None) or [],
            getattr(args, "process_ready", None) or [],
            taken={a.name for a in apps} | {"funcstack", "cosmos", "servicebus", "azurite"},
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _local_http_port(directory: Path) -> int | None:
    """``Host.LocalHttpPort`` of the app's ``local.settings.json`` (the user's, as ``func
    start`` reads it), else of its sample."""
    from funcstack.stack import SAMPLE_SETTINGS, SETTINGS

    for name in (SETTINGS, SAMPLE_SETTINGS):
        path = directory / name
        if not path.is_file():
            continue
        try:
            text = json.loads(path.read_text(encoding="utf-8-sig"))
            raw = (text.get("Host") or {}).get("LocalHttpPort")
        except (ValueError, AttributeError):
            raw = None  # the stack reads it again and names the error
        if isinstance(raw, int) or (isinstance(raw, str) and raw.isdigit()):
            return int(raw)
    return None


def _start(args: argparse.Namespace) -> int:
    from funcstack._stack_control import ControlServer, StackControl
    from funcstack.scaleout import RestartPolicy
    from funcstack.serving import serve
    from funcstack.stack import SETTINGS, LocalStack

    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("azure").setLevel(logging.WARNING)
    app_dirs: list[Path] = list(getattr(args, "app", None) or [])
    apps = _apps(app_dirs, args.free_ports)
    scale = _instances(getattr(args, "instances", None), apps)
    processes = _process_specs(args, apps)
    config = _config(args.config, [a.directory for a in apps])
    workdir = Path.cwd() / STATE_FOLDER
    pidfile = workdir / "pids.json"
    ports = _claim(pidfile, apps, free=args.free_ports)
    _prepare(workdir, fresh=args.fresh)
    hosts: dict[str, RunningRunner | AppInstances] = {}
    stack = LocalStack(
        workdir=workdir,
        state_dir=workdir / "state",
        config=config,
        ports=ports,
        host_restart=RestartPolicy(),  # a host that dies comes back on its port, as in Azure
        on_host_event=lambda line: _restarted(line, hosts, stack.hosts),
    )

    quiet = getattr(args, "quiet", False)
    as_json = getattr(args, "json", False)
    # with --json, stdout holds the JSON line only: the terminal's lines go to stderr
    terminal = sys.stderr if as_json else sys.stdout
    control = ControlServer(workdir, StackControl(hosts, shown=shown).handle)

    def start() -> None:
        stack.start()
        for app in apps:
            hosts[app.name] = stack.host_app(
                app.directory,
                name=app.name,
                port=app.port,
                python=getattr(args, "python", None),
                enforce_keys=getattr(args, "enforce_keys", False),
                instances=scale[app.name],
                on_console=None if quiet else _printer(app.name, terminal),
                on_event=_say,
            )
        for spec in processes:
            hosts[spec.name] = stack.host_process(
                spec, settings_file=apps[0].directory / SETTINGS, on_event=_say
            )
        if apps:
            control.start()

    parts = [a.name for a in apps] + [p.name for p in processes]
    what = "the services" + (" and " + ", ".join(parts) if parts else "")
    return serve(
        stack,
        pidfile,
        banner=lambda: banner(stack, apps, hosts, workdir, processes),
        prog=PROG,
        start=start,
        starting=f"{PROG}: starting {what}...",
        out=terminal,
        ready=(lambda: ready_line(stack, apps, hosts, processes)) if as_json else None,
        refused=_refused_line if as_json else None,
        before_stop=control.stop,
    )


def _claim(pidfile: Path, apps: list[App], *, free: bool) -> ServicePorts:
    """The ports the stack will listen on, once no stack runs from this folder (its pid file,
    a stale one removed) and, unless ``free``, the well-known ports are not in use."""
    from funcstack.services import already_running, port_in_use
    from funcstack.stack import ServicePorts

    refusal = already_running(pidfile)
    if refusal:
        raise UsageError(refusal)
    if free:
        return ServicePorts.free()
    ports = ServicePorts()
    wanted = [
        ("cosmos", ports.cosmos),
        ("servicebus", ports.servicebus),
        *(("azurite", p) for p in ports.azurite),
        *((a.name, a.port) for a in apps),
    ]
    busy = [f"{port} ({name})" for name, port in wanted if port_in_use(port)]
    if busy:
        raise UsageError(
            f"port(s) in use: {', '.join(busy)}: another stack or emulator? "
            "Stop it, or use --free-ports"
        )
    return ports


def _prepare(workdir: Path, *, fresh: bool) -> None:
    """The stack's folder, its state forgotten first when ``fresh``, ignored by git."""
    from funcstack.services import own_workdir

    if fresh:
        shutil.rmtree(workdir / "state", ignore_errors=True)
        shutil.rmtree(workdir / "azurite", ignore_errors=True)
    own_workdir(workdir)


_printing = threading.Lock()


def _printer(app: str, out: TextIO) -> Callable[[Mapping[str, Any]], None]:
    """Print an app host's terminal records as they come (hosts print from threads of their
    own: a line is never cut by another's)."""
    from funcstack.functions_host._console import render

    def show(entry: Mapping[str, Any]) -> None:
        line = render(entry, str(entry.get("instance") or app))
        with _printing:
            out.write(line + "\n")
            out.flush()

    return show


def _restarted(
    line: str,
    hosts: dict[str, RunningRunner | AppInstances],
    live: Mapping[str, RunningRunner],
) -> None:
    """A host's exit, restart or give-up (``_say``); a host run alone that was restarted is
    the app's from now on (``live``: the stack's hosts), for the control channel's list."""
    from funcstack.scaleout import AppInstances

    for name, hosted in list(hosts.items()):
        if not isinstance(hosted, AppInstances) and name in live:
            hosts[name] = live[name]
    _say(line)


def _say(line: str) -> None:
    """An instance's exit, restart or give-up, on stderr (the supervisor's thread)."""
    with _printing:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _refused_line(error: Exception | None) -> str:
    """``--json``'s line when the stack does not start: ``{"ready": false, "error": "<why in
    one line>"}``, with ``"part"`` (an app's name, ``cosmos``, ``provisioning``...) when one
    part did not start, and ``"refusals"`` (one per function and binding) when an app was
    refused; ``"error": "interrupted"`` for a Ctrl-C during the start."""
    from funcstack.services import PartStartError

    if error is None:
        return json.dumps({"ready": False, "error": "interrupted"})
    document: dict[str, Any] = {"ready": False, "error": str(error)}
    if isinstance(error, PartStartError):
        document["part"] = error.part
        refusals = _refusals(error.detail)
        if refusals:
            document["refusals"] = refusals
    return json.dumps(document)


def _refusals(detail: str) -> list[str]:
    """An app's refusals, one per function and binding, from the host's error line (the host
    process says them in one line, ``; `` between them)."""
    head = "the app's bindings cannot all be served, so it is not started: "
    if head not in detail:
        return []
    return detail.split(head, 1)[1].split("; ")


def _entry() -> None:  # pragma: no cover - `python -m funcstack`
    raise SystemExit(main())


if __name__ == "__main__":  # pragma: no cover
    _entry()
