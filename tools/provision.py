"""This app's Cosmos DB containers, as declared for the local stack in tools/funcstack.json (what
the Bicep templates create in Azure): contacts (partition key /partitionKey, defaultTtl -1 so
per-item TTL works, the indexing policy of deploy/indexing-policy.json, the one file the Bicep
template loads too), leases (/id), and the subscriber's projection container (/partitionKey,
defaultTtl -1: its inbox records expire per item; read by id but for an inbox record looked for
by its event's id, so nothing is indexed but `type` and `eventId`: the policy of
deploy/projection-indexing-policy.json, which the Bicep template loads too). funcstack
provisions them when the stack starts; tests create more containers like them under other
names."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from azure.cosmos import ContainerProxy, DatabaseProxy, PartitionKey

from funcstack.config import ContainerSpec, StackConfig, load_config

ROOT = Path(__file__).resolve().parents[1]
#: This app's declared resources: its Cosmos DB part here, its Service Bus part in
#: tools/servicebus-config.json (the official emulator's Config.json format).
STACK_CONFIG = Path(__file__).resolve().with_name("funcstack.json")
INDEXING_POLICY_FILE = ROOT / "deploy" / "indexing-policy.json"
PROJECTION_INDEXING_POLICY_FILE = ROOT / "deploy" / "projection-indexing-policy.json"


@cache
def declared() -> StackConfig:
    return load_config(STACK_CONFIG)


def container_spec(name: str) -> ContainerSpec:
    """A container as declared (by its declared name)."""
    return next(c for db in declared().cosmos.databases for c in db.containers if c.name == name)


def indexing_policy(file: Path = INDEXING_POLICY_FILE) -> dict[str, Any]:
    """The contacts container's indexing policy, as deployed (or the projection container's:
    `PROJECTION_INDEXING_POLICY_FILE`)."""
    return json.loads(file.read_text("utf-8"))  # type: ignore[no-any-return]


def create_like(database: DatabaseProxy, declared_name: str, name: str) -> ContainerProxy:
    """A container named ``name`` with the settings of the declared ``declared_name``."""
    spec = container_spec(declared_name)
    return database.create_container_if_not_exists(
        name,
        partition_key=PartitionKey(path=spec.partition_key),
        default_ttl=spec.default_ttl,
        indexing_policy=dict(spec.indexing_policy) if spec.indexing_policy else None,
    )


def create_contacts_container(database: DatabaseProxy, name: str) -> ContainerProxy:
    return create_like(database, "contacts", name)


def create_projection_container(database: DatabaseProxy, name: str) -> ContainerProxy:
    return create_like(database, "contact-projections", name)
