"""Create the database and containers the app expects (what the Bicep templates do in Azure):
contacts (partition key /partitionKey, defaultTtl -1 so per-item TTL works), leases (/id)."""

from __future__ import annotations

import warnings

from azure.cosmos import CosmosClient, PartitionKey


def provision(
    connection_string: str,
    *,
    database: str = "outbox",
    container: str = "contacts",
    lease_container: str = "leases",
    verify_tls: bool = False,
) -> None:
    if not verify_tls:
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    client = CosmosClient.from_connection_string(connection_string, connection_verify=verify_tls)
    db = client.create_database_if_not_exists(database)
    db.create_container_if_not_exists(
        container, partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1
    )
    db.create_container_if_not_exists(lease_container, partition_key=PartitionKey(path="/id"))
