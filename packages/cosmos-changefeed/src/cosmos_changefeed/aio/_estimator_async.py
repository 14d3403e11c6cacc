"""The change feed estimator, aio: each lease of a processor with the changes it has not
processed yet and its owner, as .NET's ``ChangeFeedEstimator`` computes them, and the push
estimator on a task (see ``cosmos_changefeed.ChangeFeedEstimator``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from azure.cosmos.aio import ContainerProxy

from cosmos_changefeed._estimating import DEFAULT_ESTIMATION_INTERVAL, EstimatorBase
from cosmos_changefeed._estimation import estimate, pending_flow, prefix_flow, targets_flow
from cosmos_changefeed._options import ChangeFeedProcessorState, EstimateFrom, PendingChanges
from cosmos_changefeed._protocol import Flow
from cosmos_changefeed.aio._cosmos_store_async import CosmosLeaseStore
from cosmos_changefeed.aio._drive_async import drive
from cosmos_changefeed.aio._feed_async import CosmosFeedSource, FeedSource
from cosmos_changefeed.aio._store_async import LeaseStore


class ChangeFeedEstimator(EstimatorBase):
    """Estimates the work left for the processor ``processor_name`` of ``monitored_container``
    whose leases are in ``lease_container``. Its options are the sync estimator's;
    ``on_estimate`` is a coroutine function (awaited every ``estimation_interval``)."""

    _flavour = "aio"
    _lease_ports = (LeaseStore,)
    _feed_ports = (FeedSource,)

    def __init__(
        self,
        monitored_container: ContainerProxy | FeedSource,
        lease_container: ContainerProxy | LeaseStore,
        *,
        processor_name: str,
        estimate_from: EstimateFrom = None,
        on_estimate: Callable[[list[ChangeFeedProcessorState]], Awaitable[object]] | None = None,
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
        self._runner: asyncio.Task[None] | None = None

    async def lease_prefix(self) -> str:
        """What every document of the processor's store starts with (``lease_prefix``)."""
        endpoint = self._reader.account_endpoint
        return str(await self._run(prefix_flow(self.processor_name, endpoint)))

    async def get_estimates(self) -> list[ChangeFeedProcessorState]:
        """One state per lease, in the store's order (see the sync estimator's)."""
        return [estimate(found) for found in await self.get_pending(1)]

    async def estimated_lag(self) -> int:
        """The sum over the leases (what .NET's push estimator is handed)."""
        return sum(state.estimated_lag for state in await self.get_estimates())

    async def get_pending(self, max_changes: int = 100) -> list[PendingChanges]:
        """Per lease, its estimate and its first pending changes (see the sync estimator's)."""
        if max_changes < 1:
            raise ValueError("max_changes must be positive")
        endpoint = self._reader.account_endpoint
        targets = await self._run(targets_flow(self.processor_name, endpoint, self.estimate_from))
        flows = [
            pending_flow(lease, stored, max_changes, self.estimate_from)
            for lease, stored in targets
        ]
        return list(await asyncio.gather(*(self._run(flow) for flow in flows)))

    # -- the push estimator ---------------------------------------------------------------------

    async def start(self) -> None:
        """Read the estimates once (a missing container fails here, named), hand them to
        ``on_estimate``, and go on every ``estimation_interval`` on a task of its own."""
        callback = self._push_callback()
        if self._runner is not None:
            return
        await callback(await self.get_estimates())
        self._runner = asyncio.create_task(
            self._push(), name=f"cosmos-changefeed-estimator-{self.processor_name}"
        )

    async def stop(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 - one API in both flavours
        """Stop pushing (an estimate being read is cancelled; ``timeout`` bounds the wait)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(runner, timeout)

    async def __aenter__(self) -> ChangeFeedEstimator:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _push(self) -> None:
        callback = self._push_callback()
        while True:
            await asyncio.sleep(self.estimation_interval)
            try:
                states = await self.get_estimates()
            except Exception as exc:
                self._push_failed("reading the estimates", exc)
                continue
            self._pushed(states)
            try:
                await callback(states)
            except Exception as exc:
                self._push_failed("on_estimate", exc)

    async def _run(self, flow: Flow) -> Any:
        return await drive(flow, self._store, self._reader, asyncio.sleep)
