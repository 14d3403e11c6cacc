"""The change feed processor, sync: one thread balances the leases, one per owned lease reads
its range and calls the handler, one more per lease renews it. The same protocol as the aio
processor (``aio/_processor_async.py``, whose docstring lists the .NET sources), driven by
threads: the decisions are the pure core's, what neither waits nor runs is ``_processing``'s
(shared with the aio processor), this file is the threads.

A stop cannot interrupt a handler that is running: the lease's thread releases the lease when
the handler returns (and checkpoints that batch first, as it completed); a handler still running
after ``stop``'s timeout keeps its thread, and its lease expires.
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from azure.cosmos import ContainerProxy

from cosmos_changefeed._balancing import Outcome
from cosmos_changefeed._checkpoints import PER_BATCH, Checkpointing
from cosmos_changefeed._cosmos_store import CosmosLeaseStore
from cosmos_changefeed._drive import drive
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._lease_state import LeaseState, export_flow, restore_flow
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._manual import ManualCheckpointContext
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
from cosmos_changefeed._reading import Page, Start
from cosmos_changefeed._source import FeedSource
from cosmos_changefeed._starting import start_flow
from cosmos_changefeed._store import LeaseStore
from cosmos_changefeed._worker import LeaseWorker, StoppedError, no_sleep

#: Threads reading the next page of the leases whose handlers run (made as they are needed).
READERS = 16

#: ``(context, changes)``: a batch of one lease's changes, in the order of its feed.
Handler = Callable[[LeaseContext, list[dict[str, Any]]], object]
#: A handler under manual checkpoints (``checkpoint="manual"``), which calls
#: ``context.checkpoint()``.
ManualCheckpointHandler = Callable[[ManualCheckpointContext, list[dict[str, Any]]], object]


class ChangeFeedProcessor(ProcessorBase):
    """Processes the change feed of ``monitored_container`` with leases in ``lease_container``
    (a container, or any ``LeaseStore``), sharing them with every other instance of the same
    ``processor_name``. ``with processor:`` starts and stops it."""

    _flavour = "sync"
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
        set_aside: Callable[[FailedBatch], object] | None = None,
        set_aside_after: int | None = None,
        still_set_aside: Callable[[SetAsideChange], object] | None = None,
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
        self._balancer: threading.Thread | None = None
        self._stopping = threading.Event()
        self._listening = threading.Event()
        self._lock = threading.Lock()
        self._workers: dict[str, LeaseWorker] = {}
        #: Checkpoints are written here while the next batch is handled, and the next page
        #: read here while the handler runs (one at a time per lease); made at each start.
        self._checkpoints: ThreadPoolExecutor | None = None
        self._reading: ThreadPoolExecutor | None = None
        self._reads_lock = threading.Lock()
        self._reads_pending = 0

    # -- what an application sees ------------------------------------------------------------

    @property
    def owned_leases(self) -> list[str]:
        with self._lock:
            return sorted(self._workers)

    @property
    def is_listening(self) -> bool:
        return self._listening.is_set()

    def wait_until_listening(self, timeout: float | None = None) -> None:
        """Return once the processor is listening (``TimeoutError`` after ``timeout`` s); see
        ``cosmos_changefeed.aio.ChangeFeedProcessor.wait_until_listening``."""
        if self._balancer is None:
            raise RuntimeError("the processor is not started")
        if not self._listening.wait(timeout):
            raise TimeoutError(f"not listening after {timeout}s")

    # -- the lease state -------------------------------------------------------------------------

    def export_leases(self) -> LeaseState:
        """This processor's lease state: its leases and ``.info`` as stored, without the
        service's fields -- a JSON-ready list (``json.dumps`` it) that ``restore_leases``
        takes back, here or in another lease store (.NET's in-memory leases with a stream)."""
        endpoint = self._reader.account_endpoint
        return list(self._run(export_flow(self.processor_name, endpoint)))

    def restore_leases(self, state: Sequence[Mapping[str, Any]]) -> int:
        """Put an exported lease state in this processor's lease store, before it starts: the
        number of documents created. Refused while started, when a document is not this
        processor's on this container, or when the store holds its leases already."""
        self._refuse_while_started("restore_leases", self._balancer is not None)
        endpoint = self._reader.account_endpoint
        return int(self._run(restore_flow(self.processor_name, endpoint, state)))

    # -- start and stop ------------------------------------------------------------------------

    def start(self) -> None:
        """Initialise the lease store and start balancing; returns once the store is
        initialised."""
        if self._balancer is not None:
            return
        started = dt.datetime.now(dt.UTC)
        opts = self.options
        self._stopping.clear()
        self._listening.clear()
        flow = start_flow(opts, self._reader.account_endpoint, started)
        self._started(drive(flow, self._store, self._reader, self._sleep, self._start_patience))
        self._paths = self._checked_paths(self._reader.partition_key_paths())
        self._checkpoints = ThreadPoolExecutor(max_workers=4, thread_name_prefix="checkpoint")
        self._reading = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="read-ahead")
        self._balancer = threading.Thread(
            target=self._balance,
            name=f"cosmos-changefeed-balancer-{opts.processor_name}",
            daemon=True,
        )
        self._balancer.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop balancing and every lease's processing, and release the leases (a handler
        running is waited for, up to ``timeout`` s in all)."""
        self._stopping.set()
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=timeout)
        if self._balancer is not None:
            self._balancer.join(timeout)
            self._balancer = None
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.halt()
        for worker in workers:
            left = max((deadline - dt.datetime.now(dt.UTC)).total_seconds(), 0.0)
            if worker.thread is not None:
                worker.thread.join(left)
        for pool in (self._checkpoints, self._reading):
            if pool is not None:
                pool.shutdown(wait=False)
        alive = [w for w in workers if w.thread is not None and w.thread.is_alive()]
        if alive:
            self._not_released_in(len(alive), timeout)
        self._listening.clear()

    def __enter__(self) -> ChangeFeedProcessor:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- balancing -----------------------------------------------------------------------------

    def _balance(self) -> None:
        manager = self._manager
        assert manager is not None
        first, failures = True, 0
        while not self._stopping.is_set():
            try:
                leases = self._run(manager.all_leases())
                plan = self._plan(leases, manager)
                for lease in plan.mine:  # its own (a restart under the same name) first
                    if lease.lease_token not in self.owned_leases:
                        self._try_add(lease)
                for lease in plan.to_try():
                    plan.tried(lease, self._try_add(lease))
                for lease in plan.to_ask():
                    plan.asked(lease, self._try_ask(lease))
                for lease in plan.release:
                    self._give_back(lease)
                if first:
                    first = False
                    with self._lock:
                        workers = list(self._workers.values())
                    threading.Thread(
                        target=self._listen_when_fixed, args=(workers,), daemon=True
                    ).start()
            except StoppedError:
                return
            except Exception as exc:
                failures += 1
                self._stopping.wait(
                    self._balancing_failed(exc, failures, holding=bool(self._workers))
                )
                continue
            failures = 0
            self._stopping.wait(self._balance_delay(0, plan))

    def _listen_when_fixed(self, workers: list[LeaseWorker]) -> None:
        for worker in workers:
            while not worker.position_fixed.wait(0.5):
                if self._stopping.is_set():
                    return
        if not self._stopping.is_set():
            self._listening.set()
            self._listening_now(w.lease.lease_token for w in workers)

    def _try_add(self, lease: Lease) -> Outcome:
        """Acquire ``lease`` and process it."""
        try:
            return "acquired" if self._add(lease) else "skipped"
        except Exception as exc:
            self._not_acquired(lease, exc)
            return "lost" if isinstance(exc, LeaseLostError) else "failed"

    def _try_ask(self, lease: Lease) -> Outcome:
        """Ask the owner of ``lease`` to hand it over (``_handover``)."""
        manager = self._manager
        assert manager is not None
        try:
            self._run(manager.request(lease))
        except Exception as exc:
            return self._request_failed(lease, exc)
        self._requested(lease)
        return "acquired"

    def _give_back(self, lease: Lease) -> None:
        """End a lease's processing as a stop ends it (after its batch in flight, checkpointed)
        and release it: another instance asked for it, or is under its fair share."""
        with self._lock:
            worker = self._workers.get(lease.lease_token)
        if worker is not None and not worker.halted:
            self._giving_back(lease)
            worker.halt()

    def _add(self, lease: Lease) -> bool:
        """Acquire ``lease`` and process it; False when it is this instance's already (or it
        stops)."""
        token = lease.lease_token
        manager = self._manager
        assert manager is not None and self._start is not None
        with self._lock:
            if self._stopping.is_set() or token in self._workers or token in self._acquiring:
                return False
            self._acquiring.add(token)
        # The token stays among those acquiring until its worker is registered: another thread
        # adding the same lease meanwhile (the acquire loop beside a split's child added from a
        # lease's thread) finds it and adds nothing, never a second worker on one lease.
        try:
            ranges = self._reader.ranges() if lease.feed_range is None else ()
            acquired = self._run(manager.acquire(lease, ranges))
            self._acquired(lease, acquired, manager, self._start)
            worker = LeaseWorker(self, acquired, self._start)
            worker.thread = threading.Thread(
                target=self._supervise, args=(worker,), name=f"lease-{token}", daemon=True
            )
            # Registered and started under the lock ``stop`` lists the workers under: a worker
            # it lists has a running thread to join, and one acquired as it stops (a split's
            # child, added from a lease's thread) is released here instead of running unseen.
            with self._lock:
                stopping = self._stopping.is_set()
                if not stopping:
                    self._workers[token] = worker
                    worker.thread.start()
        finally:
            with self._lock:
                self._acquiring.discard(token)
        if stopping:
            self._release(acquired)
        return True

    def _supervise(self, worker: LeaseWorker) -> None:
        token = worker.lease.lease_token
        try:
            worker.run()
        except FeedRangeGoneError as gone:
            self._forget(worker)
            self._replace_gone(worker.lease, gone.last_continuation)
            return
        except LeaseLostError as exc:
            self._forget(worker)
            self._lost(token, exc, worker.lease)
            return
        except StoppedError:
            pass
        except Exception as exc:
            self._processing_failed(token, exc)
        # still listed as its own: not taken again meanwhile
        self._release(worker.lease, worker.unwritten())
        self._forget(worker)

    def _forget(self, worker: LeaseWorker) -> None:
        with self._lock:
            if self._workers.get(worker.lease.lease_token) is worker:
                del self._workers[worker.lease.lease_token]

    def _release(self, lease: Lease, continuation: str | None = None) -> None:
        """Release ``lease`` (with ``continuation`` checkpointed by the same write) -- tried
        again after a failure (``ProcessorBase._release_again``): else it expires."""
        manager = self._manager
        assert manager is not None
        failure: Exception | None = None
        released: Lease | None = None
        for attempt in itertools.count(1):
            try:
                flow = manager.release(lease, continuation)
                released = drive(flow, self._store, self._reader, no_sleep)
                failure = None
                break
            except LeaseLostError as lost:
                failure = lost
                break
            except Exception as exc:
                failure = exc
                if not self._release_again(lease, attempt, exc):
                    break
                time.sleep(self._release_delay(attempt))
        self._released(lease, failure, released)

    def _replace_gone(self, lease: Lease, last_continuation: str | None) -> None:
        manager = self._manager
        assert manager is not None
        try:
            created, stays = self._run(manager.handle_gone(lease, last_continuation))
        except Exception as exc:
            if self._not_replaced(lease, exc):
                self._release(lease)
            return
        if stays is not None:
            self._release(stays)
            return
        self._split(lease, created, last_continuation)
        for child in created:
            self._try_add(child)

    # -- helpers -------------------------------------------------------------------------------

    def _read_ahead(
        self, read: Callable[[str | None, Start], Page], position: str, start: Start
    ) -> Future[Page]:
        """The next page of a lease, read on the reading pool."""
        assert self._reading is not None
        with self._reads_lock:
            self._reads_pending += 1
        future = self._reading.submit(read, position, start)
        future.add_done_callback(self._read_done)
        return future

    def _read_done(self, _future: Future[Page]) -> None:
        with self._reads_lock:
            self._reads_pending -= 1

    def _reading_free(self) -> bool:
        """Whether a thread of the reading pool is free (a read sent early is sent at once,
        never queued behind the leases' reads)."""
        with self._reads_lock:
            return self._reads_pending < READERS

    def _write_behind(self, checkpoint: Callable[[str], None], etag: str) -> Future[None]:
        """A lease's checkpoint, written on the checkpoint pool."""
        assert self._checkpoints is not None
        return self._checkpoints.submit(checkpoint, etag)

    def _run(self, flow: Flow) -> Any:
        return drive(flow, self._store, self._reader, self._sleep)

    def _sleep(self, seconds: float) -> None:
        if self._stopping.wait(seconds):
            raise StoppedError
