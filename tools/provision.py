"""Create the database and containers this app expects (what the Bicep templates do in Azure):
contacts (partition key /partitionKey, defaultTtl -1 so per-item TTL works, the indexing policy
of deploy/indexing-policy.json, the one file the Bicep template loads too), leases (/id), and
the subscriber's projection container (/partitionKey, defaultTtl -1: its inbox records expire
per item; only point reads, so nothing is indexed but `type`)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey

INDEXING_POLICY_FILE = Path(__file__).resolve().parents[1] / "deploy" / "indexing-policy.json"


def indexing_policy() -> dict[str, Any]:
    """The contacts container's indexing policy, as deployed."""
    return json.loads(INDEXING_POLICY_FILE.read_text("utf-8"))  # type: ignore[no-any-return]


def create_contacts_container(database: DatabaseProxy, name: str) -> ContainerProxy:
    return database.create_container_if_not_exists(
        name, partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1,
        indexing_policy=indexing_policy(),
    )


def create_projection_container(database: DatabaseProxy, name: str) -> ContainerProxy:
    return database.create_container_if_not_exists(
        name, partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1,
        indexing_policy=PROJECTION_INDEXING_POLICY,
    )


PROJECTION_INDEXING_POLICY: dict[str, Any] = {
    "indexingMode": "consistent",
    "automatic": True,
    "includedPaths": [{"path": "/type/?"}],
    "excludedPaths": [{"path": "/*"}],
}


def provision(
    connection_string: str,
    *,
    database: str = "outbox",
    container: str = "contacts",
    lease_container: str = "leases",
    projection_container: str | None = None,
    verify_tls: bool = False,
) -> None:
    if not verify_tls:
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    client = CosmosClient.from_connection_string(connection_string, connection_verify=verify_tls)
    db = client.create_database_if_not_exists(database)
    create_contacts_container(db, container)
    db.create_container_if_not_exists(lease_container, partition_key=PartitionKey(path="/id"))
    if projection_container:
        create_projection_container(db, projection_container)
