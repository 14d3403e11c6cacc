"""The local stack for any Functions app: the services (Cosmos DB, Service Bus, Azurite) with
the declared resources provisioned, and a Functions host per app folder, each app's settings
made from its ``local.settings.sample.json`` with the stack's connection strings.

``LocalStack`` is what ``funcstack run`` / ``funcstack up`` and the pytest plugin use::

    with LocalStack(workdir=Path(".funcstack"), config=load_config("funcstack.json")) as stack:
        print(stack.cosmos_connection_string, stack.servicebus_connection_string)
        app = stack.host_app(Path("my_app"))        # a Functions host; app.url ends in /api
        stack.split("shop", "orders")               # a live split of a physical partition
        app = stack.host_app(Path("my_app"), instances=3)            # scaled out (scaleout.py)

Settings: an app's ``local.settings.json`` is the user's once it exists. When it does not,
it is made from the sample: every value that is a connection string of one of the services is
replaced by the local one, recognised by its shape, not its name: a Cosmos DB connection string
(``AccountEndpoint=...;AccountKey=...``), a Service Bus one (``Endpoint=sb://...``), a storage
one (``UseDevelopmentStorage=true`` or ``DefaultEndpointsProtocol=...``). When it exists, only
what funcstack owns changes (``update_local_settings``): a connection string of a running
service that points at a local endpoint is moved to the current one, keys missing from it are
added from the sample; every other value is kept verbatim, and the file is written only when
something changed. ``settings_changes`` says what changed, by name (never values).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from azure.cosmos import ContainerProxy, CosmosClient

from funcstack._process_instances import ProcessInstances, ProcessSpec
from funcstack.config import ConfigError, StackConfig, read_json
from funcstack.cosmos import CosmosEndpoint, PhysicalPartition
from funcstack.cosmos._tls import ADDRESS
from funcstack.functions_host import VERIFY_TLS_SETTING, HostOptions, RunningRunner
from funcstack.provision import ProvisionReport, provision_cosmos, provision_storage
from funcstack.scaleout import AppInstances, RestartPolicy, parse_instances
from funcstack.servicebus import ServiceBusEndpoint
from funcstack.services import Azurite, LocalServices, PartStartError, stop_all

__all__ = [
    "SAMPLE_SETTINGS",
    "SETTINGS",
    "LocalStack",
    "ServicePorts",
    "SettingsChanges",
    "local_settings",
    "update_local_settings",
]

SAMPLE_SETTINGS = "local.settings.sample.json"
SETTINGS = "local.settings.json"
#: The Functions host's default port, as with ``func start``.
DEFAULT_HOST_PORT = 7071


@dataclass
class ServicePorts:
    """The services' ports: the official emulators' well-known ones by default; 0 = free."""

    cosmos: int = 8081
    servicebus: int = 5672
    azurite: tuple[int, int, int] = (10000, 10001, 10002)

    @classmethod
    def free(cls) -> ServicePorts:
        return cls(cosmos=0, servicebus=0, azurite=(0, 0, 0))


def _kind(value: str) -> str | None:
    """Which service a setting's value is a connection string of, by its shape."""
    text = value.strip()
    lowered = text.lower()
    if "accountendpoint=" in lowered and "accountkey=" in lowered:
        return "cosmos"
    if lowered.startswith("endpoint=sb://"):
        return "servicebus"
    if lowered.startswith("usedevelopmentstorage=true") or (
        "defaultendpointsprotocol=" in lowered and "accountname=" in lowered
    ):
        return "storage"
    return None


#: Hosts a connection string names when it points at this machine.
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", ADDRESS})


def _points_here(value: str) -> bool:
    """Whether a connection string points at a local endpoint: the emulators' shortcuts
    (``UseDevelopmentStorage=true``, ``UseDevelopmentEmulator=true``), or every endpoint it
    names (``AccountEndpoint``, ``Endpoint``, ``BlobEndpoint``, ...) on 127.0.0.1/localhost."""
    parts: dict[str, str] = {}
    for part in value.split(";"):
        key, _, val = part.partition("=")
        parts[key.strip().lower()] = val.strip()
    if "true" in {
        parts.get("usedevelopmentstorage", "").lower(),
        parts.get("usedevelopmentemulator", "").lower(),
    }:
        return True
    hosts = [urlsplit(val).hostname for key, val in parts.items() if key.endswith("endpoint")]
    return bool(hosts) and all(host in _LOCAL_HOSTS for host in hosts)


@dataclass
class SettingsChanges:
    """What funcstack did to an app's ``local.settings.json``, by setting name (never values:
    connection strings are secrets)."""

    file: str = SETTINGS
    created: bool = False
    #: local connection strings moved to the current local endpoints
    updated: list[str] = field(default_factory=list)
    #: keys the file lacked, added from the sample (or funcstack's defaults)
    added: list[str] = field(default_factory=list)
    #: connection strings of a service funcstack runs that point elsewhere: left as they are
    kept: list[str] = field(default_factory=list)
    #: what funcstack wrote once and no longer needs (the host's TLS opt-out, for the local
    #: endpoint, whose certificate it verifies now)
    removed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.created or bool(self.updated or self.added or self.removed)

    def line(self) -> str:
        """One line: ``local.settings.json: updated A (the local endpoint); added B (missing);
        kept C (not a local endpoint)``, or ``...: unchanged``, or ``...: created from
        local.settings.sample.json``."""
        if self.created:
            return f"{self.file}: created from {SAMPLE_SETTINGS}"
        parts = []
        if self.updated:
            parts.append(
                f"updated {', '.join(self.updated)} (the local endpoint"
                f"{'s' if len(self.updated) > 1 else ''})"
            )
        if self.added:
            parts.append(f"added {', '.join(self.added)} (missing)")
        if self.removed:
            parts.append(f"removed {', '.join(self.removed)} (the local endpoint is verified)")
        if not parts:
            parts.append("unchanged")
        if self.kept:
            parts.append(f"kept {', '.join(self.kept)} (not a local endpoint)")
        return f"{self.file}: {'; '.join(parts)}"


def update_local_settings(
    existing: Mapping[str, Any], sample: Mapping[str, Any], connections: Mapping[str, str]
) -> tuple[dict[str, Any], SettingsChanges]:
    """The user's ``local.settings.json`` (``existing``) with what funcstack owns brought up to
    date, and what changed:

    * a value that is a connection string of a running service (by its shape) and points at a
      local endpoint (``_points_here``) becomes the current local one (``updated``);
    * one that points elsewhere (their own Azure resource) is kept (``kept``);
    * keys of the sample's ``Values`` missing from the file are added, localised as when the
      file is created (``added``), and so are funcstack's defaults (``local_settings``), and
      sections of the sample the file lacks (``Host``, ...);
    * ``FUNCTIONS_HOST_COSMOS_VERIFY_TLS``, which funcstack wrote (``false``) before its
      endpoint's certificate could be verified, goes when a value is that endpoint's
      connection string (``removed``);
    * everything else -- other values, their types, ``Host``, ``IsEncrypted`` -- verbatim."""
    document: dict[str, Any] = json.loads(json.dumps(dict(existing)))  # a deep copy
    values: dict[str, Any] = dict(document.get("Values") or {})
    changes = SettingsChanges()
    for key, value in values.items():
        kind = _kind(value) if isinstance(value, str) else None
        if kind is None or kind not in connections:
            continue
        if not _points_here(value):
            changes.kept.append(key)
        elif value != connections[kind]:
            values[key] = connections[kind]
            changes.updated.append(key)
    fresh = local_settings(sample, connections)
    if connections.get("cosmos") in values.values() and VERIFY_TLS_SETTING in values:
        # written by funcstack before its endpoint's certificate could be verified
        del values[VERIFY_TLS_SETTING]
        changes.removed.append(VERIFY_TLS_SETTING)
    for key, value in fresh["Values"].items():
        if key not in values:
            values[key] = value
            changes.added.append(key)
    for section, content in fresh.items():
        if section not in document:
            document[section] = content
            changes.added.append(section)
    document["Values"] = values
    return document, changes


def local_settings(
    sample: Mapping[str, Any],
    connections: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ``local.settings.json`` document from a sample: each value that is a connection string
    of a running service (``connections``: ``cosmos``, ``servicebus``, ``storage``) replaced by
    the local one; ``FUNCTIONS_WORKER_RUNTIME`` python and ``AzureWebJobsStorage`` set when
    absent; ``overrides`` last. (The hosts verify the local Cosmos DB endpoint's certificate:
    no setting turns that off.)"""
    document = json.loads(json.dumps(dict(sample)))  # a deep copy
    values: dict[str, Any] = dict(document.get("Values") or {})
    for key, value in values.items():
        kind = _kind(value) if isinstance(value, str) else None
        if kind is not None and kind in connections:
            values[key] = connections[kind]
    values.setdefault("FUNCTIONS_WORKER_RUNTIME", "python")
    if "storage" in connections:
        values.setdefault("AzureWebJobsStorage", connections["storage"])
    values.update(overrides or {})
    document["IsEncrypted"] = False
    document["Values"] = values
    return dict(document)


@dataclass
class LocalStack(LocalServices):
    """The services with the declared resources, and Functions hosts for app folders.

    ``start()`` starts Cosmos DB, Service Bus (the entities of the config's Service Bus part)
    and Azurite, then provisions the config's Cosmos part and, when Azurite runs, its Storage
    part (``report`` says what it did).
    ``host_app()`` writes an app's ``local.settings.json`` and starts a host for it.
    ``stop()`` stops everything, the hosts before the endpoints; each part is killed if it
    has not exited within 1.5 s, and so is what is left of its process group (a host's
    language worker, what a declared process started). When it returns, none of the processes
    the stack started runs (a kill is waited for up to ``_processes.KILLED_WAIT``, 15 s; what
    still runs then is named in the part's log), so a stack started again at once on the same
    ports or state finds them free. The fork server its hosts were forked from
    (``functions_host._forkserver``) is shared by the stacks of the process: it ends with the
    last of them to stop (the next stack starts one again: about 0.8 s).
    """

    config: StackConfig | None = None
    ports: ServicePorts = field(default_factory=ServicePorts.free)
    #: A Cosmos DB endpoint this stack uses and does not own (a test session's, another
    #: stack's): its resources are provisioned on it; it is never stopped, restarted or counted
    #: among this stack's parts. None: the stack starts one of its own.
    shared_cosmos: CosmosEndpoint | None = None
    with_servicebus: bool = True
    #: A Service Bus endpoint this stack uses and does not own, started with its control
    #: channel (``start_servicebus(control=True)``: a test session's, ``funcstack exec``'s): the
    #: queues and topics of the config's Service Bus part are declared on it (made when not
    #: there, left as they are when there with the declared settings; one of a declared name
    #: with other settings is a ``PartStartError`` naming it); it is never stopped, restarted or
    #: counted among this stack's parts, and what the stack declared stays on it. None: the
    #: stack starts one of its own (with ``with_servicebus``).
    shared_servicebus: ServiceBusEndpoint | None = None
    with_azurite: bool = True
    #: An Azurite this stack uses and does not own (a test session's, another stack's): its
    #: blob containers and queues are provisioned on it; it is never stopped or counted among
    #: this stack's parts. None: the stack starts one of its own (with ``with_azurite``).
    shared_azurite: Azurite | None = None
    duplicate_window_seconds: float | None = None
    servicebus_settle_delay_ms: float = 0.0
    #: The Service Bus endpoint's message size limit in bytes (None: 256 KB, as on Standard).
    servicebus_max_message_size: int | None = None
    report: ProvisionReport = field(default_factory=ProvisionReport)
    #: What ``host_app`` did to each app's settings file, in one line (by host name).
    settings_changes: dict[str, str] = field(default_factory=dict)
    #: The apps hosted on several instances, by name (their hosts are in ``hosts`` too).
    scaled: dict[str, AppInstances] = field(default_factory=dict)
    #: ``container_client``'s SDK clients, one per endpoint address: a client opens a TLS
    #: connection pool and reads the account when made, which tests calling it in a loop paid
    #: each time. Closed by ``stop()``.
    _cosmos_clients: dict[tuple[str, bool], CosmosClient] = field(
        default_factory=dict, init=False, repr=False
    )
    _cosmos_clients_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False
    )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LocalStack:
        """Start the services and provision; on any failure, stop what started and raise
        PartStartError naming the part."""
        try:
            self.start_services()
        except BaseException:
            self.stop()
            raise
        return self

    def start_services(self) -> None:
        if self.shared_cosmos is not None:
            self.cosmos = self.shared_cosmos
        else:
            self.run_cosmos(self.ports.cosmos)
        assert self.cosmos is not None
        self.ports.cosmos = self.cosmos.port
        if self.with_servicebus:
            self.start_servicebus()
        if self.shared_azurite is not None:
            self.azurite = self.shared_azurite
            self.ports.azurite = self.azurite.ports
        elif self.with_azurite:
            self.ports.azurite = self.run_azurite(self.ports.azurite).ports
        self.provision()

    def provision(self) -> ProvisionReport:
        """Create the config's Cosmos DB databases and containers, and its blob containers and
        queues when Azurite runs (idempotent)."""
        if self.config is None or self.cosmos is None:
            return self.report
        try:
            self.report = provision_cosmos(
                self.config.cosmos,
                self.cosmos.connection_string,
                client_options=self.cosmos.client_options(),
                replace=self.shared_cosmos is None,  # a shared endpoint's are other runs' too
            )
            if self.azurite is not None:
                self.report.items += provision_storage(
                    self.config.storage, self.azurite.connection_string
                ).items
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise PartStartError("provisioning", f"{type(exc).__name__}: {first}") from exc
        return self.report

    def stop(self) -> None:
        """Stop every part; the scaled apps' supervisors and fronts first, then the declared
        processes' instances (``host_process``), while the services they use still run: a
        relay's SIGTERM releases its leases, which it cannot do once Cosmos DB is gone. Then
        the hosts, then the endpoints (``LocalServices.stop``)."""
        for app in list(self.scaled.values()):
            app.stop_watching()
            for inst in list(app.instances):  # a paused one handles the SIGTERM it is sent
                if inst.paused:
                    with suppress(Exception):
                        app.resume(inst)
            if app.front is not None:
                app.front.stop()
                app.front = None
        processes = [p for p in self.scaled.values() if isinstance(p, ProcessInstances)]
        stop_all([(p.name, p.stop) for p in processes])
        super().stop()
        self.scaled.clear()
        with self._cosmos_clients_lock:
            clients = list(self._cosmos_clients.values())
            self._cosmos_clients.clear()
        for client in clients:
            client.close()

    def _restarted(self) -> set[str]:
        """The hosts being restarted, and the instances of the scaled apps that restart them
        (their own to watch: ``AppInstances.watch``)."""
        return super()._restarted() | {
            inst.name
            for app in list(self.scaled.values())
            if app.restart is not None
            for inst in list(app.instances)
        }

    def stop_part(self, name: str) -> None:
        """Stop a part, or every instance of a scaled app and its front (not a shared Cosmos
        DB endpoint, Service Bus endpoint or Azurite: ValueError)."""
        if name in self.scaled:
            self.scaled.pop(name).stop()
            return
        if name == "cosmos" and self.shared_cosmos is not None:
            raise ValueError("this stack's Cosmos DB endpoint is shared: not its to stop")
        if name == "servicebus" and self.shared_servicebus is not None:
            raise ValueError("this stack's Service Bus endpoint is shared: not its to stop")
        if name == "azurite" and self.shared_azurite is not None:
            raise ValueError("this stack's Azurite is shared: not its to stop")
        super().stop_part(name)

    def _parts(
        self,
    ) -> list[tuple[str, CosmosEndpoint | ServiceBusEndpoint | Azurite | RunningRunner]]:
        """This stack's own parts: a shared endpoint or Azurite is not one."""
        shared = [
            p
            for p in (self.shared_cosmos, self.shared_servicebus, self.shared_azurite)
            if p is not None
        ]
        return [
            (name, part)
            for name, part in super()._parts()
            if not any(part is other for other in shared)
        ]

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- Service Bus, for fault injection ------------------------------------------------------

    def start_servicebus(self) -> ServiceBusEndpoint:
        """Start the endpoint, or start it again on its port (after ``stop_servicebus()``).
        Started again without ``state_dir`` it is empty (its entities from the config): the
        messages it held and its duplicate-detection history are gone, which no outage of a
        namespace does; with one it keeps both. With ``shared_servicebus``: that endpoint, the
        config's queues and topics declared on it (``declare_servicebus``)."""
        if self.shared_servicebus is not None:
            self.declare_servicebus(self.shared_servicebus)
            self.servicebus = self.shared_servicebus
            return self.servicebus
        endpoint = self.run_servicebus(
            self.ports.servicebus,
            config=self.config.servicebus_file if self.config is not None else None,
            duplicate_window_seconds=self.duplicate_window_seconds,
            settle_delay_ms=self.servicebus_settle_delay_ms,
            max_message_size=self.servicebus_max_message_size,
        )
        self.ports.servicebus = endpoint.port
        return endpoint

    def declare_servicebus(self, endpoint: ServiceBusEndpoint) -> None:
        """The queues and topics (with their subscriptions) of the config's Service Bus part
        declared on a running endpoint through its control channel
        (``funcstack.servicebus._control``: made when not there, left when there with the same
        settings); ``duplicate_window_seconds`` as the window of each. A declared name there
        with other settings, a setting that is the endpoint's (its message size, its settle
        delay, its tier), an endpoint without a control channel: ``PartStartError``."""
        if self.config is None or self.config.servicebus_file is None:
            return
        endwide = {
            "servicebus_settle_delay_ms": bool(self.servicebus_settle_delay_ms),
            "servicebus_max_message_size": self.servicebus_max_message_size is not None,
        }
        if any(endwide.values()):
            named = ", ".join(name for name, given in endwide.items() if given)
            raise PartStartError(
                "servicebus", f"{named}: a setting of the endpoint's, which is shared"
            )
        if endpoint.control_port is None:
            raise PartStartError(
                "servicebus", "the shared endpoint has no control channel (control=True)"
            )
        from funcstack.servicebus._control import declare

        source = self.config.servicebus_file
        try:
            declare(
                endpoint.host,
                endpoint.control_port,
                source,
                duplicate_window_seconds=self.duplicate_window_seconds,
            )
        except (OSError, RuntimeError, ValueError, ConfigError) as exc:
            raise PartStartError("servicebus", f"{source}: {exc}") from None

    def stop_servicebus(self) -> None:
        self.stop_part("servicebus")

    # -- connection strings --------------------------------------------------------------------

    @property
    def cosmos_connection_string(self) -> str:
        assert self.cosmos is not None, "the stack is not started"
        return self.cosmos.connection_string

    @property
    def cosmos_endpoint(self) -> str:
        assert self.cosmos is not None, "the stack is not started"
        return self.cosmos.endpoint

    @property
    def cosmos_key(self) -> str:
        """The emulator's well-known key (the local endpoint accepts any key)."""
        assert self.cosmos is not None, "the stack is not started"
        return self.cosmos.key

    @property
    def servicebus_connection_string(self) -> str:
        assert self.servicebus is not None, "the Service Bus endpoint is not started"
        return self.servicebus.connection_string

    @property
    def storage_connection_string(self) -> str:
        assert self.azurite is not None, "Azurite is not started"
        return self.azurite.connection_string

    def connections(self) -> dict[str, str]:
        """The running services' connection strings, by kind (cosmos, servicebus, storage)."""
        found = {}
        if self.cosmos is not None:
            found["cosmos"] = self.cosmos.connection_string
        if self.servicebus is not None:
            found["servicebus"] = self.servicebus.connection_string
        if self.azurite is not None:
            found["storage"] = self.azurite.connection_string
        return found

    # -- apps ----------------------------------------------------------------------------------

    def _sample(self, app_dir: Path) -> dict[str, Any]:
        """The app's ``local.settings.sample.json`` (an empty one when it has none)."""
        sample_file = app_dir / SAMPLE_SETTINGS
        try:
            sample = read_json(sample_file) if sample_file.exists() else {"Values": {}}
        except ConfigError as exc:
            raise PartStartError(app_dir.name, str(exc)) from None
        if not isinstance(sample, dict) or not isinstance(sample.get("Values", {}), dict):
            raise PartStartError(app_dir.name, f"{sample_file}: Values must be an object")
        return sample

    def app_settings(
        self, app_dir: Path, overrides: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """The app's ``local.settings.sample.json`` (an empty one when it has none) with this
        stack's connection strings (see ``local_settings``)."""
        return local_settings(self._sample(app_dir), self.connections(), overrides)

    def host_app(
        self,
        app_dir: Path,
        *,
        name: str | None = None,
        port: int | None = None,
        overrides: Mapping[str, str] | None = None,
        settings_file: Path | None = None,
        python: str | None = None,
        extra_import_paths: Sequence[str | Path] = (),
        enforce_keys: bool = False,
        instances: int | str | Mapping[str, int] = 1,
        on_console: Callable[[Mapping[str, Any]], None] | None = None,
        restart: RestartPolicy | None = RestartPolicy(),  # noqa: B008 - frozen: one value
        on_event: Callable[[str], None] | None = None,
    ) -> RunningRunner | AppInstances:
        """Bring the app's settings file up to date and start a host for it, named ``name``
        (default: the folder's name), on ``port`` (default: the file's
        ``Host.LocalHttpPort``, else 7071; 0 = a free port).

        The settings file (``settings_file``, default: ``local.settings.json`` in the app
        folder, as ``func start`` reads it) is created from the sample when it does not exist;
        when it does, it is the user's: only the local connection strings and missing keys
        change (``update_local_settings``), and it is written only when something changed.
        ``settings_changes[name]`` says what changed, in one line. ``overrides`` are this run's:
        they go to the host (they win over the file) and are never written into it.
        ``enforce_keys``: the host requires keys by auth level, as in Azure (the result's
        ``function_key`` and ``master_key``); default: none, as with ``func start``.
        ``instances``: more than one host, as Azure scales out (``scaleout.parse_instances``:
        ``3``, or function groups apart such as ``"http=2,relay_events=3"``): an
        ``AppInstances`` with the front on ``port``, its hosts named ``<name>-<n>``.
        ``on_console``: the hosts' terminal records, as they come (``start_runner``; with
        several instances each record names its instance under ``"instance"``).
        ``restart``: with several instances, how one that exits comes back, as in Azure
        (``scaleout.RestartPolicy``; None: it stays down); ``on_event`` is given a line for
        each exit, restart and give-up. One host is restarted on its port under the stack's
        ``host_restart`` (None by default: it stays down)."""
        app_dir = Path(app_dir).resolve()
        plan = parse_instances(instances)
        name = name or app_dir.name
        target = settings_file or app_dir / SETTINGS
        document = self._settings_file(name, app_dir, target)
        if port is None:
            port = int((document.get("Host") or {}).get("LocalHttpPort") or DEFAULT_HOST_PORT)
        # the file's values reach the host through the file, where the environment wins over
        # them as with func start; the overrides are given to it and win over both
        options = HostOptions(
            app_dir,
            dict(overrides or {}),
            target,
            python=python,
            extra_import_paths=tuple(Path(p) for p in extra_import_paths),
            enforce_keys=enforce_keys,
            on_console=on_console,
        )
        if plan != {None: 1}:
            scaled = AppInstances(
                self, name, options, plan, port=port, restart=restart, on_event=on_event
            )
            self.scaled[name] = scaled
            try:
                return scaled.start()
            except ValueError as exc:
                self.scaled.pop(name, None)
                raise PartStartError(name, str(exc)) from None
            except BaseException:
                self.scaled.pop(name, None)
                raise
        runner = self.start_host(name, options, port=port)
        self.supervise(name)
        return runner

    def _settings_file(self, name: str, app_dir: Path, target: Path) -> dict[str, Any]:
        """The app's settings file brought up to date (``host_app``), what changed said in
        ``settings_changes[name]``; its document."""
        sample = self._sample(app_dir)
        if target.exists():
            try:
                existing = read_json(target)
            except ConfigError as exc:
                raise PartStartError(name, str(exc)) from None
            if not isinstance(existing, dict) or not isinstance(existing.get("Values", {}), dict):
                raise PartStartError(name, f"{target}: Values must be an object")
            document, changes = update_local_settings(existing, sample, self.connections())
        else:
            document = local_settings(sample, self.connections())
            changes = SettingsChanges(created=True)
        changes.file = target.name
        if changes.changed:
            target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        self.settings_changes[name] = changes.line()
        return document

    def host_process(
        self,
        spec: ProcessSpec,
        *,
        settings_file: Path | None = None,
        overrides: Mapping[str, str] | None = None,
        restart: RestartPolicy | None = RestartPolicy(),  # noqa: B008 - frozen: one value
        on_event: Callable[[str], None] | None = None,
    ) -> ProcessInstances:
        """Start ``spec.instances`` instances of a process beside the apps, named
        ``<spec.name>-<n>`` (``_process_instances``: their environment, port, log, readiness),
        with the values of ``settings_file`` (an app's ``local.settings.json``, once
        ``host_app`` has brought its local connection strings up to date) where funcstack's
        environment has none; ``overrides`` win over both. Supervised as an app's instances
        (``restart``, ``on_event``; kill, pause, resume, add)."""
        if spec.name in self.scaled or spec.name in self.hosts:
            raise PartStartError(spec.name, f"{spec.name}: the name of another part of the stack")
        options = HostOptions(Path.cwd(), {}, settings_file)
        processes = ProcessInstances(
            self,
            spec.name,
            options,
            {None: spec.instances},
            restart=restart,
            on_event=on_event,
            spec=spec,
            settings_file=settings_file,
            given=dict(overrides or {}),
        )
        self.scaled[spec.name] = processes
        try:
            return processes.start()
        except BaseException:
            self.scaled.pop(spec.name, None)
            raise

    # -- Cosmos DB physical partitions -------------------------------------------------------

    def physical_partitions(self, database: str, container: str) -> list[PhysicalPartition]:
        """The live physical partitions (partition key ranges) of a container, in EPK order,
        with how many documents each holds."""
        assert self.cosmos is not None, "the stack is not started"
        return self.cosmos.physical_partitions(database, container)

    def split(self, database: str, container: str, range_id: str | None = None) -> list[str]:
        """Split a physical partition of a container now, as Azure does on its own (``range_id``;
        None: the one holding the most documents, cut at the median EPK of its documents);
        the children's ids. See ``CosmosEndpoint.split``."""
        assert self.cosmos is not None, "the stack is not started"
        return self.cosmos.split(database, container, range_id)

    def merge(self, database: str, container: str, range_ids: list[str] | None = None) -> str:
        """Merge adjacent physical partitions of a container into one now, as Azure's merge
        does (``range_ids``; None: the two adjacent ranges holding the fewest documents
        together); the merged range's id. See ``CosmosEndpoint.merge``."""
        assert self.cosmos is not None, "the stack is not started"
        return self.cosmos.merge(database, container, range_ids)

    def container_client(self, database: str, container: str) -> ContainerProxy:
        """A container on this stack's Cosmos DB endpoint, through the SDK. Its client is made
        once per endpoint address (again after a restart on another port), shared by the
        threads that call this, and closed by ``stop()``."""
        assert self.cosmos is not None, "the stack is not started"
        key = (self.cosmos.connection_string, self.cosmos.verify_tls)
        with self._cosmos_clients_lock:
            client = self._cosmos_clients.get(key)
            if client is None:  # verifying the endpoint's certificate
                client = self._cosmos_clients[key] = CosmosClient.from_connection_string(
                    key[0], **self.cosmos.client_options()
                )
        return client.get_database_client(database).get_container_client(container)


def forget_state(state_dir: Path) -> None:
    """Remove kept state (``--fresh``)."""
    shutil.rmtree(state_dir, ignore_errors=True)
