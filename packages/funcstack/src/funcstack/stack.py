"""The local stack for any Functions app: the services (Cosmos DB, Service Bus, Azurite) with
the declared resources provisioned, and a Functions host per app folder, each app's settings
made from its ``local.settings.sample.json`` with the stack's connection strings.

``LocalStack`` is what ``funcstack run`` / ``funcstack up`` and the pytest plugin use::

    with LocalStack(workdir=Path(".funcstack"), config=load_config("funcstack.json")) as stack:
        print(stack.cosmos_connection_string, stack.servicebus_connection_string)
        app = stack.host_app(Path("my_app"))        # a Functions host; app.url ends in /api

Settings: every value of the sample that is a connection string of one of the services is
replaced by the local one, recognised by its shape, not its name: a Cosmos DB connection string
(``AccountEndpoint=...;AccountKey=...``), a Service Bus one (``Endpoint=sb://...``), a storage
one (``UseDevelopmentStorage=true`` or ``DefaultEndpointsProtocol=...``). Nothing else changes.
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azure.cosmos import ContainerProxy, CosmosClient

from funcstack.config import ConfigError, StackConfig, read_json
from funcstack.functions_host import VERIFY_TLS_SETTING, RunningRunner
from funcstack.provision import ProvisionReport, provision_cosmos, provision_storage
from funcstack.servicebus import ServiceBusEndpoint
from funcstack.services import LocalServices, PartStartError

__all__ = [
    "SAMPLE_SETTINGS",
    "SETTINGS",
    "LocalStack",
    "ServicePorts",
    "local_settings",
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
            "defaultendpointsprotocol=" in lowered and "accountname=" in lowered):
        return "storage"
    return None


def local_settings(sample: Mapping[str, Any], connections: Mapping[str, str],
                   overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A ``local.settings.json`` document from a sample: each value that is a connection string
    of a running service (``connections``: ``cosmos``, ``servicebus``, ``storage``) replaced by
    the local one; ``FUNCTIONS_WORKER_RUNTIME`` python and ``AzureWebJobsStorage`` set when
    absent; the local host's Cosmos DB trigger told to accept the endpoint's self-signed
    certificate; ``overrides`` last."""
    document = json.loads(json.dumps(dict(sample)))  # a deep copy
    values: dict[str, Any] = dict(document.get("Values") or {})
    for key, value in values.items():
        kind = _kind(value) if isinstance(value, str) else None
        if kind is not None and kind in connections:
            values[key] = connections[kind]
    values.setdefault("FUNCTIONS_WORKER_RUNTIME", "python")
    if "storage" in connections:
        values.setdefault("AzureWebJobsStorage", connections["storage"])
    if "cosmos" in connections:
        values.setdefault(VERIFY_TLS_SETTING, "false")
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
    ``stop()`` stops everything; each part is killed if it has not exited within 1.5 s.
    """

    config: StackConfig | None = None
    ports: ServicePorts = field(default_factory=ServicePorts.free)
    with_servicebus: bool = True
    with_azurite: bool = True
    duplicate_window_seconds: float | None = None
    servicebus_settle_delay_ms: float = 0.0
    #: The Service Bus endpoint's message size limit in bytes (None: 256 KB, as on Standard).
    servicebus_max_message_size: int | None = None
    report: ProvisionReport = field(default_factory=ProvisionReport)

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
        self.run_cosmos(self.ports.cosmos)
        assert self.cosmos is not None
        self.ports.cosmos = self.cosmos.port
        if self.with_servicebus:
            self.start_servicebus()
        if self.with_azurite:
            self.ports.azurite = self.run_azurite(self.ports.azurite).ports
        self.provision()

    def provision(self) -> ProvisionReport:
        """Create the config's Cosmos DB databases and containers, and its blob containers when
        Azurite runs (idempotent)."""
        if self.config is None or self.cosmos is None:
            return self.report
        try:
            self.report = provision_cosmos(self.config.cosmos, self.cosmos.connection_string,
                                           verify_tls=self.cosmos.verify_tls)
            if self.azurite is not None:
                self.report.items += provision_storage(
                    self.config.storage, self.azurite.connection_string).items
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise PartStartError("provisioning", f"{type(exc).__name__}: {first}") from exc
        return self.report

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- Service Bus, for fault injection ------------------------------------------------------

    def start_servicebus(self) -> ServiceBusEndpoint:
        """Start the endpoint, or start it again on its port (after ``stop_servicebus()``)."""
        endpoint = self.run_servicebus(
            self.ports.servicebus,
            config=self.config.servicebus_file if self.config is not None else None,
            duplicate_window_seconds=self.duplicate_window_seconds,
            settle_delay_ms=self.servicebus_settle_delay_ms,
            max_message_size=self.servicebus_max_message_size,
        )
        self.ports.servicebus = endpoint.port
        return endpoint

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

    def app_settings(self, app_dir: Path,
                     overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The app's ``local.settings.sample.json`` (an empty one when it has none) with this
        stack's connection strings (see ``local_settings``)."""
        sample_file = app_dir / SAMPLE_SETTINGS
        try:
            sample = read_json(sample_file) if sample_file.exists() else {"Values": {}}
        except ConfigError as exc:
            raise PartStartError(app_dir.name, str(exc)) from None
        if not isinstance(sample, dict) or not isinstance(sample.get("Values", {}), dict):
            raise PartStartError(app_dir.name, f"{sample_file}: Values must be an object")
        return local_settings(sample, self.connections(), overrides)

    def host_app(self, app_dir: Path, *, name: str | None = None, port: int | None = None,
                 overrides: Mapping[str, str] | None = None, settings_file: Path | None = None,
                 python: str | None = None,
                 extra_import_paths: Sequence[str | Path] = ()) -> RunningRunner:
        """Write the app's settings to ``settings_file`` (default: ``local.settings.json`` in
        the app folder, as ``func start`` reads it) and start a host for it, named ``name``
        (default: the folder's name), on ``port`` (default: the sample's
        ``Host.LocalHttpPort``, else 7071; 0 = a free port)."""
        app_dir = Path(app_dir).resolve()
        name = name or app_dir.name
        document = self.app_settings(app_dir, overrides)
        if port is None:
            port = int((document.get("Host") or {}).get("LocalHttpPort") or DEFAULT_HOST_PORT)
        target = settings_file or app_dir / SETTINGS
        target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        return self.run_host(name, app_dir, settings=document["Values"], port=port,
                             settings_file=target, python=python,
                             extra_import_paths=extra_import_paths)

    def container_client(self, database: str, container: str) -> ContainerProxy:
        """A container on this stack's Cosmos DB endpoint, through the SDK."""
        assert self.cosmos is not None, "the stack is not started"
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
        client = CosmosClient.from_connection_string(self.cosmos.connection_string,
                                                     connection_verify=self.cosmos.verify_tls)
        return client.get_database_client(database).get_container_client(container)


def forget_state(state_dir: Path) -> None:
    """Remove kept state (``--fresh``)."""
    shutil.rmtree(state_dir, ignore_errors=True)
