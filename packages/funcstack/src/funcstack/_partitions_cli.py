"""``funcstack split``, ``funcstack merge`` and ``funcstack partitions``: a container's physical
partitions on the stack running from this folder (``funcstack run`` / ``funcstack up``).

Azure splits a physical partition on its own (past 50 GB, or when a throughput raise needs
more partitions) and gives no call to do it; it merges partitions when asked through its
control plane (``az cosmosdb sql container merge``). An app meets either through its SDK (the
old range answers 410 with sub-status 1002, the SDK refreshes its routing map and carries on
with what replaced it). ``funcstack split DATABASE CONTAINER [--range ID]`` and ``funcstack
merge DATABASE CONTAINER [--range ID ...]`` make one happen now, so a running app can be watched
going through it; ``funcstack partitions DATABASE CONTAINER`` lists the live ranges and their
documents.

The stack is found through what it keeps in ``.funcstack/``: its processes (``pids.json``, each
checked to be the very process recorded) and the line its Cosmos DB endpoint wrote to
``cosmos.log`` when it was ready (``cosmos endpoint ready at URL (pid N)``); ``--endpoint URL``
names an endpoint instead (a stack started by the pytest plugin, say).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from funcstack.cosmos._control import (
    CosmosControlError,
    PhysicalPartition,
    merge_partitions,
    physical_partitions,
    split_partition,
)

__all__ = [
    "PARTITION_COMMANDS",
    "PartitionCommandError",
    "add_partition_commands",
    "find_cosmos_endpoint",
    "run_partition_command",
]

PARTITION_COMMANDS = frozenset({"split", "merge", "partitions"})
_READY = re.compile(r"cosmos endpoint ready at (\S+) \(pid (\d+)\)")


class PartitionCommandError(Exception):
    """What stops ``split`` / ``merge`` / ``partitions``, in one line (exit status 1)."""


def add_partition_commands(commands: Any, state_folder: str) -> None:
    """Add ``split``, ``merge`` and ``partitions`` to the command's subparsers."""

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("database", help="the database's name")
        sub.add_argument("container", help="the container's name")
        sub.add_argument(
            "--endpoint",
            default=None,
            metavar="URL",
            help="the Cosmos DB endpoint (default: the one of the stack running "
            f"from this folder, found in {state_folder}/)",
        )

    split = commands.add_parser(
        "split",
        help="split a physical partition of a container of the running stack, as "
        "Azure does on its own",
    )
    common(split)
    split.add_argument(
        "--range",
        default=None,
        metavar="ID",
        dest="range_id",
        help="the partition key range to split (default: the one holding the most documents)",
    )
    merge = commands.add_parser(
        "merge",
        help="merge adjacent physical partitions of a container of the running stack into "
        "one, as Azure's partition merge does",
    )
    common(merge)
    merge.add_argument(
        "--range",
        action="append",
        default=None,
        metavar="ID",
        dest="range_ids",
        help="a partition key range to merge (repeat: two or more adjacent ones; default: "
        "the two adjacent ranges holding the fewest documents together)",
    )
    common(
        commands.add_parser(
            "partitions", help="the physical partitions of a container of the running stack"
        )
    )


def find_cosmos_endpoint(workdir: Path) -> str:
    """The URL of the Cosmos DB endpoint of the stack running from ``workdir``'s folder."""
    from funcstack.services import running_stack  # (its launchers load the SDKs)

    running = {p.name: p for p in running_stack(workdir / "pids.json")}
    cosmos = running.get("cosmos")
    if cosmos is None:
        raise PartitionCommandError(
            f"no stack runs from this folder (nothing running is recorded in {workdir}): start "
            "one here with `funcstack run` or `funcstack up`, or name an endpoint with "
            "--endpoint URL"
        )
    log = workdir / "cosmos.log"
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in reversed(lines):
        found = _READY.search(line)
        if found and int(found.group(2)) == cosmos.pid:
            return found.group(1)
    raise PartitionCommandError(
        f"the stack's Cosmos DB endpoint (pid {cosmos.pid}) runs but {log} does not say where "
        "it listens: name it with --endpoint URL"
    )


def _table(partitions: list[PhysicalPartition]) -> list[str]:
    lines = [f"  {'range':<7}{'documents':>10}  {'EPK from':<34}{'to':<34}parents"]
    for p in partitions:
        lines.append(
            f"  {p.id:<7}{p.documents:>10}  {p.min_inclusive or '(start)':<34}"
            f"{p.max_exclusive:<34}{', '.join(p.parents) or '-'}"
        )
    return lines


def run_partition_command(args: argparse.Namespace, workdir: Path) -> int:
    """Run ``split``, ``merge`` or ``partitions``; print what it did and the live ranges."""
    endpoint = args.endpoint or find_cosmos_endpoint(workdir)
    where = f"{args.database}/{args.container}"
    try:
        if args.command == "split":
            children = split_partition(endpoint, args.database, args.container, args.range_id)
            partitions = physical_partitions(endpoint, args.database, args.container)
            parents = {p.id: p.parents for p in partitions}
            parent = parents[children[0]][-1] if parents.get(children[0]) else "?"
            print(
                f"{where}: range {parent} split into {', '.join(children)}; requests naming "
                f"{parent} now answer 410 / 1002 (PartitionKeyRangeGone)"
            )
        elif args.command == "merge":
            before = {p.id for p in physical_partitions(endpoint, args.database, args.container)}
            merged = merge_partitions(endpoint, args.database, args.container, args.range_ids)
            partitions = physical_partitions(endpoint, args.database, args.container)
            gone = sorted(before - {p.id for p in partitions}, key=int)
            print(
                f"{where}: ranges {', '.join(gone)} merged into {merged}; requests naming "
                f"{', '.join(gone)} now answer 410 / 1002 (PartitionKeyRangeGone)"
            )
        else:
            partitions = physical_partitions(endpoint, args.database, args.container)
            print(f"{where}: {len(partitions)} physical partition(s)")
    except CosmosControlError as exc:
        raise PartitionCommandError(f"{args.command} {where}: {exc}") from None
    for line in _table(partitions):
        print(line)
    return 0
