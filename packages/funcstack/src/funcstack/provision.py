"""Create the declared Cosmos DB databases and containers, and Azurite's blob containers and
queues, idempotently, and say what was done: ``created``, ``exists`` (as declared), or ``updated``
(default TTL or indexing policy brought to the declaration, or a container with fewer physical
partitions than declared split until it has them). A container whose partition key differs
from the declared one cannot be changed in place: ProvisionError names it.

A container declaring several physical partitions is created with the local endpoint's header
``x-funcstack-physical-partitions`` (the endpoint lays them out as the service lays out a
container whose throughput needs that many); one with more than declared (split since) keeps
them: physical partitions never merge, as in Azure.

The Service Bus part needs no provisioning step: the local endpoint starts with the entities of
its ``Config.json``, as the official emulator does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from azure.core.exceptions import ResourceExistsError
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey
from azure.cosmos.exceptions import CosmosResourceExistsError

from funcstack.config import ContainerSpec, CosmosSpec, StorageSpec
from funcstack.cosmos._control import CosmosControlError, split_partition

__all__ = [
    "ProvisionError",
    "ProvisionReport",
    "Provisioned",
    "provision_cosmos",
    "provision_storage",
]


class ProvisionError(RuntimeError):
    """A declared resource conflicts with what exists (one line: which, and how)."""


@dataclass(frozen=True)
class Provisioned:
    """One resource: ``database`` or ``container`` (service ``cosmos``, name ``db`` or
    ``db/container``) or ``blob container`` or ``queue`` (service ``storage``), and
    ``created``, ``exists`` or ``updated``."""

    kind: str
    name: str
    outcome: str
    service: str = "cosmos"
    #: A container's physical partitions (partition key ranges) once provisioned.
    partitions: int | None = None


@dataclass
class ProvisionReport:
    items: list[Provisioned] = field(default_factory=list)

    @property
    def created(self) -> list[str]:
        return [i.name for i in self.items if i.outcome == "created"]

    def lines(self) -> list[str]:
        return [
            f"{i.service} {i.kind} {i.name}: {i.outcome}"
            + (
                ""
                if i.partitions is None
                else f" ({i.partitions} physical partition{'s' if i.partitions != 1 else ''})"
            )
            for i in self.items
        ]


#: What the service adds to every indexing policy it returns.
_ETAG_EXCLUSION = {"path": '/"_etag"/?'}


def _policy_differs(declared: Mapping[str, Any], stored: Mapping[str, Any]) -> bool:
    """Whether a key of the declared policy has another value stored (the service completes a
    policy: keys the declaration leaves out are not compared; its ``_etag`` exclusion is not)."""
    for key, value in declared.items():
        current = stored.get(key)
        if key == "excludedPaths" and isinstance(current, list):
            current = [p for p in current if p != _ETAG_EXCLUSION]
            value = [p for p in value if p != _ETAG_EXCLUSION]
        if current != value:
            return True
    return False


#: The local endpoint's header asking a container create for that many physical partitions.
PARTITIONS_HEADER = "x-funcstack-physical-partitions"


def _partitions(
    database: DatabaseProxy, proxy: ContainerProxy, spec: ContainerSpec, endpoint: str
) -> bool:
    """Split an existing container until it has the declared physical partitions; whether it
    split (more than declared is left as it is: partitions never merge, as in Azure)."""
    have = len(list(proxy.read_feed_ranges(force_refresh=True)))
    if have >= spec.physical_partitions:
        return False
    try:
        for _ in range(spec.physical_partitions - have):
            split_partition(endpoint, database.id, spec.name)
    except CosmosControlError as exc:
        raise ProvisionError(
            f"container {database.id}/{spec.name} has {have} physical partition(s), declared "
            f"{spec.physical_partitions}: it cannot be split here ({exc})"
        ) from None
    return True


def _container(
    database: DatabaseProxy, spec: ContainerSpec, endpoint: str, *, replace: bool = True
) -> str:
    options: dict[str, Any] = {}
    if spec.default_ttl is not None:
        options["default_ttl"] = spec.default_ttl
    if spec.indexing_policy is not None:
        options["indexing_policy"] = dict(spec.indexing_policy)
    if spec.physical_partitions > 1:
        # azure-core's per-request headers (the SDK's own initial_headers is not sent)
        options["headers"] = {PARTITIONS_HEADER: str(spec.physical_partitions)}
    try:
        database.create_container(
            spec.name, partition_key=PartitionKey(path=spec.partition_key), **options
        )
        return "created"
    except CosmosResourceExistsError:
        pass
    proxy = database.get_container_client(spec.name)
    stored = proxy.read()
    paths = list((stored.get("partitionKey") or {}).get("paths") or [])
    if paths != [spec.partition_key]:
        raise ProvisionError(
            f"container {database.id}/{spec.name} exists with partition key "
            f"{', '.join(paths) or 'none'}, declared {spec.partition_key}: a partition key "
            "cannot change (remove the container, or start with --fresh)"
        )
    split = _partitions(database, proxy, spec, endpoint)
    ttl_differs = stored.get("defaultTtl") != spec.default_ttl
    policy_differs = spec.indexing_policy is not None and _policy_differs(
        spec.indexing_policy, stored.get("indexingPolicy") or {}
    )
    if not ttl_differs and not policy_differs:
        return "updated" if split else "exists"
    if not replace:
        differ = [
            n for n, d in (("DefaultTtl", ttl_differs), ("IndexingPolicy", policy_differs)) if d
        ]
        raise ProvisionError(
            f"container {database.id}/{spec.name} exists with other settings: "
            f"{', '.join(differ)} (another run's, on shared services)"
        )
    database.replace_container(
        proxy,
        partition_key=PartitionKey(path=spec.partition_key),
        default_ttl=spec.default_ttl,
        indexing_policy=dict(
            spec.indexing_policy
            if spec.indexing_policy is not None
            else stored.get("indexingPolicy") or {}
        ),
    )
    return "updated"


def provision_cosmos(
    spec: CosmosSpec,
    connection_string: str,
    *,
    verify_tls: bool = True,
    client_options: Mapping[str, Any] | None = None,
    replace: bool = True,
) -> ProvisionReport:
    """Create what ``spec`` declares on the endpoint of ``connection_string``, through a client
    made with ``client_options`` (the local endpoint's: ``CosmosEndpoint.client_options()``,
    which verify its certificate), else with ``connection_verify=verify_tls`` (the process's
    trust store). A container there with another time to live or indexing policy is changed
    to the declared ones; with ``replace=False`` (a shared endpoint, where it is another run's)
    that is a ``ProvisionError`` naming it."""
    report = ProvisionReport()
    if not spec.databases:
        return report
    options: dict[str, Any] = {"connection_verify": verify_tls}
    if client_options is not None:
        options = dict(client_options)
    client = CosmosClient.from_connection_string(connection_string, **options)
    endpoint = str(client.client_connection.url_connection)
    for db in spec.databases:
        try:
            database = client.create_database(db.name)
            outcome = "created"
        except CosmosResourceExistsError:
            database = client.get_database_client(db.name)
            outcome = "exists"
        report.items.append(Provisioned("database", db.name, outcome))
        for container in db.containers:
            outcome = _container(database, container, endpoint, replace=replace)
            ranges = database.get_container_client(container.name).read_feed_ranges(
                force_refresh=True
            )
            report.items.append(
                Provisioned(
                    "container",
                    f"{db.name}/{container.name}",
                    outcome,
                    partitions=len(list(ranges)),
                )
            )
    return report


def provision_storage(spec: StorageSpec, connection_string: str) -> ProvisionReport:
    """Create the blob containers ``spec`` declares, private, and its queues, on the storage
    account of ``connection_string`` (Azurite's). The storage SDKs are imported here, by a
    stack that declares storage (0.1 s of CPU that every ``funcstack run`` paid)."""
    from azure.storage.blob import BlobServiceClient
    from azure.storage.queue import QueueServiceClient

    report = ProvisionReport()
    if spec.blob_containers:
        with BlobServiceClient.from_connection_string(connection_string) as service:
            for name in spec.blob_containers:
                try:
                    service.create_container(name)  # no public access: private
                    outcome = "created"
                except ResourceExistsError:
                    outcome = "exists"
                report.items.append(Provisioned("blob container", name, outcome, service="storage"))
    if spec.queues:
        with QueueServiceClient.from_connection_string(connection_string) as queues:
            for name in spec.queues:
                try:
                    # an existing queue (204, or 409 with other metadata) raises, as the SDK
                    # documents it
                    queues.create_queue(name)
                    outcome = "created"
                except ResourceExistsError:
                    outcome = "exists"
                report.items.append(Provisioned("queue", name, outcome, service="storage"))
    return report
