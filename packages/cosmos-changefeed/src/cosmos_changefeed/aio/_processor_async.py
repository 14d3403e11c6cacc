"""The change feed processor, aio: one task balances the leases, one per owned lease reads its
range and hands each batch to the handler, one more per lease renews it. The decisions are the
pure core's (``_protocol``, ``_balancing``, ``_reading``), what neither waits nor runs is
``_processing``'s (shared with the sync processor); this file is the tasks.

Follows Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/``:

* ``ChangeFeedProcessorCore.StartAsync``: the lease store's prefix, the mode check, the store
  initialised (``BootstrapperCore``), then the partition manager; "now" anchored at the start.
* ``FeedManagement/PartitionLoadBalancerCore``: every acquire interval, all leases read, the
  ones to take chosen (``EqualPartitionsBalancingStrategy``) and each acquired and started; a
  failure is logged and the loop goes on. The first round also takes the leases this instance
  already owns (``PartitionControllerCore.LoadLeasesAsync``: a restart under the same name).
* ``FeedManagement/PartitionControllerCore`` / ``PartitionSupervisorCore`` /
  ``LeaseRenewerCore``: per lease a processor and a renewer (the first renewal after half the
  renew interval); a lost lease ends its processing; a gone one is replaced by its children,
  which this instance acquires; any other end releases the lease (a stop releases every lease:
  another instance takes them at its next acquire round, where a killed instance's wait for
  their expiry).
* ``FeedProcessing/FeedProcessorCore`` with ``Observers/AutoCheckpointer``: read, hand the batch
  over, checkpoint the response's etag; read again at once after a page with changes, after the
  poll delay after one without.

Where this differs from .NET (README, "Differences from .NET"): a handler that raises keeps its
lease -- the same batch is given again after the poll delay -- where .NET releases the lease; a
lease lost on renewal lets the batch in flight finish (its checkpoint is then refused) rather
than cancelling the handler; a stop cancels the handlers in flight (their batches are not
checkpointed).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from azure.cosmos.aio import ContainerProxy

from cosmos_changefeed import _clock
from cosmos_changefeed._balancing import Outcome
from cosmos_changefeed._checkpoints import PER_BATCH, Checkpointing
from cosmos_changefeed._lease_state import LeaseState, export_flow, restore_flow
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._manual import AsyncManualCheckpointContext
from cosmos_changefeed._options import (
    DEFAULT_ACQUIRE_INTERVAL,
    DEFAULT_EXPIRATION_INTERVAL,
    DEFAULT_MAX_RETRY_DELAY,
    DEFAULT_POLL_DELAY,
    DEFAULT_RENEW_INTERVAL,
    Balancing,
    FailedBatch,
    Failure,
    LeaseContext,
    Mode,
    StartFrom,
)
from cosmos_changefeed._order import SetAsideChange
from cosmos_changefeed._processing import ProcessorBase
from cosmos_changefeed._protocol import FeedRangeGoneError, Flow, LeaseLostError
from cosmos_changefeed._starting import start_flow
from cosmos_changefeed.aio._cosmos_store_async import CosmosLeaseStore
from cosmos_changefeed.aio._drive_async import drive
from cosmos_changefeed.aio._feed_async import CosmosFeedSource, FeedSource
from cosmos_changefeed.aio._store_async import LeaseStore
from cosmos_changefeed.aio._worker_async import LeaseWorker

#: ``(context, changes)``: a batch of one lease's changes, in the order of its feed.
Handler = Callable[[LeaseContext, list[dict[str, Any]]], Awaitable[None]]
#: A handler under manual checkpoints (``checkpoint="manual"``), which awaits
#: ``context.checkpoint()``.
ManualCheckpointHandler = Callable[
    [AsyncManualCheckpointContext, list[dict[str, Any]]], Awaitable[None]
]


class ChangeFeedProcessor(ProcessorBase):
    """Processes the change feed of ``monitored_container`` with leases in ``lease_container``
    (a container, or any ``LeaseStore``), sharing them with every other instance of the same
    ``processor_name``. ``async with processor:`` starts and stops it."""

    _flavour = "aio"
    _lease_ports = (LeaseStore,)
    _feed_ports = (FeedSource,)

    def __init__(
        self,
        monitored_container: ContainerProxy | FeedSource,
        lease_container: ContainerProxy | LeaseStore,
        *,
        processor_name: str,
        instance_name: str,
        handler: Handler | ManualCheckpointHandler,
        start_from: StartFrom = "now",
        mode: Mode = "LatestVersion",
        poll_delay: float = DEFAULT_POLL_DELAY,
        max_items: int | None = None,
        lease_renew_interval: float = DEFAULT_RENEW_INTERVAL,
        lease_acquire_interval: float = DEFAULT_ACQUIRE_INTERVAL,
        lease_expiration_interval: float = DEFAULT_EXPIRATION_INTERVAL,
        min_retry_delay: float | None = None,
        max_retry_delay: float = DEFAULT_MAX_RETRY_DELAY,
        set_aside: Callable[[FailedBatch], Awaitable[object]] | None = None,
        set_aside_after: int | None = None,
        still_set_aside: Callable[[SetAsideChange], Awaitable[object]] | None = None,
        checkpoint: Checkpointing = PER_BATCH,
        checkpoint_interval: float | None = None,
        keep_start: bool = True,
        balancing: Balancing = "fair-share",
        on_lease_acquired: Callable[[str], object] | None = None,
        on_lease_released: Callable[[str], object] | None = None,
        on_error: Callable[[Failure], object] | None = None,
    ) -> None:
        super().__init__(
            monitored_container,
            lease_container,
            handler=handler,
            on_lease_acquired=on_lease_acquired,
            on_lease_released=on_lease_released,
            on_error=on_error,
            set_aside=set_aside,
            set_aside_after=set_aside_after,
            still_set_aside=still_set_aside,
            processor_name=processor_name,
            instance_name=instance_name,
            start_from=start_from,
            mode=mode,
            poll_delay=poll_delay,
            max_items=max_items,
            lease_renew_interval=lease_renew_interval,
            lease_acquire_interval=lease_acquire_interval,
            lease_expiration_interval=lease_expiration_interval,
            min_retry_delay=min_retry_delay,
            max_retry_delay=max_retry_delay,
            checkpoint=checkpoint,
            checkpoint_interval=checkpoint_interval,
            keep_start=keep_start,
            balancing=balancing,
        )
        self._handler: Callable[[Any, list[dict[str, Any]]], Any] = handler
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
        self._balancer: asyncio.Task[None] | None = None
        self._workers: dict[str, LeaseWorker] = {}
        self._closing = False
        self._listening: asyncio.Event | None = None
        self._listen_task: asyncio.Task[None] | None = None

    # -- what an application sees ------------------------------------------------------------

    @property
    def owned_leases(self) -> list[str]:
        """The tokens of the leases this instance processes now."""
        return sorted(self._workers)

    @property
    def is_listening(self) -> bool:
        """Started, its first acquire round done, and the start of every lease it took in it
        fixed: a change written from now on is delivered (see ``wait_until_listening``)."""
        return self._listening is not None and self._listening.is_set()

    async def wait_until_listening(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - one API in both flavours
        """Return once the processor is listening (``TimeoutError`` after ``timeout`` s).

        Listening means: the store is initialised, this instance's first acquire round is
        done, and every lease it took in that round has its start fixed -- its checkpoint,
        the processor's start time (a start from now or from a time), the beginning, or the
        etag of its first read (the all-versions-and-deletes mode). A change written after
        that, to a lease this instance holds, is delivered. In a stack of several instances,
        a change to any lease is delivered once every lease has an owner that is listening
        (``all_leases_owned``); a lease's next owner starts where its checkpoint is, or at
        its own start -- which precedes the change when it too was listening before."""
        if self._listening is None:
            raise RuntimeError("the processor is not started")
        try:
            await asyncio.wait_for(self._listening.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"not listening after {timeout}s") from None

    # -- the lease state -------------------------------------------------------------------------

    async def export_leases(self) -> LeaseState:
        """This processor's lease state: its leases and ``.info`` as stored, without the
        service's fields -- a JSON-ready list (``json.dumps`` it) that ``restore_leases``
        takes back, here or in another lease store (.NET's in-memory leases with a stream)."""
        endpoint = self._reader.account_endpoint
        return list(await self._run(export_flow(self.processor_name, endpoint)))

    async def restore_leases(self, state: Sequence[Mapping[str, Any]]) -> int:
        """Put an exported lease state in this processor's lease store, before it starts: the
        number of documents created. Refused while started, when a document is not this
        processor's on this container, or when the store holds its leases already."""
        self._refuse_while_started("restore_leases", self._balancer is not None)
        endpoint = self._reader.account_endpoint
        return int(await self._run(restore_flow(self.processor_name, endpoint, state)))

    # -- start and stop ------------------------------------------------------------------------

    async def start(self) -> None:
        """Initialise the lease store (create the leases, once for all instances) and start
        balancing; returns once the store is initialised."""
        if self._balancer is not None:
            return
        started = _clock.now()
        opts = self.options
        self._closing = False
        self._listening = asyncio.Event()
        flow = start_flow(opts, self._reader.account_endpoint, started)
        self._started(
            await drive(flow, self._store, self._reader, asyncio.sleep, self._start_patience)
        )
        self._paths = self._checked_paths(self._reader.partition_key_paths())
        self._balancer = asyncio.create_task(
            self._balance(), name=f"cosmos-changefeed-balancer-{opts.processor_name}"
        )

    async def stop(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 - a bound on the release, not a cancel scope
        """Stop balancing and every lease's processing (a batch in flight is cancelled and not
        checkpointed) and release the leases; a lease not released within ``timeout`` seconds
        is left to expire."""
        self._closing = True
        if self._balancer is not None:
            self._balancer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._balancer
            self._balancer = None
        tasks = [worker.task for worker in self._workers.values() if worker.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            if pending:
                self._not_released_in(len(pending), timeout)
        self._workers.clear()
        if self._listen_task is not None:
            self._listen_task.cancel()
            self._listen_task = None
        if self._listening is not None:
            self._listening.clear()

    async def __aenter__(self) -> ChangeFeedProcessor:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- balancing -----------------------------------------------------------------------------

    async def _balance(self) -> None:
        manager = self._manager
        assert manager is not None
        first, failures = True, 0
        while True:
            try:
                leases = await self._run(manager.all_leases())
                plan = self._plan(leases, manager)
                for lease in plan.mine:  # its own (a restart under the same name) first
                    if lease.lease_token not in self._workers:
                        await self._try_add(lease)
                for lease in plan.to_try():
                    plan.tried(lease, await self._try_add(lease))
                for lease in plan.to_ask():
                    plan.asked(lease, await self._try_ask(lease))
                for lease in plan.release:
                    self._give_back(lease)
                if first:
                    first = False
                    self._listen_task = asyncio.create_task(
                        self._listen_when_fixed(list(self._workers.values()))
                    )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                await asyncio.sleep(
                    self._balancing_failed(exc, failures, holding=bool(self._workers))
                )
                continue
            failures = 0
            await asyncio.sleep(self._balance_delay(0, plan))

    async def _listen_when_fixed(self, workers: list[LeaseWorker]) -> None:
        await asyncio.gather(*(worker.position_fixed.wait() for worker in workers))
        if self._listening is not None and not self._closing:
            self._listening.set()
            self._listening_now(w.lease.lease_token for w in workers)

    async def _try_add(self, lease: Lease) -> Outcome:
        """Acquire ``lease`` and process it."""
        try:
            return "acquired" if await self._add(lease) else "skipped"
        except Exception as exc:
            self._not_acquired(lease, exc)
            return "lost" if isinstance(exc, LeaseLostError) else "failed"

    async def _try_ask(self, lease: Lease) -> Outcome:
        """Ask the owner of ``lease`` to hand it over (``_handover``)."""
        manager = self._manager
        assert manager is not None
        try:
            await self._run(manager.request(lease))
        except Exception as exc:
            return self._request_failed(lease, exc)
        self._requested(lease)
        return "acquired"

    def _give_back(self, lease: Lease) -> None:
        """End a lease's processing as a stop ends it (its batch in flight finished and
        checkpointed), and release it: another instance asked for it, or is under its fair
        share."""
        worker = self._workers.get(lease.lease_token)
        if worker is not None and not worker.halted:
            self._giving_back(lease)
            worker.halt()

    async def _add(self, lease: Lease) -> bool:
        """Acquire ``lease`` and process it (``AddOrUpdateLeaseAsync``); False when it is
        this instance's already (or it stops)."""
        token = lease.lease_token
        manager = self._manager
        assert manager is not None and self._start is not None
        if self._closing or token in self._workers or token in self._acquiring:
            return False
        self._acquiring.add(token)
        try:
            ranges = await self._reader.ranges() if lease.feed_range is None else ()
            acquired = await self._run(manager.acquire(lease, ranges))
        finally:
            self._acquiring.discard(token)
        self._acquired(lease, acquired, manager, self._start)
        if self._is_closing():  # acquired while it stopped (a split's child): not run unseen
            await self._release(acquired)
            return True
        worker = LeaseWorker(self, acquired, self._start)
        self._workers[token] = worker
        worker.task = asyncio.create_task(self._supervise(worker), name=f"lease-{token}")
        return True

    def _is_closing(self) -> bool:
        """Whether ``stop`` has begun (read afresh after an await)."""
        return self._closing

    async def _supervise(self, worker: LeaseWorker) -> None:
        """``ProcessPartitionAsync``: run the lease, then release it, replace it, or let go."""
        token = worker.lease.lease_token
        try:
            await worker.run()
        except FeedRangeGoneError as gone:
            self._forget(worker)
            await self._replace_gone(worker.lease, gone.last_continuation)
            return
        except LeaseLostError as exc:
            self._forget(worker)
            self._lost(token, exc, worker.lease)
            return
        except asyncio.CancelledError:
            await worker.flush()
            await self._release(worker.lease, worker.unwritten())
            self._forget(worker)
            raise
        except Exception as exc:
            self._processing_failed(token, exc)
        await worker.flush()
        # still listed as its own: not taken again meanwhile
        await self._release(worker.lease, worker.unwritten())
        self._forget(worker)

    def _forget(self, worker: LeaseWorker) -> None:
        if self._workers.get(worker.lease.lease_token) is worker:
            del self._workers[worker.lease.lease_token]

    async def _release(self, lease: Lease, continuation: str | None = None) -> None:
        """Release ``lease`` (with ``continuation`` checkpointed by the same write) -- tried
        again after a failure (``ProcessorBase._release_again``): else it expires."""
        manager = self._manager
        assert manager is not None
        failure: Exception | None = None
        released: Lease | None = None
        for attempt in itertools.count(1):
            try:
                released = await self._run(manager.release(lease, continuation))
                failure = None
                break
            except LeaseLostError as lost:
                failure = lost
                break
            except Exception as exc:
                failure = exc
                if not self._release_again(lease, attempt, exc):
                    break
                await asyncio.sleep(self._release_delay(attempt))
        self._released(lease, failure, released)

    async def _replace_gone(self, lease: Lease, last_continuation: str | None) -> None:
        """``HandlePartitionGoneAsync``: the children created and taken, the parent deleted."""
        manager = self._manager
        assert manager is not None
        try:
            created, stays = await self._run(manager.handle_gone(lease, last_continuation))
        except Exception as exc:
            if self._not_replaced(lease, exc):
                await self._release(lease)
            return
        if stays is not None:
            await self._release(stays)
            return
        self._split(lease, created, last_continuation)
        for child in created:
            await self._try_add(child)

    # -- helpers -------------------------------------------------------------------------------

    async def _run(self, flow: Flow) -> Any:
        return await drive(flow, self._store, self._reader, asyncio.sleep)
