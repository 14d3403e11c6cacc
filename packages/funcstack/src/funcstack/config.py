"""Declared resources: what an app needs of the local stack, in one file.

The file is the official Service Bus emulator's ``Config.json`` (``UserConfig``: namespaces,
queues, topics, subscriptions, rules), unchanged, plus an optional ``Cosmos`` part beside
``UserConfig`` and an optional ``Storage`` part (Azurite's private blob containers and its
queues)::

    {
      "Storage": {"BlobContainers": [{"Name": "receipts"}], "Queues": [{"Name": "imports"}]},
      "Cosmos": {
        "Databases": [
          {"Name": "shop", "Containers": [
            {"Name": "orders", "PartitionKey": "/customerId", "DefaultTtl": -1,
             "IndexingPolicy": "indexing-policy.json", "PhysicalPartitions": 4},
            {"Name": "leases", "PartitionKey": "/id"}
          ]}
        ]
      },
      "UserConfig": { "Namespaces": [ ... the Service Bus emulator's Config.json ... ] }
    }

``PhysicalPartitions`` (default 1) is how many partition key ranges a container starts with,
as a container provisioned with more throughput starts with more in Azure; a running stack
splits them further on request (``funcstack split``).

Each part may instead name a file, relative to this one: ``"Cosmos": "cosmos.json"`` (a
file holding ``{"Databases": [...]}``), ``"Storage": "storage.json"`` (a file holding
``{"BlobContainers": [...], "Queues": [...]}``), ``"ServiceBus": "servicebus-config.json"``
(an official ``Config.json``; instead of ``UserConfig``). A container's ``IndexingPolicy`` is
an object or the path of a JSON file, relative to the file that names it. ``//`` and ``/* */``
comments are allowed, as the official emulator allows them in its ``Config.json``. Nothing has a
default name: what is not declared is not created.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigError",
    "ContainerSpec",
    "CosmosSpec",
    "DatabaseSpec",
    "StackConfig",
    "StorageSpec",
    "load_config",
    "read_json",
]


class ConfigError(ValueError):
    """A declared-resources file that cannot be used: the file and the cause, in one line."""


def _strip_comments(text: str) -> str:
    """JSON with ``//`` and ``/* */`` comments outside strings -> plain JSON (line and column
    numbers kept: a comment becomes spaces, its newlines stay)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end == -1 else end
            out.append(" " * (end - i))
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end == -1 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def read_json(path: Path) -> Any:
    """A JSON file (comments allowed); ConfigError naming the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    try:
        return json.loads(_strip_comments(text))
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


#: The most physical partitions a container may declare (the local endpoint's limit at create).
MAX_PHYSICAL_PARTITIONS = 64


@dataclass(frozen=True)
class ContainerSpec:
    """A Cosmos DB container: name, partition key path, default TTL (None: off; -1: on, items
    decide), indexing policy (None: the service's default), and how many physical partitions
    (partition key ranges) it starts with (1 by default, as a container of 400 RU/s in Azure;
    it may be split later)."""

    name: str
    partition_key: str
    default_ttl: int | None = None
    indexing_policy: Mapping[str, Any] | None = None
    physical_partitions: int = 1


@dataclass(frozen=True)
class DatabaseSpec:
    name: str
    containers: tuple[ContainerSpec, ...] = ()


@dataclass(frozen=True)
class CosmosSpec:
    databases: tuple[DatabaseSpec, ...] = ()


@dataclass(frozen=True)
class StorageSpec:
    """Azurite's blob containers, by name, each created private (no anonymous access), and
    its queues, by name."""

    blob_containers: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()


@dataclass(frozen=True)
class StackConfig:
    """A loaded declared-resources file: the Cosmos DB part, the Storage part, and the file
    holding the Service Bus part in the official emulator's format (the endpoint reads it as
    it is)."""

    path: Path | None = None
    cosmos: CosmosSpec = field(default_factory=CosmosSpec)
    servicebus_file: Path | None = None
    storage: StorageSpec = field(default_factory=StorageSpec)

    def summary(self) -> list[str]:
        """What is declared, one line per database, for blob containers, for Storage queues and
        per Service Bus namespace."""
        lines = [
            f"cosmos database {db.name}: containers "
            + (", ".join(c.name for c in db.containers) or "none")
            for db in self.cosmos.databases
        ]
        if self.storage.blob_containers:
            lines.append("storage: blob containers " + ", ".join(self.storage.blob_containers))
        if self.storage.queues:
            lines.append("storage: queues " + ", ".join(self.storage.queues))
        if self.servicebus_file is not None:
            namespace = read_json(self.servicebus_file)["UserConfig"]["Namespaces"][0]
            queues = [str(q.get("Name")) for q in namespace.get("Queues") or []]
            topics = [
                f"{t.get('Name')} ("
                + (
                    ", ".join(str(s.get("Name")) for s in t.get("Subscriptions") or [])
                    or "no subscriptions"
                )
                + ")"
                for t in namespace.get("Topics") or []
            ]
            lines.append(
                "service bus: queues "
                + (", ".join(queues) or "none")
                + "; topics "
                + (", ".join(topics) or "none")
            )
        return lines


_TOP_KEYS = {"Cosmos", "ServiceBus", "Storage", "UserConfig", "$schema"}
_CONTAINER_KEYS = {"Name", "PartitionKey", "DefaultTtl", "IndexingPolicy", "PhysicalPartitions"}


def _expect(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = {dict: "an object", list: "a list", str: "a string", int: "an integer"}
        raise ConfigError(f"{where} must be {names.get(kind, kind.__name__)}")
    return value


def _unknown(raw: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(raw) - allowed)
    if extra:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(extra)} (allowed: {', '.join(sorted(allowed))})"
        )


def _container(raw: Any, base: Path, where: str) -> ContainerSpec:
    raw = _expect(raw, dict, where)
    _unknown(raw, _CONTAINER_KEYS, where)
    name = _expect(raw.get("Name"), str, f"{where}: Name")
    where = f"{where} ({name})"
    key = _expect(raw.get("PartitionKey"), str, f"{where}: PartitionKey")
    if not key.startswith("/") or len(key) < 2:
        raise ConfigError(f"{where}: PartitionKey must be a path such as /id, not {key!r}")
    ttl = raw.get("DefaultTtl")
    if ttl is not None:
        ttl = _expect(ttl, int, f"{where}: DefaultTtl")
        if ttl == 0 or ttl < -1:
            raise ConfigError(
                f"{where}: DefaultTtl must be -1 (on, items decide) or a number "
                f"of seconds > 0, not {ttl}"
            )
    policy = raw.get("IndexingPolicy")
    if isinstance(policy, str):
        policy = _expect(read_json(base / policy), dict, f"{base / policy}")
    elif policy is not None:
        policy = _expect(policy, dict, f"{where}: IndexingPolicy")
    partitions = raw.get("PhysicalPartitions", 1)
    partitions = _expect(partitions, int, f"{where}: PhysicalPartitions")
    if not 1 <= partitions <= MAX_PHYSICAL_PARTITIONS:
        raise ConfigError(
            f"{where}: PhysicalPartitions must be from 1 to "
            f"{MAX_PHYSICAL_PARTITIONS}, not {partitions}"
        )
    return ContainerSpec(
        name=name,
        partition_key=key,
        default_ttl=ttl,
        indexing_policy=policy,
        physical_partitions=partitions,
    )


def _cosmos(raw: Any, base: Path, where: str) -> CosmosSpec:
    if isinstance(raw, str):
        file = base / raw
        return _cosmos(read_json(file), file.parent, str(file))
    raw = _expect(raw, dict, where)
    _unknown(raw, {"Databases"}, where)
    databases = []
    for i, entry in enumerate(_expect(raw.get("Databases", []), list, f"{where}: Databases")):
        at = f"{where}: Databases[{i}]"
        entry = _expect(entry, dict, at)
        _unknown(entry, {"Name", "Containers"}, at)
        name = _expect(entry.get("Name"), str, f"{at}: Name")
        containers = tuple(
            _container(c, base, f"{where}: database {name}, Containers[{j}]")
            for j, c in enumerate(_expect(entry.get("Containers", []), list, f"{at}: Containers"))
        )
        seen = [c.name for c in containers]
        if len(set(seen)) != len(seen):
            raise ConfigError(f"{where}: database {name} declares a container twice")
        databases.append(DatabaseSpec(name=name, containers=containers))
    return CosmosSpec(databases=tuple(databases))


#: Blob Storage's container names and Storage queues' names follow the same rule: 3-63
#: lowercase letters, digits and single hyphens, starting and ending with a letter or digit.
_STORAGE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}")
_STORAGE_KINDS = {"BlobContainers": "blob container", "Queues": "queue"}


def _storage_names(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    """The names of the ``key`` entries (``[{"Name": ...}]``), each checked."""
    kind = _STORAGE_KINDS[key]
    names: list[str] = []
    entries = _expect(raw.get(key, []), list, f"{where}: {key}")
    for i, entry in enumerate(entries):
        at = f"{where}: {key}[{i}]"
        entry = _expect(entry, dict, at)
        _unknown(entry, {"Name"}, at)
        name = _expect(entry.get("Name"), str, f"{at}: Name")
        if not _STORAGE_NAME.fullmatch(name):
            raise ConfigError(
                f"{at}: Name {name!r} is not a {kind} name (3-63 lowercase "
                "letters, digits and single hyphens, starting and ending with a "
                "letter or digit)"
            )
        if name in names:
            raise ConfigError(f"{where}: {kind} {name} is declared twice")
        names.append(name)
    return tuple(names)


def _storage(raw: Any, base: Path, where: str) -> StorageSpec:
    if isinstance(raw, str):
        file = base / raw
        return _storage(read_json(file), file.parent, str(file))
    raw = _expect(raw, dict, where)
    _unknown(raw, set(_STORAGE_KINDS), where)
    return StorageSpec(
        blob_containers=_storage_names(raw, "BlobContainers", where),
        queues=_storage_names(raw, "Queues", where),
    )


def _check_servicebus(file: Path, where: str) -> None:
    raw = read_json(file)
    try:
        namespaces = raw["UserConfig"]["Namespaces"]
        ok = isinstance(namespaces, list) and bool(namespaces)
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise ConfigError(
            f"{where}: the Service Bus part needs UserConfig.Namespaces with one "
            "namespace (the official emulator's Config.json format)"
        )


def load_config(path: str | Path) -> StackConfig:
    """Read and check a declared-resources file (ConfigError: the file and the cause)."""
    path = Path(path).resolve()
    raw = read_json(path)
    where = str(path)
    raw = _expect(raw, dict, where)
    _unknown(raw, _TOP_KEYS, where)
    base = path.parent
    cosmos = _cosmos(raw["Cosmos"], base, f"{where}: Cosmos") if "Cosmos" in raw else CosmosSpec()
    storage = (
        _storage(raw["Storage"], base, f"{where}: Storage") if "Storage" in raw else StorageSpec()
    )
    servicebus: Path | None = None
    if "UserConfig" in raw and "ServiceBus" in raw:
        raise ConfigError(
            f"{where}: give the Service Bus part either inline (UserConfig) or as "
            "a file (ServiceBus), not both"
        )
    if "UserConfig" in raw:
        servicebus = path
    elif "ServiceBus" in raw:
        servicebus = base / _expect(raw["ServiceBus"], str, f"{where}: ServiceBus")
    if servicebus is not None:
        _check_servicebus(servicebus, where if servicebus == path else str(servicebus))
    return StackConfig(path=path, cosmos=cosmos, servicebus_file=servicebus, storage=storage)
