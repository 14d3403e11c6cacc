"""The change feed estimator (sync): each lease of a processor with the changes it has not
processed yet and its owner, as .NET's ``ChangeFeedEstimator`` computes them (``_estimation``
has the arithmetic and its sources, ``_estimating`` what both flavours share). It reads the
leases and one change per lease, takes no lease and writes nothing, so it runs beside the
processors (a monitor, a scaler). ``get_pending`` reads further: the first pending changes
themselves. With ``on_estimate`` it is also .NET's push estimator: ``start()`` (or ``with``)
runs a thread that hands every lease's estimate to it every ``estimation_interval``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.cosmos import ContainerProxy

from cosmos_changefeed._cosmos_store import CosmosLeaseStore
from cosmos_changefeed._drive import drive
from cosmos_changefeed._estimating import DEFAULT_ESTIMATION_INTERVAL, EstimatorBase
from cosmos_changefeed._estimation import estimate, pending_flow, prefix_flow, targets_flow
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._options import ChangeFeedProcessorState, EstimateFrom, PendingChanges
from cosmos_changefeed._protocol import Flow
from cosmos_changefeed._source import FeedSource
from cosmos_changefeed._store import LeaseStore


class ChangeFeedEstimator(EstimatorBase):
    """Estimates the work left for the processor ``processor_name`` of ``monitored_container``
    whose leases are in ``lease_container``. ``estimate_from``: where that processor starts a
    lease without a checkpoint ("beginning", or a time), for a lease never checkpointed (and,
    while the processor never ran, each partition key range) to be read from there; None (the
    default), as .NET: such a lease counts 1. ``on_estimate``: called with every lease's state
    each ``estimation_interval`` seconds once started (``start()``/``stop()``, or ``with``)."""

    _flavour = "sync"
    _lease_ports = (LeaseStore,)
    _feed_ports = (FeedSource,)

    def __init__(
        self,
        monitored_container: ContainerProxy | FeedSource,
        lease_container: ContainerProxy | LeaseStore,
        *,
        processor_name: str,
        estimate_from: EstimateFrom = None,
        on_estimate: Callable[[list[ChangeFeedProcessorState]], object] | None = None,
        estimation_interval: float = DEFAULT_ESTIMATION_INTERVAL,
    ) -> None:
        super().__init__(
            monitored_container,
            lease_container,
            processor_name=processor_name,
            estimate_from=estimate_from,
            on_estimate=on_estimate,
            estimation_interval=estimation_interval,
        )
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
        self._runner: threading.Thread | None = None
        self._stopping = threading.Event()

    def lease_prefix(self) -> str:
        """What every document of the processor's store starts with (``lease_prefix``)."""
        return str(self._run(prefix_flow(self.processor_name, self._reader.account_endpoint)))

    def get_estimates(self) -> list[ChangeFeedProcessorState]:
        """One state per lease, in the store's order (.NET's ``GetCurrentStateIterator``); the
        leases are read in parallel, as .NET reads them. With ``estimate_from``, a lease never
        checkpointed -- or each range, before any lease -- is read from there: the same figures
        as ``get_pending``'s."""
        return [estimate(found) for found in self.get_pending(1)]

    def estimated_lag(self) -> int:
        """The sum over the leases (what .NET's push estimator is handed)."""
        return sum(state.estimated_lag for state in self.get_estimates())

    def get_pending(self, max_changes: int = 100) -> list[PendingChanges]:
        """Per lease, its estimate and its first pending changes (at most ``max_changes``, read
        page by page from its checkpoint) with whether they are all of them; a lease whose
        range split, or that has no checkpoint (without ``estimate_from``), reads nothing and
        counts 1. With ``estimate_from`` and no lease at all (the processor never ran), one
        per partition key range, read from there (``lease`` None). In parallel."""
        if max_changes < 1:
            raise ValueError("max_changes must be positive")
        endpoint = self._reader.account_endpoint
        targets = self._run(targets_flow(self.processor_name, endpoint, self.estimate_from))
        if not targets:
            return []
        flows = [
            pending_flow(lease, stored, max_changes, self.estimate_from)
            for lease, stored in targets
        ]
        with ThreadPoolExecutor(max_workers=min(len(flows), 8)) as pool:
            return list(pool.map(self._run, flows))

    # -- the push estimator ---------------------------------------------------------------------

    def start(self) -> None:
        """Read the estimates once (a missing container fails here, named), hand them to
        ``on_estimate``, and go on every ``estimation_interval`` on a thread of its own."""
        callback = self._push_callback()
        if self._runner is not None:
            return
        self._stopping.clear()
        callback(self.get_estimates())
        self._runner = threading.Thread(
            target=self._push,
            name=f"cosmos-changefeed-estimator-{self.processor_name}",
            daemon=True,
        )
        self._runner.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop pushing (an estimate being read is waited for, up to ``timeout`` s)."""
        self._stopping.set()
        if self._runner is not None:
            self._runner.join(timeout)
            self._runner = None

    def __enter__(self) -> ChangeFeedEstimator:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _push(self) -> None:
        callback = self._push_callback()
        while not self._stopping.wait(self.estimation_interval):
            try:
                states = self.get_estimates()
            except Exception as exc:
                self._push_failed("reading the estimates", exc)
                continue
            self._pushed(states)
            try:
                callback(states)
            except Exception as exc:
                self._push_failed("on_estimate", exc)

    def _run(self, flow: Flow) -> Any:
        return drive(flow, self._store, self._reader, _no_sleep)


def _no_sleep(_seconds: float) -> None:
    return None
