"""The change feed estimator (sync): each lease of a processor with the changes it has not
processed yet and its owner, as .NET's ``ChangeFeedEstimator`` computes them (``_estimation``
has the arithmetic and its sources). It reads the leases and one change per checkpointed lease,
takes no lease and writes nothing, so it runs beside the processors (a monitor, a scaler)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from azure.cosmos import ContainerProxy

from cosmos_changefeed import _names
from cosmos_changefeed._continuation import LATEST_VERSION
from cosmos_changefeed._cosmos_store import CosmosLeaseStore
from cosmos_changefeed._estimation import remaining_work
from cosmos_changefeed._feed import FeedReader
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import ChangeFeedProcessorState
from cosmos_changefeed._reading import SESSION_TOKEN_HEADER
from cosmos_changefeed._store import LeaseStore


class ChangeFeedEstimator:
    """Estimates the work left for the processor ``processor_name`` of ``monitored_container``
    whose leases are in ``lease_container``."""

    def __init__(
        self,
        monitored_container: ContainerProxy,
        lease_container: ContainerProxy | LeaseStore,
        *,
        processor_name: str,
    ) -> None:
        self.processor_name = processor_name
        self._store = (
            lease_container
            if isinstance(lease_container, LeaseStore)
            else CosmosLeaseStore(lease_container)
        )
        self._reader = FeedReader(monitored_container, mode=LATEST_VERSION, max_items=1)

    def lease_prefix(self) -> str:
        rid = self._reader.container_rid()
        return _names.store_prefix(self.processor_name, self._reader.account_endpoint, rid)

    def get_estimates(self) -> list[ChangeFeedProcessorState]:
        """One state per lease, in the store's order (.NET's ``GetCurrentStateIterator``); the
        leases are read in parallel, as .NET reads them."""
        prefix = f"{self.lease_prefix()}{_names.LEASE_SEPARATOR}"
        leases = [Lease.from_document(doc) for doc in self._store.list_documents(prefix)]
        if not leases:
            return []
        with ThreadPoolExecutor(max_workers=min(len(leases), 8)) as pool:
            return list(pool.map(self._estimate, leases))

    def estimated_lag(self) -> int:
        """The sum over the leases."""
        return sum(state.estimated_lag for state in self.get_estimates())

    def _estimate(self, lease: Lease) -> ChangeFeedProcessorState:
        if not lease.continuation:
            return ChangeFeedProcessorState(lease.lease_token, 1, lease.owner)
        if lease.feed_range is None:  # a version-0 lease written without one: its range's
            found = next((r for r in self._reader.ranges() if r.id == lease.lease_token), None)
            if found is None:
                return ChangeFeedProcessorState(lease.lease_token, 1, lease.owner)
            lease = lease.evolve(feed_range=found.range)
        page = self._reader.read(lease, lease.continuation, "Beginning")
        if page.gone:
            return ChangeFeedProcessorState(lease.lease_token, 1, lease.owner)
        lag = remaining_work(page.headers.get(SESSION_TOKEN_HEADER), page.items)
        return ChangeFeedProcessorState(lease.lease_token, lag, lease.owner)
