"""The change feed estimator, aio: each lease of a processor with the changes it has not
processed yet and its owner, as .NET's ``ChangeFeedEstimator`` computes them
(``_estimation``; see ``cosmos_changefeed.ChangeFeedEstimator``)."""

from __future__ import annotations

import asyncio
from typing import Any

from azure.cosmos.aio import ContainerProxy

from cosmos_changefeed import _names
from cosmos_changefeed._estimation import estimate_flow, pending_flow, targets_flow
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import ChangeFeedProcessorState, EstimateFrom, PendingChanges
from cosmos_changefeed._protocol import Flow
from cosmos_changefeed.aio._cosmos_store_async import CosmosLeaseStore
from cosmos_changefeed.aio._drive_async import drive
from cosmos_changefeed.aio._feed_async import CosmosFeedSource, FeedSource
from cosmos_changefeed.aio._store_async import LeaseStore


class ChangeFeedEstimator:
    """Estimates the work left for the processor ``processor_name`` of ``monitored_container``
    whose leases are in ``lease_container``. Reads the leases and one change per checkpointed
    lease; it takes no lease and writes nothing. ``estimate_from``: as the sync estimator's."""

    def __init__(
        self,
        monitored_container: ContainerProxy | FeedSource,
        lease_container: ContainerProxy | LeaseStore,
        *,
        processor_name: str,
        estimate_from: EstimateFrom = None,
    ) -> None:
        self.processor_name = processor_name
        self.estimate_from = estimate_from
        self._store = (
            lease_container
            if isinstance(lease_container, LeaseStore)
            else CosmosLeaseStore(lease_container)
        )
        self._reader = (
            monitored_container
            if isinstance(monitored_container, FeedSource)
            else CosmosFeedSource(monitored_container)
        )

    async def lease_prefix(self) -> str:
        rid = await self._reader.container_rid()
        return _names.store_prefix(self.processor_name, self._reader.account_endpoint, rid)

    async def get_estimates(self) -> list[ChangeFeedProcessorState]:
        """One state per lease, in the store's order (.NET's ``GetCurrentStateIterator``)."""
        prefix = f"{await self.lease_prefix()}{_names.LEASE_SEPARATOR}"
        leases = [Lease.from_document(doc) for doc in await self._store.list_documents(prefix)]
        return list(await asyncio.gather(*(self._run(estimate_flow(lease)) for lease in leases)))

    async def estimated_lag(self) -> int:
        """The sum over the leases (.NET's ``ChangeFeedEstimatorRunner`` total)."""
        return sum(state.estimated_lag for state in await self.get_estimates())

    async def get_pending(self, max_changes: int = 100) -> list[PendingChanges]:
        """Per lease, its estimate and its first pending changes (see the sync estimator's)."""
        if max_changes < 1:
            raise ValueError("max_changes must be positive")
        prefix = f"{await self.lease_prefix()}{_names.LEASE_SEPARATOR}"
        targets = await self._run(targets_flow(prefix, self.estimate_from))
        flows = [
            pending_flow(lease, stored, max_changes, self.estimate_from)
            for lease, stored in targets
        ]
        return list(await asyncio.gather(*(self._run(flow) for flow in flows)))

    async def _run(self, flow: Flow) -> Any:
        return await drive(flow, self._store, self._reader, asyncio.sleep)
