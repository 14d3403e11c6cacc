"""Latency of the local Cosmos DB endpoint through the synchronous azure-cosmos SDK.

Point write (create_item), point read and a 2-document transactional batch: median and
p99 over ``n`` calls each. ``measure()`` returns the figures; ``python -m bench.cosmos_sdk``
prints a table. No assertions: the figures are for people.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import uuid

from azure.cosmos import CosmosClient, PartitionKey

from bench.stats import table, timed
from funcstack.cosmos import start_cosmos

Figures = dict[str, dict[str, float]]


def measure(n: int = 500, *, endpoint: str | None = None, key: str | None = None) -> Figures:
    """Start the local endpoint (unless ``endpoint``/``key`` are given) and time the calls."""
    logging.getLogger("azure").setLevel(logging.WARNING)
    local = None
    if endpoint is None or key is None:
        local = start_cosmos()
        endpoint, key = local.endpoint, local.key
    try:
        client = CosmosClient(endpoint, key)
        db_name = f"bench-{uuid.uuid4().hex[:8]}"
        database = client.create_database_if_not_exists(db_name)
        try:
            container = database.create_container_if_not_exists(
                "contacts", partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1
            )
            counter = itertools.count()
            container.create_item({"id": "read-me", "partitionKey": "p-read", "type": "contact"})

            def write() -> None:
                i = next(counter)
                container.create_item({"id": f"w{i}", "partitionKey": f"p{i}", "type": "contact"})

            def read() -> None:
                container.read_item("read-me", partition_key="p-read")

            def batch() -> None:
                i = next(counter)
                pk = f"b{i}"
                container.execute_item_batch(
                    batch_operations=[
                        ("create", ({"id": pk, "partitionKey": pk, "type": "contact"},)),
                        (
                            "create",
                            (
                                {
                                    "id": f"e{i}",
                                    "partitionKey": pk,
                                    "type": "domainEvent",
                                    "ttl": 864000,
                                },
                            ),
                        ),
                    ],
                    partition_key=pk,
                )

            return {
                "point write (create_item)": timed(write, n),
                "point read (read_item)": timed(read, n),
                "execute_item_batch (2 documents)": timed(batch, n),
            }
        finally:
            client.delete_database(db_name)
    finally:
        if local is not None:
            local.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=500, help="calls per operation (default 500)")
    args = parser.parse_args()
    print(table("Cosmos DB local endpoint, sync azure-cosmos SDK", measure(args.n)))


if __name__ == "__main__":
    main()
