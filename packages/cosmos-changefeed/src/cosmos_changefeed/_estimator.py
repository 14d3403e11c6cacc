"""The change feed estimator (sync): each lease of a processor with the changes it has not
processed yet and its owner, as .NET's ``ChangeFeedEstimator`` computes them (``_estimation``
has the arithmetic and its sources). It reads the leases and one change per checkpointed lease,
takes no lease and writes nothing, so it runs beside the processors (a monitor, a scaler).
``get_pending`` reads further: the first pending changes themselves."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.cosmos import ContainerProxy

from cosmos_changefeed import _names
from cosmos_changefeed._cosmos_store import CosmosLeaseStore
from cosmos_changefeed._drive import drive
from cosmos_changefeed._estimation import estimate_flow, pending_flow, targets_flow
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import ChangeFeedProcessorState, EstimateFrom, PendingChanges
from cosmos_changefeed._protocol import Flow
from cosmos_changefeed._source import FeedSource
from cosmos_changefeed._store import LeaseStore


class ChangeFeedEstimator:
    """Estimates the work left for the processor ``processor_name`` of ``monitored_container``
    whose leases are in ``lease_container``. ``estimate_from``: where that processor starts a
    lease without a checkpoint ("beginning", or a time), for ``get_pending`` to read it from
    there (and, while the processor never ran, each partition key range); None (the default),
    as .NET: such a lease counts 1."""

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
            return list(pool.map(lambda lease: self._run(estimate_flow(lease)), leases))

    def estimated_lag(self) -> int:
        """The sum over the leases."""
        return sum(state.estimated_lag for state in self.get_estimates())

    def get_pending(self, max_changes: int = 100) -> list[PendingChanges]:
        """Per lease, its estimate and its first pending changes (at most ``max_changes``, read
        page by page from its checkpoint) with whether they are all of them; a lease whose
        range split, or that has no checkpoint (without ``estimate_from``), reads nothing and
        counts 1. With ``estimate_from`` and no lease at all (the processor never ran), one
        per partition key range, read from there (``lease`` None). In parallel, as
        ``get_estimates``."""
        if max_changes < 1:
            raise ValueError("max_changes must be positive")
        prefix = f"{self.lease_prefix()}{_names.LEASE_SEPARATOR}"
        targets = self._run(targets_flow(prefix, self.estimate_from))
        if not targets:
            return []
        flows = [
            pending_flow(lease, stored, max_changes, self.estimate_from)
            for lease, stored in targets
        ]
        with ThreadPoolExecutor(max_workers=min(len(flows), 8)) as pool:
            return list(pool.map(self._run, flows))

    def _run(self, flow: Flow) -> Any:
        return drive(flow, self._store, self._reader, _no_sleep)


def _no_sleep(_seconds: float) -> None:
    return None
