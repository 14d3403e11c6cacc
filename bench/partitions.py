"""Physical partitions of the local Cosmos DB endpoint, through the synchronous azure-cosmos SDK:
what several partitions cost against one, and what a live split costs.

Point write and point read (median and p99 over ``n`` calls), a whole-container change feed
read from the beginning over ``docs`` documents, and a split of the range holding the most
documents (through the endpoint's local route), on a container of 1 and of 4 physical
partitions. ``measure()`` returns the figures; ``python -m bench.partitions`` prints them. No
assertions: the figures are for people.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import time
import uuid
from typing import Any

from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey

from bench.stats import table, timed
from funcstack.cosmos import start_cosmos


def _drain_ms(container: ContainerProxy) -> float:
    started = time.perf_counter()
    pages = container.query_items_change_feed(start_time="Beginning", max_item_count=1000).by_page()
    read = sum(1 for page in pages for _ in page)
    assert read > 0
    return (time.perf_counter() - started) * 1000


def measure(n: int = 300, docs: int = 2000) -> dict[str, Any]:
    """Start the local endpoint and time the calls on 1 and 4 physical partitions."""
    logging.getLogger("azure").setLevel(logging.WARNING)
    local = start_cosmos()
    try:
        client = CosmosClient(local.endpoint, local.key)
        database = client.create_database(f"bench-{uuid.uuid4().hex[:8]}")
        rows: dict[str, dict[str, float]] = {}
        figures: dict[str, Any] = {"rows": rows}
        for partitions in (1, 4):
            name = f"c{partitions}"
            container = database.create_container(
                name,
                partition_key=PartitionKey(path="/partitionKey"),
                headers={"x-funcstack-physical-partitions": str(partitions)},
            )
            counter = itertools.count()
            for i in range(docs):
                container.create_item({"id": f"d{i}", "partitionKey": f"p{i % 200}", "n": i})

            def write(
                container: ContainerProxy = container, counter: itertools.count[int] = counter
            ) -> None:
                i = next(counter)
                container.create_item({"id": f"w{i}", "partitionKey": f"p{i}", "n": i})

            def read(container: ContainerProxy = container) -> None:
                container.read_item("d7", partition_key="p7")

            rows[f"point write, {partitions} partition(s)"] = timed(write, n)
            rows[f"point read, {partitions} partition(s)"] = timed(read, n)
            figures[f"change_feed_drain_ms_{partitions}"] = _drain_ms(container)
            started = time.perf_counter()
            local.split(database.id, name)
            figures[f"split_ms_{partitions}"] = (time.perf_counter() - started) * 1000
            figures[f"change_feed_drain_after_split_ms_{partitions}"] = _drain_ms(container)
        figures["docs"] = docs + n
        client.delete_database(database.id)
        return figures
    finally:
        local.stop()


def report(figures: dict[str, Any]) -> str:
    lines = [table("Cosmos DB local endpoint, 1 and 4 physical partitions", figures["rows"])]
    for partitions in (1, 4):
        lines.append(
            f"  {partitions} partition(s), {figures['docs']} documents: change feed from the "
            f"beginning {figures[f'change_feed_drain_ms_{partitions}']:.0f} ms; a split "
            f"{figures[f'split_ms_{partitions}']:.1f} ms; the change feed after it "
            f"{figures[f'change_feed_drain_after_split_ms_{partitions}']:.0f} ms"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=300, help="calls per operation (default 300)")
    parser.add_argument("--docs", type=int, default=2000, help="documents (default 2000)")
    args = parser.parse_args()
    print(report(measure(args.n, args.docs)))


if __name__ == "__main__":
    main()
