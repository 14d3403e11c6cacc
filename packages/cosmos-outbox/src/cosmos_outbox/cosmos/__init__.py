"""Cosmos DB: the outbox's container (`CosmosDocumentStore` on the SDK's sync client), the
relay's backlog estimate from its trigger's leases (`CosmosBacklogEstimator`), `query_page` (one
page of a query, its token read from that query's own response: safe with concurrent
invocations on one client), and the clients the adapters are built on (`cosmos_client`,
`client_options`). The same names on the SDK's `aio` client: `cosmos_outbox.cosmos.aio`.
Failures are translated once into `cosmos_outbox.errors`."""

from __future__ import annotations

from cosmos_outbox.cosmos._client import client_options, cosmos_client
from cosmos_outbox.cosmos._estimator import CosmosBacklogEstimator
from cosmos_outbox.cosmos._store import CosmosDocumentStore, query_page

__all__ = [
    "CosmosBacklogEstimator",
    "CosmosDocumentStore",
    "client_options",
    "cosmos_client",
    "query_page",
]
