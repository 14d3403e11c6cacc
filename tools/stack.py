"""This app's local stack: funcstack (packages/funcstack) wired for the contacts outbox.

funcstack's services with this app's declared resources (tools/funcstack.json: its Cosmos DB
containers and the claim check's blob container; tools/servicebus-config.json: its topic and
subscriptions) + a Functions host serving function_app.py and, beside it on its own port, a
second host serving the subscriber app in subscriber/, with a generated local.settings.json.

By default the contacts app runs on one host and its container has the physical partitions
tools/funcstack.json declares. A test can run it scaled out as Azure does (`runner_instances`:
funcstack's plan, e.g. `{"http": 2, "function:relay_events": 3}`, Flex Consumption's function
groups apart, behind one front) and give the contacts container more physical partitions
(`contacts_partitions`), then kill, pause and add instances (`runner_app`) and split the
container (`split_contacts`).

`python -m tools` (what `make run` calls) starts it on the well-known ports and serves until
Ctrl-C, restarting a host that dies on its port (`serve`); tests use `Stack` on free ports and
stop/kill parts of it to inject faults (a host killed stays down unless the test gives the
stack funcstack's `host_restart`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from cosmos_outbox_operators import OPERATOR_ROLE
from funcstack.config import CosmosSpec, StackConfig
from funcstack.cosmos import local_tls
from funcstack.functions_host import HostOptions, RunningRunner
from funcstack.otel import ENV_VAR as OTEL_ENV_VAR
from funcstack.scaleout import AppInstances, RestartPolicy, parse_instances
from funcstack.servicebus import control_request
from funcstack.services import PartStartError, free_port, port_in_use, running_stack
from funcstack.serving import serve as serve_stack
from funcstack.stack import LocalStack, ServicePorts, update_local_settings
from tools.provision import declared

if TYPE_CHECKING:
    from azure.storage.blob import ContainerClient

__all__ = [
    "ROOT",
    "SERVICEBUS_CONFIG",
    "Ports",
    "Stack",
    "free_port",
    "main",
    "port_in_use",
    "running_stack",
]

logger = logging.getLogger("tools.stack")
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "local.settings.sample.json"
SUBSCRIBER_DIR = ROOT / "subscriber"
SUBSCRIBER_SAMPLE = SUBSCRIBER_DIR / "local.settings.sample.json"
#: This app's topic and subscriptions, in the official emulator's Config.json shape (the file
#: docker-compose.yml mounts into the official emulator too); tools/funcstack.json names it.
SERVICEBUS_CONFIG = Path(__file__).resolve().with_name("servicebus-config.json")
#: OpenTelemetry's service name of each app (the resource of what it exports locally).
SERVICE_NAMES = {"runner": "contacts-outbox", "subscriber": "contacts-subscriber"}


@dataclass
class Ports(ServicePorts):
    """funcstack's service ports (the well-known ones by default) and this app's hosts'."""

    runner: int = 7071
    subscriber: int = 7072

    @classmethod
    def free(cls) -> Ports:
        return cls(cosmos=0, servicebus=0, runner=0, azurite=(0, 0, 0), subscriber=0)


@dataclass
class Stack(LocalStack):
    config: StackConfig | None = field(default_factory=declared)
    ports: Ports = field(default_factory=Ports)
    with_azurite: bool = False
    with_runner: bool = True
    #: The subscriber app (subscriber/) in a host of its own, and its projection container.
    with_subscriber: bool = False
    subscriber_overrides: dict[str, str] = field(default_factory=dict)
    settings_overrides: dict[str, str] = field(default_factory=dict)
    # servicebus_max_message_size (funcstack's): change it and call `start_servicebus()` again
    # to move the namespace "to Premium".
    settings_file: Path | None = None
    #: The contacts app's host instances: 1 (one host, the default) or funcstack's plan
    #: (`funcstack.scaleout.parse_instances`): `3` (the whole app thrice), or its function
    #: groups apart as on Flex Consumption, `{"http": 2, "function:relay_events": 3}`; then
    #: `runner_app` holds them and `api_url` is their front's.
    runner_instances: int | str | Mapping[str, int] = 1
    #: The contacts container's physical partitions at create (None: as tools/funcstack.json
    #: declares).
    contacts_partitions: int | None = None
    #: Also write the generated settings here (`make run`: local.settings.json at the root,
    #: for `func start`, `make tail` and the operators' CLI) before any host starts.
    settings_copy: Path | None = None
    _own_database: str | None = field(default=None, init=False, repr=False)
    _own_topic: str | None = field(default=None, init=False, repr=False)
    _own_payloads: str | None = field(default=None, init=False, repr=False)
    # shared_servicebus (funcstack's): a Service Bus endpoint this stack uses and does not own
    # (a test process's, started with its control channel: tests/conftest.py's
    # `shared_servicebus`): the app's topic and its subscriptions (tools/servicebus-config.json)
    # are declared on it under a name of this stack's own (SERVICEBUS_TOPIC
    # `contact-events-<random>`) and deleted when it stops. A stack whose tests stop, freeze or
    # slow Service Bus, or change its message size, has an endpoint of its own (None).
    # shared_azurite (funcstack's): an Azurite this stack uses and does not own (another
    # stack's, which no test stops while this one runs): the claim check's blob container on it
    # is one of this stack's own (OUTBOX_PAYLOAD_CONTAINER `outbox-payloads-<random>`), created
    # when it starts and deleted when it stops (`with_azurite` stays off).
    # shared_cosmos (funcstack's): a Cosmos DB endpoint this stack does not own (a test
    # session's); the app's database on it is then one of this stack's own (COSMOS_DATABASE
    # `outbox-<random>`), dropped when it stops.

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Stack:
        """Endpoints, containers, settings, then the hosts: the subscriber's, and the contacts
        app's last, so that when its /health answers 200 the whole stack is up."""
        if self.shared_cosmos is not None and "COSMOS_DATABASE" not in self.settings_overrides:
            database = f"outbox-{secrets.token_hex(4)}"
            if self.config is not None:
                declared = json.loads(SAMPLE.read_text())["Values"]["COSMOS_DATABASE"]
                self.config = with_database(self.config, declared, database)
            self.settings_overrides = {**self.settings_overrides, "COSMOS_DATABASE": database}
            self._own_database = database
        if self.shared_servicebus is not None:
            self._shared_topic()
        if self.shared_azurite is not None:
            self._shared_payload_container()
        if self.contacts_partitions is not None and self.config is not None:
            self.config = with_partitions(
                self.config, self.contacts_container_name, self.contacts_partitions
            )
        try:
            # Cosmos DB, Service Bus, Azurite when asked; the declared containers provisioned
            # (the blob container of the claim check with Azurite).
            self.workdir.mkdir(parents=True, exist_ok=True)  # shared endpoints make none
            self.start_services()
            values = self.settings()
            self.settings_file = self.workdir / "local.settings.json"
            write_settings(self.settings_file, values)
            if self.settings_copy is not None:
                line = keep_user_settings(
                    self.settings_copy,
                    json.loads(self.settings_file.read_text()),
                    self.connections(),
                )
                logger.info("database and containers provisioned; %s", line)
            if self.with_subscriber:
                subscriber = self.start_subscriber()
                logger.info("subscriber host listening on %s", subscriber.url)
            if self.with_runner and self.scaled_out:
                app = self.start_runner_app()
                logger.info("contacts app on %d instances behind %s", len(app.instances), app.url)
            elif self.with_runner:
                runner = self.start_runner()
                logger.info("contacts app host listening on %s", runner.url)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Every part of its own stopped (LocalStack.stop); on a shared Cosmos DB endpoint, then
        its database dropped; on a shared Service Bus endpoint, its topic deleted; on a shared
        Azurite, its payload container deleted."""
        super().stop()
        payloads, self._own_payloads = self._own_payloads, None
        if payloads is not None and self.shared_azurite is not None:
            from azure.core.exceptions import AzureError
            from azure.storage.blob import BlobServiceClient

            with (
                suppress(AzureError),  # Azurite gone: nothing left to delete
                BlobServiceClient.from_connection_string(
                    self.shared_azurite.connection_string
                ) as service,
            ):
                service.delete_container(payloads)
        topic, self._own_topic = self._own_topic, None
        if topic is not None and self.shared_servicebus is not None:
            endpoint = self.shared_servicebus
            with suppress(OSError, RuntimeError):  # the endpoint gone: nothing left to delete
                control_request(
                    endpoint.host, endpoint.control_port or 0, {"op": "delete", "name": topic}
                )
        database, self._own_database = self._own_database, None
        if database is not None and self.shared_cosmos is not None:
            client = CosmosClient(
                self.shared_cosmos.endpoint,
                self.shared_cosmos.key,
                **self.shared_cosmos.client_options(),
            )
            with client, suppress(CosmosResourceNotFoundError):
                client.delete_database(database)

    # -- a shared Service Bus endpoint ---------------------------------------------------------

    def _shared_topic(self) -> None:
        """SERVICEBUS_TOPIC: a name of this stack's own on the shared endpoint (or the one its
        settings give), declared there by funcstack (`declare_servicebus`) from a copy of the
        config's Service Bus part in the workdir, the declared topic renamed; refused when the
        config declares entities that would be every stack's."""
        declared = json.loads(SAMPLE.read_text())["Values"]["SERVICEBUS_TOPIC"]
        name = self.settings_overrides.get("SERVICEBUS_TOPIC")
        if name is None:
            name = f"{declared}-{secrets.token_hex(4)}"
            self.settings_overrides = {**self.settings_overrides, "SERVICEBUS_TOPIC": name}
        if self.config is None or self.config.servicebus_file is None:
            return
        source = self.config.servicebus_file
        document = json.loads(source.read_text())
        namespaces = document["UserConfig"]["Namespaces"]
        others = []
        for namespace in namespaces:
            others += [q["Name"] for q in namespace.get("Queues") or []]
            for topic in namespace.get("Topics") or []:
                if topic["Name"] == declared:
                    topic["Name"] = name
                if topic["Name"] != name:
                    others.append(topic["Name"])
        if others:
            raise ValueError(
                f"shared_servicebus: {source} declares {', '.join(others)}, which would be "
                f"every stack's on the shared endpoint (only its topic {declared!r} is renamed)"
            )
        if not any(t["Name"] == name for ns in namespaces for t in ns.get("Topics") or []):
            raise ValueError(f"shared_servicebus: {source} declares no topic {declared!r}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        renamed = self.workdir / "servicebus-config.json"
        renamed.write_text(json.dumps(document, indent=2) + "\n")
        self.config = replace(self.config, servicebus_file=renamed)
        self._own_topic = name

    # -- a shared Azurite ---------------------------------------------------------------------

    def _shared_payload_container(self) -> None:
        """The claim check's container: a name of this stack's own on the shared Azurite, made
        there by the provisioning (the declared one renamed)."""
        if self.with_azurite:
            raise ValueError("shared_azurite: with_azurite would start an Azurite of its own")
        declared = json.loads(SAMPLE.read_text())["Values"]["OUTBOX_PAYLOAD_CONTAINER"]
        name = self.settings_overrides.get("OUTBOX_PAYLOAD_CONTAINER")
        if name is None:
            name = f"{declared}-{secrets.token_hex(4)}"
            self.settings_overrides = {**self.settings_overrides, "OUTBOX_PAYLOAD_CONTAINER": name}
        if self.config is not None:
            containers = tuple(
                name if c == declared else c for c in self.config.storage.blob_containers
            )
            self.config = replace(
                self.config, storage=replace(self.config.storage, blob_containers=containers)
            )
        self._own_payloads = name

    # -- parts, for fault injection ----------------------------------------------------------

    @property
    def runner(self) -> RunningRunner | None:
        return self.hosts.get("runner")

    @property
    def runner_app(self) -> AppInstances | None:
        """The contacts app's instances, when it runs scaled out (`runner_instances`)."""
        return self.scaled.get("runner")

    @property
    def subscriber(self) -> RunningRunner | None:
        return self.hosts.get("subscriber")

    @property
    def scaled_out(self) -> bool:
        """Whether the contacts app runs on several instances (`runner_instances`)."""
        return parse_instances(self.runner_instances) != {None: 1}

    def start_runner_app(self, **overrides: str) -> AppInstances:
        """The contacts app on the instances of `runner_instances`, behind one front on the
        runner's port (funcstack's `AppInstances`: kill, pause, resume, add_instance)."""
        assert self.settings_file is not None
        # this stack's settings as they are (LocalStack.host_app would add the sample's keys
        # missing from the file back: AzureWebJobsStorage on a stack without Azurite)
        scaled = AppInstances(
            self,
            "runner",
            HostOptions(ROOT, {**self.settings(), **overrides}, self.settings_file),
            parse_instances(self.runner_instances),
            port=self.ports.runner,
        )
        self.scaled["runner"] = scaled
        try:
            scaled.start()
        except ValueError as exc:  # a function group the app does not have
            self.scaled.pop("runner", None)
            raise PartStartError("runner", str(exc)) from None
        except BaseException:
            self.scaled.pop("runner", None)
            raise
        self.ports.runner = scaled.port
        return scaled

    def start_runner(self, **overrides: str) -> RunningRunner:
        """The contacts app (function_app.py) in a host of its own."""
        assert self.settings_file is not None
        if self.scaled_out:
            raise ValueError(
                f"runner_instances={self.runner_instances!r}: the contacts app "
                "runs scaled out; start it with start_runner_app()"
            )
        runner = self.run_host(
            "runner",
            ROOT,
            port=self.ports.runner,
            settings_file=self.settings_file,
            # Passed explicitly so they win over anything inherited from the environment.
            settings={**self.settings(), **overrides},
        )
        self.ports.runner = runner.port
        return runner

    def stop_runner(self) -> None:
        self.stop_part("runner")

    def kill_runner(self) -> None:
        self.kill_host("runner")

    def start_subscriber(self, **overrides: str) -> RunningRunner:
        """The subscriber app in a host of its own (the host runs one app per instance)."""
        subscriber = self.run_host(
            "subscriber",
            SUBSCRIBER_DIR,
            port=self.ports.subscriber,
            settings={**self.subscriber_settings(), **overrides},
        )
        self.ports.subscriber = subscriber.port
        return subscriber

    def stop_subscriber(self) -> None:
        self.stop_part("subscriber")

    # -- settings ----------------------------------------------------------------------------

    def settings(self) -> dict[str, str]:
        """The sample's values with this stack's real endpoints."""
        values: dict[str, str] = json.loads(SAMPLE.read_text())["Values"]
        assert self.cosmos is not None
        # the app verifies the endpoint's certificate, as in Azure: funcstack gives its hosts
        # the trust (funcstack's docs/cosmos.md, Certificate)
        values["CosmosDBConnection"] = self.cosmos.connection_string
        # ... and named in the file for the processes that read it, as the app's host has it:
        # `cosmos-outbox --settings local.settings.json` and `cosmos-outbox relay` verify the
        # endpoint with nothing exported (issue 92, M4: a traceback until SSL_CERT_FILE and
        # REQUESTS_CA_BUNDLE were)
        values.update(local_tls().environment())
        values["OTEL_SERVICE_NAME"] = SERVICE_NAMES["runner"]
        if self.servicebus is not None:
            values["ServiceBusConnection"] = self.servicebus.connection_string
        if self.azurite is not None:
            values["AzureWebJobsStorage"] = self.azurite.connection_string
        else:
            # No storage on this stack: the claim check is off (a large event is quarantined),
            # never pointed at the well-known port, where another stack's Azurite may listen.
            values.pop("AzureWebJobsStorage", None)
        values.update(self.settings_overrides)
        return values

    def payload_container(self) -> ContainerClient:
        """The claim check's container on this stack's Azurite, through the SDK."""
        from azure.storage.blob import ContainerClient

        assert self.azurite is not None
        return ContainerClient.from_connection_string(
            self.azurite.connection_string, self.settings()["OUTBOX_PAYLOAD_CONTAINER"]
        )

    def subscriber_settings(self) -> dict[str, str]:
        """The subscriber sample's values with this stack's real endpoints."""
        values: dict[str, str] = json.loads(SUBSCRIBER_SAMPLE.read_text())["Values"]
        main = self.settings()
        for name in (
            "CosmosDBConnection",
            "ServiceBusConnection",
            "AzureWebJobsStorage",
            "COSMOS_DATABASE",
            "SERVICEBUS_TOPIC",
            "OutboxPayloadStorage",
            "OUTBOX_PAYLOAD_CONTAINER",
            OTEL_ENV_VAR,
        ):
            if name in main:
                values[name] = main[name]
        if "AzureWebJobsStorage" not in main:
            values.pop("AzureWebJobsStorage", None)
        values["OTEL_SERVICE_NAME"] = SERVICE_NAMES["subscriber"]
        values.update(self.subscriber_overrides)
        return values

    def container(self, name: str) -> ContainerProxy:
        """A container of the app's database on this stack's Cosmos endpoint, through the SDK."""
        return self.container_client(self.settings()["COSMOS_DATABASE"], name)

    @property
    def contacts_container_name(self) -> str:
        """COSMOS_CONTAINER: the sample's, or this stack's override (known before it starts)."""
        name = self.settings_overrides.get("COSMOS_CONTAINER")
        return name or str(json.loads(SAMPLE.read_text())["Values"]["COSMOS_CONTAINER"])

    def contacts_container(self) -> ContainerProxy:
        """The app's container (events and contacts)."""
        return self.container(self.settings()["COSMOS_CONTAINER"])

    def split_contacts(self, range_id: str | None = None) -> list[str]:
        """A live split of one of the contacts container's physical partitions (None: the one
        holding the most documents); the children's ids."""
        return self.split(
            self.settings()["COSMOS_DATABASE"], self.contacts_container_name, range_id
        )

    def projections_container(self) -> ContainerProxy:
        """The subscriber's projection container."""
        return self.container(self.subscriber_settings()["PROJECTION_CONTAINER"])

    @property
    def api_url(self) -> str:
        """The contacts app's base URL: its host's, or its instances' front's."""
        if self.runner_app is not None:
            return self.runner_app.url
        assert self.runner is not None
        return self.runner.url


def with_database(config: StackConfig, database: str, name: str) -> StackConfig:
    """`config` with its Cosmos DB database `database` named `name`."""
    databases = tuple(
        replace(db, name=name) if db.name == database else db for db in config.cosmos.databases
    )
    return replace(config, cosmos=CosmosSpec(databases=databases))


def with_partitions(config: StackConfig, container: str, partitions: int) -> StackConfig:
    """`config` with `container` (in every database declaring it) created with `partitions`
    physical partitions; a `ValueError` when none declares it."""
    if not any(c.name == container for db in config.cosmos.databases for c in db.containers):
        raise ValueError(
            f"contacts_partitions: no container {container!r} declared in {config.path}"
        )
    databases = tuple(
        replace(
            db,
            containers=tuple(
                replace(c, physical_partitions=partitions) if c.name == container else c
                for c in db.containers
            ),
        )
        for db in config.cosmos.databases
    )
    return replace(config, cosmos=CosmosSpec(databases=databases))


def write_settings(path: Path, values: Mapping[str, str]) -> None:
    sample = json.loads(SAMPLE.read_text())
    sample["Values"] = dict(values)
    path.write_text(json.dumps(sample, indent=2) + "\n")


def keep_user_settings(
    path: Path, generated: Mapping[str, Any], connections: Mapping[str, str]
) -> str:
    """`local.settings.json` at `path` (for `func start`, `make tail`, the operators' CLI) is
    the user's, as funcstack treats an app's: written from `generated` when missing; else only
    local connection strings are moved to this stack's endpoints and missing keys added, every
    other value kept, the file written only when something changed. The one line that says
    what changed (names, never values)."""
    if not path.exists():
        path.write_text(json.dumps(generated, indent=2) + "\n")
        return f"{path.name}: created"
    document, changes = update_local_settings(json.loads(path.read_text()), generated, connections)
    if changes.changed:
        path.write_text(json.dumps(document, indent=2) + "\n")
    return changes.line()


# -- `make run` ---------------------------------------------------------------------------------

PIDFILE = ROOT / ".stack" / "pids.json"
EXAMPLE = json.dumps(
    {
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": "ada@example.com",
        "companyName": "Engines",
    },
    separators=(",", ":"),
)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)  # no per-request SDK HTTP logging
    running = running_stack(PIDFILE)
    if running:
        listed = ", ".join(f"{p.name} (pid {p.pid})" for p in running)
        print(
            f"a local stack is already running from this checkout: {listed}.\n"
            "Stop it first (Ctrl-C in its terminal); it was left untouched.",
            file=sys.stderr,
        )
        return 1
    PIDFILE.unlink(missing_ok=True)  # stale: none of its processes runs any more
    ports = Ports()
    busy = [
        p
        for p in (ports.cosmos, ports.servicebus, ports.runner, ports.subscriber, *ports.azurite)
        if port_in_use(p)
    ]
    if busy:
        print(
            f"ports already in use: {busy} (another local stack or emulator?); stop it first",
            file=sys.stderr,
        )
        return 1
    workdir = ROOT / ".stack"
    # The workers export telemetry as OTLP/JSON lines here (funcstack/otel.py; `make status`).
    otel_dir = workdir / "otel"
    # `SERVICEBUS_MAX_MESSAGE_SIZE=1048576 make run`: a namespace with Premium's larger messages.
    size = os.environ.get("SERVICEBUS_MAX_MESSAGE_SIZE")
    if size is not None and not size.isdigit():
        print("SERVICEBUS_MAX_MESSAGE_SIZE must be a number of bytes", file=sys.stderr)
        return 1
    stack = Stack(
        workdir=workdir,
        ports=ports,
        with_azurite=True,
        with_subscriber=True,
        state_dir=workdir / "state",
        settings_overrides=run_settings(otel_dir),
        servicebus_max_message_size=int(size) if size else None,
        settings_copy=ROOT / "local.settings.json",
    )
    return serve(stack, PIDFILE)


def run_settings(otel_dir: Path) -> dict[str, str]:
    """`make run`'s settings over the sample's: telemetry to files, and the operators' console's
    sign-in through funcstack's stand-in for App Service Authentication
    (packages/funcstack/docs/functions-host.md, Signing in), its sessions kept across restarts
    of the app while this stack runs."""
    return {
        OTEL_ENV_VAR: str(otel_dir),
        "FUNCSTACK_SIGN_IN": "true",
        "FUNCSTACK_SIGN_IN_ROLES": OPERATOR_ROLE,
        "FUNCSTACK_SIGN_IN_SECRET": secrets.token_urlsafe(24),
        # the console believes the stand-in's principal on this local host (funcstack strips
        # client-sent ones): packages/cosmos-outbox-operators/README.md
        "OUTBOX_CONSOLE_SIGN_IN": "local-stand-in",
    }


def serve(stack: Stack, pidfile: Path) -> int:
    """Start the stack, print the banner, serve until Ctrl-C (SIGINT), SIGTERM or SIGHUP, or
    until a part dies; stop everything (funcstack's serving loop). A Functions host that dies
    (the contacts app's, the subscriber's) is started again on its port, as Azure restarts a
    host (funcstack's `host_restart`: after 1 s, doubling after each failure at start, given up
    after 3 in a row), each exit and restart a line in this terminal; the banner's URLs stay
    true. Exit status: 0 after a stop asked for, 130 when interrupted while starting, 1 when a
    part did not start, died (an endpoint) or was given up (a host failing at start; the cause
    on stderr in a line or two). The processes are recorded in `pidfile` while they run (again
    when a host is restarted)."""
    if stack.host_restart is None:
        stack.host_restart = RestartPolicy()
    return serve_stack(
        stack,
        pidfile,
        banner=lambda: banner(stack),
        prog="make run",
        starting="starting the local stack (Cosmos, Service Bus, Azurite, Functions hosts for "
        "the subscriber and the contacts app)...",
    )


def banner(stack: Stack) -> str:
    api = stack.api_url
    assert stack.subscriber is not None
    projections = f"{stack.subscriber.url}/projections/contacts"
    return f"""
  API          {api}   (OpenAPI: {api}/openapi.json, health: {api}/health)
  Console      {api}/outbox/console   the operators' console (sign in with any name and the
               role Outbox.Operator: funcstack's stand-in for App Service Authentication)
  Cosmos DB    {stack.cosmos.endpoint if stack.cosmos else ""}  (well-known emulator key)
  Service Bus  amqp://127.0.0.1:{stack.ports.servicebus}  topic contact-events / all-events
  Subscriber   subscriber/ on port {stack.ports.subscriber}: contact-events / contact-projection
               -> Cosmos container contact-projections (log: .stack/subscriber.log)
  Projections  {projections}/<id>   {projections}?pageSize=10
  Azurite      blob/queue/table on {", ".join(map(str, stack.ports.azurite))}; large events' bodies
               (the claim check) in its container outbox-payloads
  Settings     local.settings.json (yours, kept: only local endpoints are moved; `func start` works)
  State        .stack/state (kept across restarts; `make reset` forgets it)
  Logs         .stack/*.log      Watch events: make tail
  Telemetry    .stack/otel/{{metrics,traces}}.jsonl (OTLP/JSON)   Summary: make status
  Operators    .venv/bin/python -m tools.admin status   (journey, quarantine, deadletters, ...:
               cosmos-outbox-operators' commands on these stores, local.settings.json)

  curl -s -X POST {api}/contacts -H 'content-type: application/json' \\
       -d '{EXAMPLE}'
  curl -s {projections}/<id from the answer>

Ctrl-C stops everything."""
