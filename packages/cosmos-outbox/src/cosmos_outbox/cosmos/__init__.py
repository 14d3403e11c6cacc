"""The Cosmos DB side (azure-cosmos): the unit of work and its repositories (one transactional
batch per aggregate: the aggregate and its events), the quarantine and stored events the
operators use, the backlog estimator, clients built from settings, and the one translation of
Cosmos DB failures into `cosmos_outbox.errors`. The documents themselves are
`cosmos_outbox._documents`."""

from __future__ import annotations

from cosmos_outbox.cosmos._client import (
    client_options,
    cosmos_client,
    lease_container,
    outbox_container,
)
from cosmos_outbox.cosmos._errors import cosmos_errors, translate
from cosmos_outbox.cosmos._estimator import CosmosBacklogEstimator
from cosmos_outbox.cosmos._quarantine import CosmosEventStore, CosmosQuarantine
from cosmos_outbox.cosmos._queries import one_page, query_page
from cosmos_outbox.cosmos._unit_of_work import CosmosRepository, CosmosUnitOfWork

__all__ = [
    "CosmosBacklogEstimator",
    "CosmosEventStore",
    "CosmosQuarantine",
    "CosmosRepository",
    "CosmosUnitOfWork",
    "client_options",
    "cosmos_client",
    "cosmos_errors",
    "lease_container",
    "one_page",
    "outbox_container",
    "query_page",
    "translate",
]
