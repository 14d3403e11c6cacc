"""The shipped templates held to the library's own start checks: every lease container the
repository declares -- in the Bicep (deploy/), in each funcstack.json (the local stack's, the
examples', the packages' test fixtures'), and in the docs' JSON and Python blocks -- is started
on by cosmos-changefeed's processor as Cosmos DB would present it (its partition key path, TTL on
or off), and the start says nothing: no warning, no refusal. A lease container with TTL off made
the processor warn on every first start of the project's own app and relay ("the
initialisation lock ... is then never removed, and every instance waits for it for ever"), on
`make run` only in .stack/runner.log.

The processor's start reads two facts of a lease container (`CosmosLeaseStore`): its partition
key path (refused unless /id or /partitionKey) and whether it expires documents (its
`defaultTtl` is set). `DeclaredLeases` answers those two as Cosmos DB answers them for the
declared properties; the rest of the start is the library's own, on the in-memory feed."""

from __future__ import annotations

import ast
import json
import logging
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cosmos_changefeed import ChangeFeedProcessor, InMemoryLeaseStore
from cosmos_changefeed.testing import InMemoryFeed, InMemoryFeedSource
from funcstack.deadlines import LOOPBACK
from tests.deploy import templates as t
from tools.docblocks import FENCE, python_blocks

ROOT = t.ROOT
CONTAINERS = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers"


@dataclass(frozen=True)
class Declared:
    """A lease container as a template declares it, in Cosmos DB's terms."""

    where: str
    name: str
    partition_key_path: str
    default_ttl: int | None


class DeclaredLeases(InMemoryLeaseStore):
    """The lease store of a container with `declared`'s properties: what Cosmos DB answers the
    processor's two questions with (`partitionKey.paths`: a path the processor cannot use is
    refused as `CosmosLeaseStore` refuses it, by the same check; `defaultTtl` set or not)."""

    def __init__(self, declared: Declared) -> None:
        super().__init__(declared.partition_key_path)
        self.declared = declared

    def expires_documents(self) -> bool:
        return self.declared.default_ttl is not None


def start_says(declared: Declared) -> list[str]:
    """What the processor's start on `declared` logs at WARNING or above, or raises."""
    records: list[str] = []

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Kept(logging.WARNING)
    library = logging.getLogger("cosmos_changefeed")
    library.addHandler(handler)
    try:
        leases = DeclaredLeases(declared)
        with ChangeFeedProcessor(
            InMemoryFeedSource(InMemoryFeed(partitions=1)),
            leases,
            processor_name="relay.",
            instance_name="template-check",
            handler=lambda context, changes: None,
            poll_delay=0.01,
        ) as processor:
            processor.wait_until_listening(timeout=LOOPBACK)
    except Exception as exc:  # a refusal at the start: what the template would meet
        records.append(f"refused: {type(exc).__name__}: {exc}")
    finally:
        library.removeHandler(handler)
    return records


# -- the templates ---------------------------------------------------------------------------


def bicep_leases() -> list[Declared]:
    """The Bicep's lease container: the container resource named by `leaseContainerName`."""
    found = []
    for resource in t.resources(CONTAINERS):
        body = resource.properties["resource"]
        if body["id"] != "leaseContainerName":
            continue
        ttl = t.value(body.get("defaultTtl"))
        found.append(
            Declared(
                f"{resource.file.relative_to(ROOT)} ({resource.symbol})",
                body["id"],
                body["partitionKey"]["paths"][0],
                ttl,
            )
        )
    return found


def tracked(pattern: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed]


def lease_names(folder: Path) -> set[str]:
    """The lease containers of the app in `folder`: its settings' COSMOS_LEASE_CONTAINER, and
    any container named for leases."""
    sample = folder / "local.settings.sample.json"
    if not sample.exists():
        return set()
    values = json.loads(sample.read_text("utf-8")).get("Values", {})
    return {values["COSMOS_LEASE_CONTAINER"]} if "COSMOS_LEASE_CONTAINER" in values else set()


def funcstack_leases(config: dict[str, Any], where: str, named: set[str]) -> list[Declared]:
    """The lease containers a funcstack.json (or a document's copy of one) declares."""
    return [
        Declared(
            f"{where} ({database['Name']}/{container['Name']})",
            container["Name"],
            container["PartitionKey"],
            container.get("DefaultTtl"),
        )
        for database in config.get("Cosmos", {}).get("Databases", [])
        for container in database.get("Containers", [])
        if container["Name"] in named or container["Name"].endswith("leases")
    ]


#: A `//` comment of a jsonc block (after a space, a comma or a bracket: never inside a URL).
COMMENT = re.compile(r"(?<=[\s,{\[])//.*$", re.MULTILINE)


def doc_blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line, fence info, text) of each fenced block of a Markdown file."""
    blocks, lines = [], path.read_text("utf-8").splitlines()
    number = 0
    while number < len(lines):
        opened = FENCE.match(lines[number])
        if not opened:
            number += 1
            continue
        closing = next(i for i in range(number + 1, len(lines)) if FENCE.match(lines[i]))
        blocks.append((number + 1, opened["info"].strip(), "\n".join(lines[number + 1 : closing])))
        number = closing + 1
    return blocks


def docs_leases() -> list[Declared]:
    """The lease containers the docs declare: in JSON blocks shaped like funcstack.json, and in
    Python blocks that create one (`create_container_if_not_exists("...leases", ...)`)."""
    found: list[Declared] = []
    for path in tracked("*.md"):
        if path.name == "CHANGELOG.md":
            continue
        where = str(path.relative_to(ROOT))
        for line, info, text in doc_blocks(path):
            if info.split(" ")[0] in ("json", "jsonc") and '"Containers"' in text:
                config = json.loads(COMMENT.sub("", text))
                found += funcstack_leases(config, f"{where}:{line}", set())
        for block in python_blocks(path):
            found += python_leases(block.source, f"{where}:{block.start_line}")
    return found


def python_leases(source: str, where: str) -> list[Declared]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("create_container", "create_container_if_not_exists")
        ):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        name = node.args[0] if node.args else keywords.get("id")
        if not (isinstance(name, ast.Constant) and "lease" in str(name.value)):
            continue
        key = node.args[1] if len(node.args) > 1 else keywords["partition_key"]
        assert isinstance(key, ast.Call), f"{where}: the lease container's partition key"
        path = (key.args or [k.value for k in key.keywords if k.arg == "path"])[0]
        ttl = keywords.get("default_ttl")
        found.append(
            Declared(
                where,
                str(name.value),
                ast.literal_eval(path),
                None if ttl is None else ast.literal_eval(ttl),
            )
        )
    return found


def every_declared() -> list[Declared]:
    found = bicep_leases()
    for config in tracked("*funcstack.json"):
        where = str(config.relative_to(ROOT))
        text = COMMENT.sub("", config.read_text("utf-8"))  # funcstack reads jsonc
        found += funcstack_leases(json.loads(text), where, lease_names(config.parent))
    return found + docs_leases()


DECLARED = every_declared()


def test_the_templates_lease_containers_are_found() -> None:
    where = {d.where.split(" ")[0].split(":")[0] for d in DECLARED}
    assert {
        "deploy/modules/cosmos.bicep",
        "tools/funcstack.json",
        "examples/orders/funcstack.json",
        "docs/quick-start.md",
        "docs/your-own-app.md",
        "packages/cosmos-changefeed/README.md",
    } <= where, sorted(where)


@pytest.mark.parametrize("declared", DECLARED, ids=lambda d: d.where)
def test_the_processor_starts_on_each_declared_lease_container_without_a_word(
    declared: Declared,
) -> None:
    said = start_says(declared)
    assert not said, f"{declared.where}: the processor's start on it says {said}"


def test_a_lease_container_without_ttl_trips_the_check() -> None:
    """The harness itself: TTL off is the processor's warning; another partition key its
    refusal (so a template that trips a start check fails above)."""
    off = start_says(Declared("off", "leases", "/id", None))
    assert any("TTL off" in line and "never removed" in line for line in off), off
    assert start_says(Declared("on", "leases", "/id", -1)) == []
    refused = start_says(Declared("pk", "leases", "/tenant", -1))
    assert refused and refused[0].startswith("refused: "), refused
