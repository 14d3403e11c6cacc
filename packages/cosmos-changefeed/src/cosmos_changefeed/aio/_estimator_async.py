"""The change feed estimator, aio: each lease of a processor with the changes it has not
processed yet and its owner, as .NET's ``ChangeFeedEstimator`` computes them
(``_estimation``; see ``cosmos_changefeed.ChangeFeedEstimator``)."""

from __future__ import annotations

import asyncio
from typing import Any

from azure.cosmos.aio import ContainerProxy

from cosmos_changefeed import _names
from cosmos_changefeed._continuation import LATEST_VERSION
from cosmos_changefeed._estimation import (
    estimate_start,
    lease_of_range,
    pending,
    remaining_work,
)
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import ChangeFeedProcessorState, EstimateFrom, PendingChanges
from cosmos_changefeed._reading import SESSION_TOKEN_HEADER
from cosmos_changefeed.aio._cosmos_store_async import CosmosLeaseStore
from cosmos_changefeed.aio._feed_async import FeedReader
from cosmos_changefeed.aio._store_async import LeaseStore


class ChangeFeedEstimator:
    """Estimates the work left for the processor ``processor_name`` of ``monitored_container``
    whose leases are in ``lease_container``. Reads the leases and one change per checkpointed
    lease; it takes no lease and writes nothing. ``estimate_from``: as the sync estimator's."""

    def __init__(
        self,
        monitored_container: ContainerProxy,
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
        self._reader = FeedReader(monitored_container, mode=LATEST_VERSION, max_items=1)

    async def lease_prefix(self) -> str:
        rid = await self._reader.container_rid()
        return _names.store_prefix(self.processor_name, self._reader.account_endpoint, rid)

    async def get_estimates(self) -> list[ChangeFeedProcessorState]:
        """One state per lease, in the store's order (.NET's ``GetCurrentStateIterator``)."""
        prefix = f"{await self.lease_prefix()}{_names.LEASE_SEPARATOR}"
        leases = [Lease.from_document(doc) for doc in await self._store.list_documents(prefix)]
        return list(await asyncio.gather(*(self._estimate(lease) for lease in leases)))

    async def estimated_lag(self) -> int:
        """The sum over the leases (.NET's ``ChangeFeedEstimatorRunner`` total)."""
        return sum(state.estimated_lag for state in await self.get_estimates())

    async def get_pending(self, max_changes: int = 100) -> list[PendingChanges]:
        """Per lease, its estimate and its first pending changes (see the sync estimator's)."""
        if max_changes < 1:
            raise ValueError("max_changes must be positive")
        prefix = f"{await self.lease_prefix()}{_names.LEASE_SEPARATOR}"
        stored = [Lease.from_document(doc) for doc in await self._store.list_documents(prefix)]
        targets = [(lease, True) for lease in stored]
        if not stored and self.estimate_from is not None:
            targets = [(lease_of_range(r), False) for r in await self._reader.ranges()]
        return list(await asyncio.gather(*(self._pending(*t, max_changes) for t in targets)))

    async def _pending(self, lease: Lease, stored: bool, max_changes: int) -> PendingChanges:
        start = estimate_start(lease, self.estimate_from)
        if start is not None and lease.feed_range is None:
            ranges = await self._reader.ranges()
            found = next((r for r in ranges if r.id == lease.lease_token), None)
            start = None if found is None else start
            lease = lease if found is None else lease.evolve(feed_range=found.range)
        if start is None:
            return pending(
                lease, stored=stored, headers=None, changes=[], complete=False, read=False
            )
        position, headers, complete = lease.continuation, None, False
        changes: list[dict[str, Any]] = []
        while len(changes) < max_changes:
            page = await self._reader.read(
                lease, position, start, max_items=max_changes - len(changes)
            )
            if page.gone:
                return pending(
                    lease, stored=stored, headers=None, changes=[], complete=False, read=False
                )
            headers = page.headers if headers is None else headers
            if not page.items:
                complete = True
                break
            changes.extend(page.items)
            position = page.etag
        return pending(
            lease, stored=stored, headers=headers, changes=changes, complete=complete, read=True
        )

    async def _estimate(self, lease: Lease) -> ChangeFeedProcessorState:
        if not lease.continuation:
            return ChangeFeedProcessorState(lease.lease_token, 1, lease.owner)
        if lease.feed_range is None:  # a version-0 lease written without one: its range's
            ranges = await self._reader.ranges()
            found = next((r for r in ranges if r.id == lease.lease_token), None)
            if found is None:
                return ChangeFeedProcessorState(lease.lease_token, 1, lease.owner)
            lease = lease.evolve(feed_range=found.range)
        page = await self._reader.read(lease, lease.continuation, "Beginning")
        if page.gone:
            return ChangeFeedProcessorState(lease.lease_token, 1, lease.owner)
        lag = remaining_work(page.headers.get(SESSION_TOKEN_HEADER), page.items)
        return ChangeFeedProcessorState(lease.lease_token, lag, lease.owner)
