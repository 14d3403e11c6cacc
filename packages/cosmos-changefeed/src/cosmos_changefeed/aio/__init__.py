"""cosmos-changefeed for asyncio: the processor, the estimator and the lease stores of
``cosmos_changefeed`` with the same names, over azure-cosmos's ``aio`` clients. The types
without I/O (``LeaseContext``, ``ChangeFeedProcessorState``, ``Lease``, the errors) are
``cosmos_changefeed``'s."""

from __future__ import annotations

from cosmos_changefeed._manual import AsyncManualCheckpointContext as ManualCheckpointContext
from cosmos_changefeed.aio._cosmos_store_async import CosmosLeaseStore
from cosmos_changefeed.aio._estimator_async import ChangeFeedEstimator
from cosmos_changefeed.aio._exporting_async import export_leases, restore_leases
from cosmos_changefeed.aio._feed_async import CosmosFeedSource, FeedSource
from cosmos_changefeed.aio._processor_async import (
    ChangeFeedProcessor,
    Handler,
    ManualCheckpointHandler,
)
from cosmos_changefeed.aio._store_async import InMemoryLeaseStore, LeaseStore

__all__ = [
    "ChangeFeedEstimator",
    "ChangeFeedProcessor",
    "CosmosFeedSource",
    "CosmosLeaseStore",
    "FeedSource",
    "Handler",
    "InMemoryLeaseStore",
    "LeaseStore",
    "ManualCheckpointContext",
    "ManualCheckpointHandler",
    "export_leases",
    "restore_leases",
]
