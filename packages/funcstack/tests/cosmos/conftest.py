"""Fixtures: the local Cosmos DB endpoint on a free port, or COSMOS_ENDPOINT + COSMOS_KEY.

With COSMOS_ENDPOINT / COSMOS_KEY set (e.g. the official emulator), the same tests run
against that endpoint (TLS verification off), so the assertions only state documented
Cosmos DB behaviour. The local endpoint's certificate is verified (funcstack's local
authority: ``CosmosEndpoint.client_options()``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey

from funcstack.cosmos._launcher import CosmosEndpoint

PK_PATH = "/partitionKey"
UNCHANGED = MatchConditions.IfNotModified  # the SDK's If-Match condition

Doc = dict[str, Any]


def doc(doc_id: str, pk: str, **fields: Any) -> Doc:
    return {"id": doc_id, "partitionKey": pk, **fields}


@dataclass(frozen=True)
class Target:
    endpoint: str
    key: str
    verify_tls: bool
    local: CosmosEndpoint | None

    def client_options(self) -> dict[str, Any]:
        """What makes a client verify the endpoint's certificate (the local one's)."""
        if self.local is None:
            return {"connection_verify": self.verify_tls}
        return self.local.client_options()

    def client(self, **kwargs: Any) -> CosmosClient:
        return CosmosClient(self.endpoint, self.key, **self.client_options(), **kwargs)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def cosmos(request: pytest.FixtureRequest) -> Target:
    """COSMOS_ENDPOINT + COSMOS_KEY, else the run's endpoint (``shared_cosmos``: the
    tests here each work on databases and containers of their own)."""
    endpoint = os.environ.get("COSMOS_ENDPOINT")
    key = os.environ.get("COSMOS_KEY")
    if endpoint and key:
        return Target(endpoint=endpoint, key=key, verify_tls=False, local=None)
    local: CosmosEndpoint = request.getfixturevalue("shared_cosmos")
    return Target(endpoint=local.endpoint, key=local.key, verify_tls=False, local=local)


@pytest.fixture
def local(cosmos: Target) -> CosmosEndpoint:
    """The local endpoint, for what only its own calls do (a split, a merge, a layout of
    physical partitions) or only it serves as tested here: skipped against another endpoint."""
    if cosmos.local is None:
        pytest.skip(
            "this needs the local endpoint's own calls (Azure splits and merges on its own)"
        )
    return cosmos.local


@pytest.fixture(scope="session")
def client(cosmos: Target) -> CosmosClient:
    return cosmos.client()


def _own_database(client: CosmosClient) -> Iterator[DatabaseProxy]:
    """A database of the test's own, deleted at its end."""
    name = unique("db")
    db = client.create_database_if_not_exists(name)
    try:
        yield db
    finally:
        client.delete_database(name)


@pytest.fixture
def database(client: CosmosClient) -> Iterator[DatabaseProxy]:
    yield from _own_database(client)


@pytest.fixture
def other_database(client: CosmosClient) -> Iterator[DatabaseProxy]:
    """A second database of the test's own (what a scoped control call must leave alone)."""
    yield from _own_database(client)


@pytest.fixture
def container(database: DatabaseProxy) -> ContainerProxy:
    """Container as the app uses it: partition key /partitionKey, defaultTtl -1."""
    return database.create_container_if_not_exists(
        unique("c"), partition_key=PartitionKey(path=PK_PATH), default_ttl=-1
    )
