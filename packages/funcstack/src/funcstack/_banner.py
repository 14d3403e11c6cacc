"""What ``funcstack run`` and ``up`` say once the stack is up: the banner (a line per app,
instance, process and service, the state and the logs) and ``--json``'s one line (connection
strings, URLs, ports, pids, keys)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stack's modules load the SDKs: imported by run and up only
    from funcstack._process_instances import ProcessSpec
    from funcstack.cli import App
    from funcstack.functions_host import RunningRunner
    from funcstack.scaleout import AppInstances
    from funcstack.stack import LocalStack

    Hosts = dict[str, RunningRunner | AppInstances]


def shown(path: Path) -> str:
    """A path as the banner shows it: relative to the current folder when under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def ready_line(
    stack: LocalStack, apps: list[App], hosts: Hosts, processes: Sequence[ProcessSpec] = ()
) -> str:
    """``--json``'s line: what a script needs to use the stack (``up``'s keys, kept)."""
    ports: dict[str, Any] = {}
    if stack.cosmos is not None:
        ports["cosmos"] = stack.cosmos.port
    if stack.servicebus is not None:
        ports["servicebus"] = stack.servicebus.port
    if stack.azurite is not None:
        ports["azurite"] = list(stack.azurite.ports)
    ports |= {app.name: hosts[app.name].port for app in apps}
    document: dict[str, Any] = {
        "ready": True,
        **stack.connections(),
        "apps": {a.name: hosts[a.name].url for a in apps},
        "ports": ports,
        "pids": {"funcstack": os.getpid(), **dict(stack.pids())},
    }
    if stack.cosmos is not None:
        document["cosmos_endpoint"] = stack.cosmos.endpoint
    if stack.cosmos is not None and stack.cosmos.tls is not None:  # what a client trusts
        tls = stack.cosmos.tls
        files = ("ca_file", "bundle_file", "client_cert_file", "client_key_file")
        document["cosmos_tls"] = {name: str(getattr(tls, name)) for name in files}
    instances = _instances(apps, hosts, processes)
    if instances:
        document["instances"] = instances
    keys = {
        a.name: {"function": hosts[a.name].function_key, "master": hosts[a.name].master_key}
        for a in apps
        if hosts[a.name].function_key is not None
    }
    if keys:  # --enforce-keys: a script needs them to call the apps (local keys, never logged)
        document["keys"] = keys
    not_listening: dict[str, dict[str, str]] = {}
    for app in apps:
        for host in _hosts_of(hosts[app.name]):
            if host.not_listening:
                not_listening.setdefault(app.name, {}).update(host.not_listening)
    if not_listening:  # triggers that could not start yet (each keeps trying)
        document["not_listening"] = not_listening
    return json.dumps(document)


def _instances(
    apps: list[App], hosts: Hosts, processes: Sequence[ProcessSpec]
) -> dict[str, list[dict[str, Any]]]:
    """The instances of the scaled-out apps and of the processes (theirs as an app's)."""
    from funcstack.scaleout import AppInstances

    instances: dict[str, list[dict[str, Any]]] = {}
    for app in apps:
        host = hosts[app.name]
        if isinstance(host, AppInstances):
            instances[app.name] = [
                {
                    "name": inst.name,
                    "group": inst.group,
                    "pid": inst.pid,
                    "port": inst.port,
                    "log": shown(inst.log_path),
                }
                for inst in host.instances
            ]
    for spec in processes:  # their pids are in pids too
        instances[spec.name] = [
            {
                "name": inst.name,
                "group": None,
                "pid": inst.pid,
                "port": inst.port,
                "log": shown(inst.log_path),
            }
            for inst in _scaled(hosts[spec.name]).instances
        ]
    return instances


def _scaled(host: RunningRunner | AppInstances) -> AppInstances:
    from funcstack.scaleout import AppInstances

    assert isinstance(host, AppInstances)
    return host


def _hosts_of(host: RunningRunner | AppInstances) -> list[RunningRunner]:
    from funcstack.scaleout import AppInstances

    if isinstance(host, AppInstances):
        return [inst.runner for inst in host.instances]
    return [host]


def banner(
    stack: LocalStack,
    apps: list[App],
    hosts: Hosts,
    workdir: Path,
    processes: Sequence[ProcessSpec] = (),
) -> str:
    """The lines ``run`` and ``up`` print once the stack is up."""
    from funcstack.scaleout import AppInstances

    width = max([11, *(len(a.name) for a in apps), *(len(p.name) for p in processes)]) + 2
    lines = [""]
    for app in apps:
        lines += _app_lines(stack, app, hosts[app.name], width)
    for spec in processes:
        lines += _process_lines(spec, _scaled(hosts[spec.name]), apps[0].name, width)
    lines += _service_lines(stack, workdir, width)
    lines.append("")
    if any(isinstance(host, AppInstances) for host in hosts.values()):
        lines.append(
            "An instance that exits is restarted, as in Azure. From another terminal: "
            "funcstack instances [list|kill|pause|resume|add]."
        )
    lines.append("Ctrl-C stops everything.")
    return "\n".join(lines)


def _app_lines(
    stack: LocalStack, app: App, host: RunningRunner | AppInstances, width: int
) -> list[str]:
    """An app's URL, settings and log(s), its instances, its settings' changes, its triggers
    not listening yet, its keys and its Cosmos DB triggers' leases."""
    from funcstack.scaleout import AppInstances
    from funcstack.stack import SETTINGS

    settings = shown(app.directory / SETTINGS)
    if isinstance(host, AppInstances):
        lines = [
            f"  {app.name:<{width}}{host.url}   (settings: {settings}; "
            f"{len(host.instances)} instances, requests spread over the HTTP ones)"
        ]
        lines += [
            f"  {'':<{width}}instance {line}, log: {shown(inst.log_path)}"
            for inst, line in zip(host.instances, host.lines(), strict=True)
        ]
    else:
        lines = [
            f"  {app.name:<{width}}{host.url}   (settings: {settings}, log: "
            f"{shown(stack.log_path(app.name))})"
        ]
    if app.name in stack.settings_changes:
        lines.append(f"  {'':<{width}}{stack.settings_changes[app.name]}")
    for runner in _hosts_of(host):
        lines += [
            f"  {'':<{width}}not listening: {function} ({why}); it keeps trying"
            for function, why in runner.not_listening.items()
        ]
    if host.function_key is not None:  # --enforce-keys: deliberately shown (local keys)
        lines.append(
            f"  {'':<{width}}keys: function (default) {host.function_key}   "
            f"master {host.master_key}"
        )
    return lines + [f"  {'':<{width}}{line}" for line in _lease_lines(host)]


def _process_lines(
    spec: ProcessSpec, scaled: AppInstances, first_app: str, width: int
) -> list[str]:
    """A process's command, instances and when it is ready."""
    ready = (
        f"ready once {spec.ready_url} answers 2xx"
        if spec.ready_url
        else ("ready once started (no --process-ready)")
    )
    return [
        f"  {spec.name:<{width}}{spec.command}   ({len(scaled.instances)} instance(s); "
        f"{ready}; the settings of {first_app})",
        *(
            f"  {'':<{width}}instance {line}, log: {shown(inst.log_path)}"
            for inst, line in zip(scaled.instances, scaled.lines(), strict=True)
        ),
    ]


def _service_lines(stack: LocalStack, workdir: Path, width: int) -> list[str]:
    """The services' connection strings, what was provisioned and declared, the state."""
    connections = stack.connections()
    labels = {"cosmos": "Cosmos DB", "servicebus": "Service Bus", "storage": "Storage"}
    lines = [
        f"  {label:<{width}}{connections[kind]}"
        for kind, label in labels.items()
        if kind in connections
    ]
    lines += [f"  {'':<{width}}{line}" for line in stack.report.lines()]
    if stack.config is not None:
        lines.append(f"  {'Declared':<{width}}{shown(stack.config.path or Path.cwd())}")
        if stack.config.servicebus_file is not None:
            lines += [f"  {'':<{width}}{line}" for line in stack.config.summary()[-1:]]
    lines.append(
        f"  {'State':<{width}}{shown(workdir / 'state')} (kept across runs; --fresh "
        f"forgets it)   Logs: {shown(workdir)}/*.log"
    )
    return lines


def _lease_lines(host: RunningRunner | AppInstances) -> list[str]:
    """A line per Cosmos DB trigger of the app: its containers and the lease intervals in
    force, and how long a killed instance's leases wait (expiry + one acquire interval)."""
    from funcstack.scaleout import AppInstances

    runner = host.instances[0].runner if isinstance(host, AppInstances) else host
    return [
        f"Cosmos DB trigger {name}: {lease['container']}, leases in {lease['leases']}; "
        f"acquire {lease['acquire']:g} s, renew {lease['renew']:g} s, expiry "
        f"{lease['expiration']:g} s (a killed instance's leases move within "
        f"{lease['expiration'] + lease['acquire']:g} s)"
        for name, lease in sorted(runner.leases.items())
    ]
