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
from cosmos_changefeed._continuation import LATEST_VERSION
from cosmos_changefeed._cosmos_store import CosmosLeaseStore
from cosmos_changefeed._estimation import (
    estimate_start,
    lease_of_range,
    pending,
    remaining_work,
)
from cosmos_changefeed._feed import FeedReader
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import ChangeFeedProcessorState, EstimateFrom, PendingChanges
from cosmos_changefeed._reading import SESSION_TOKEN_HEADER
from cosmos_changefeed._store import LeaseStore


class ChangeFeedEstimator:
    """Estimates the work left for the processor ``processor_name`` of ``monitored_container``
    whose leases are in ``lease_container``. ``estimate_from``: where that processor starts a
    lease without a checkpoint ("beginning", or a time), for ``get_pending`` to read it from
    there (and, while the processor never ran, each partition key range); None (the default),
    as .NET: such a lease counts 1."""

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
        stored = [Lease.from_document(doc) for doc in self._store.list_documents(prefix)]
        targets = [(lease, True) for lease in stored]
        if not stored and self.estimate_from is not None:
            targets = [(lease_of_range(r), False) for r in self._reader.ranges()]
        if not targets:
            return []
        with ThreadPoolExecutor(max_workers=min(len(targets), 8)) as pool:
            return list(pool.map(lambda t: self._pending(t[0], t[1], max_changes), targets))

    def _pending(self, lease: Lease, stored: bool, max_changes: int) -> PendingChanges:
        start = estimate_start(lease, self.estimate_from)
        if start is not None and lease.feed_range is None:
            found = next((r for r in self._reader.ranges() if r.id == lease.lease_token), None)
            start = None if found is None else start
            lease = lease if found is None else lease.evolve(feed_range=found.range)
        if start is None:
            return pending(
                lease, stored=stored, headers=None, changes=[], complete=False, read=False
            )
        position, headers, complete = lease.continuation, None, False
        changes: list[dict[str, Any]] = []
        while len(changes) < max_changes:
            page = self._reader.read(lease, position, start, max_items=max_changes - len(changes))
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
