"""Cosmos DB, async: the same names as `cosmos_outbox.cosmos`, on the SDK's `aio` client (as
`azure.cosmos.aio` mirrors `azure.cosmos`): the outbox's container (`CosmosDocumentStore`),
the relay's backlog estimate (`CosmosBacklogEstimator`), one page of a query (`query_page`)
and the client the adapters are built on (`cosmos_client`)."""

from __future__ import annotations

from cosmos_outbox.cosmos._client import async_cosmos_client as cosmos_client
from cosmos_outbox.cosmos._estimator import AsyncCosmosBacklogEstimator as CosmosBacklogEstimator
from cosmos_outbox.cosmos._store import AsyncCosmosDocumentStore as CosmosDocumentStore
from cosmos_outbox.cosmos._store import async_query_page as query_page

__all__ = ["CosmosBacklogEstimator", "CosmosDocumentStore", "cosmos_client", "query_page"]
