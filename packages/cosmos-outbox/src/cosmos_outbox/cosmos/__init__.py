"""Cosmos DB: the outbox's container (`CosmosDocumentStore` on the SDK's sync client,
`AsyncCosmosDocumentStore` on its `aio` one), the relay's backlog estimate from its trigger's
leases (`CosmosBacklogEstimator`, `AsyncCosmosBacklogEstimator`), and `query_page` (one page of
a query, its token read from that query's own response: safe with concurrent invocations on one
client; `async_query_page` on the `aio` client). Failures are translated once into
`cosmos_outbox.errors`."""

from __future__ import annotations

from cosmos_outbox.cosmos._client import async_cosmos_client, client_options, cosmos_client
from cosmos_outbox.cosmos._estimator import AsyncCosmosBacklogEstimator, CosmosBacklogEstimator
from cosmos_outbox.cosmos._store import (
    AsyncCosmosDocumentStore,
    CosmosDocumentStore,
    async_query_page,
    query_page,
)

__all__ = [
    "AsyncCosmosBacklogEstimator",
    "AsyncCosmosDocumentStore",
    "CosmosBacklogEstimator",
    "CosmosDocumentStore",
    "async_cosmos_client",
    "async_query_page",
    "client_options",
    "cosmos_client",
    "query_page",
]
