"""One lease's processing in the aio processor (``PartitionSupervisorCore``): a renewer task and
a feed task, which reads the lease's range, hands each batch to the handler and checkpoints it.

* **The next page is read while the handler runs** (one page ahead, per lease: memory for one
  more page): a handler that waits on I/O does not add its wait to the read's. The page read
  ahead is dropped when the batch fails (the lease is read again from the failed batch's
  position) and when the processing ends.
* **The next read is sent from the answer before** (Python 3.12+, a client that does not read
  the environment): when the lease's task waits for a read whose answer holds changes, that
  answer's raw response hook starts the next read as an eager task, before azure-cosmos parses
  the page (``_answered``, as the sync worker does); aiohttp writes its request at once. A
  client that reads proxy and netrc settings from the environment (azure-core's default) has
  aiohttp look them up in a thread before each request, so such a read would be written only
  once the page is parsed, and its thread would take the GIL from the parse: not sent early
  (``_reading.writes_at_once``).
* A batch is handed over once the previous batch's checkpoint is written (written while the
  batch was read and handled; a failed write is written again first: ``_keeping``) and while
  this instance's last write of the lease is within the expiry bound (``_keeping.fresh``): at
  most the batch in flight is given again, and never by two instances past the bound.
* The renewer renews the lease ``lease_renew_interval`` after its last write -- at the last safe
  moment while the lease container throttles (``_keeping``).
* A batch that keeps failing is retried, then taken apart and its failing changes set aside
  (``_retries``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from cosmos_changefeed import _clock, _keeping, _order
from cosmos_changefeed._checkpoints import CheckpointPlan
from cosmos_changefeed._checks import not_awaitable
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._manual import AsyncManualCheckpointContext, with_checkpoint
from cosmos_changefeed._options import FailedBatch, LeaseContext
from cosmos_changefeed._order import HeldBehindError, SetAsideChange
from cosmos_changefeed._protocol import FeedRangeGoneError, Flow, LeaseLostError
from cosmos_changefeed._reading import Page, ProcessorStart, Start, first_read, read_on
from cosmos_changefeed._retries import Apart, Attempts, apart
from cosmos_changefeed.aio._feed_async import CosmosFeedSource

if TYPE_CHECKING:
    from cosmos_changefeed.aio._processor_async import ChangeFeedProcessor


def _eager(coro: Coroutine[Any, Any, Page]) -> asyncio.Task[Page] | None:
    """``coro`` as a task that runs at once, up to its first wait (None: Python 3.11, which has
    no eager tasks, and whose task would run only after the page is parsed)."""
    factory = getattr(asyncio, "eager_task_factory", None)
    if factory is None:
        coro.close()
        return None
    task: asyncio.Task[Page] = factory(asyncio.get_running_loop(), coro)
    return task


@dataclasses.dataclass(frozen=True)
class Pending:
    """A read of a lease's range running as a task: its number (the lease's task waits for one
    read at a time: ``LeaseWorker._awaited``) and the position it reads from."""

    number: int
    position: str
    task: asyncio.Task[Page]

    def drop(self) -> None:
        """Not wanted any more: cancelled, its outcome taken."""
        self.task.cancel()
        self.task.add_done_callback(_retrieved)


class LeaseWorker:
    """One lease's renewer and feed processor (``PartitionSupervisorCore``)."""

    def __init__(self, processor: ChangeFeedProcessor, lease: Lease, start: ProcessorStart) -> None:
        self.processor = processor
        manager = processor._manager
        assert manager is not None
        self.manager = manager
        #: The lease as this instance last wrote it (renewals and checkpoints replace it).
        self.lease = lease
        self.start = start
        self.task: asyncio.Task[None] | None = None
        #: Set once the lease's start is fixed (see ``wait_until_listening``).
        self.position_fixed = asyncio.Event()
        self._writing = asyncio.Lock()
        self._lost: LeaseLostError | None = None
        #: Set when the lease is lost on renewal or given back: a pause ends at once.
        self._wake = asyncio.Event()
        self._halting = False
        #: The checkpoint being written while the next batch is read, and its position.
        self._checkpointing: asyncio.Task[None] | None = None
        self._due: str | None = None
        #: The next page, read while the handler handles this one.
        self._ahead: Pending | None = None
        #: The next read, sent from the answer of the read the lease's task waits for.
        self._early: Pending | None = None
        self._awaited: int | None = None
        self._numbers = itertools.count()
        #: A position handled whose checkpoint the next renewal writes (``_keeping``).
        self._deferred: str | None = None
        self.attempts = Attempts()
        opts = processor.options
        self.plan = CheckpointPlan(opts.checkpoint, interval=opts.checkpoint_interval)
        #: Whether a batch was handed over (a lease's start is kept only before).
        self._handed = False
        #: The change handled as a probe (``_retries``): not given again in its turn.
        self._probed: tuple[str | None, int | None] | None = None

    async def run(self) -> None:
        renewer = asyncio.create_task(self._renew(), name=f"renew-{self.lease.lease_token}")
        feeder = asyncio.create_task(self._feed(), name=f"feed-{self.lease.lease_token}")
        try:
            await asyncio.wait({renewer, feeder}, return_when=asyncio.FIRST_COMPLETED)
            if renewer.done() and not feeder.done():
                error = renewer.exception()
                if isinstance(error, LeaseLostError):
                    # the batch in flight finishes; its checkpoint is refused, and no next read
                    self._lost = error
                    self._wake.set()
                    with contextlib.suppress(LeaseLostError):
                        await feeder
                    raise error
            await feeder
        finally:
            for task in (renewer, feeder):
                task.cancel()
            for task in (renewer, feeder):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    # -- keeping the lease ----------------------------------------------------------------------

    async def _renew(self) -> None:
        failures = 0
        while True:
            interval = self.processor._renew_interval()
            await asyncio.sleep(self.processor._renewal_retry(self.lease, interval, failures))
            if not failures and _keeping.age(self.lease, self.manager.now()) < interval:
                continue  # written since (a checkpoint stamps it too)
            try:
                async with self._writing:
                    flow, carried = self._renewal()
                    self.lease = await self._timed(flow)
                    self._carried(carried)
                    self._heed()
                failures = 0
            except LeaseLostError:
                raise
            except Exception as exc:
                failures += 1
                again_in = self.processor._renewal_retry(self.lease, interval, failures)
                self.processor._renewal_failed(self.lease.lease_token, exc, again_in)

    async def _timed(self, flow: Flow) -> Lease:
        """A renewal's write, done; how long it took (failed or not) told to the processor
        (``_renewal_took``: the last safe moment to renew at)."""
        began = _clock.monotonic()
        try:
            lease: Lease = await self.processor._run(flow)
        finally:
            self.processor._renewal_took(_clock.monotonic() - began)
        return lease

    def _renewal(self) -> tuple[Flow, str | None]:
        """A renewal's write: the position whose checkpoint waits for it (the lease container
        throttles: ``_keeping``), unless a checkpoint is being written; else a renewal."""
        due, writing = self._deferred, self._checkpointing
        if due is None or (writing is not None and not writing.done()):
            return self.manager.renew(self._marked()), None
        return self.manager.checkpoint(self._marked(), due), due

    def _carried(self, due: str | None) -> None:
        if due is not None:
            self.plan.written(due)
            if self._deferred == due:
                self._deferred = None

    async def _fresh(self) -> bool:
        """Whether a batch may be handed over: this instance's last write of the lease within
        the expiry bound, or a renewal now (False: it failed; the caller goes round again)."""
        expiration = self.processor.options.lease_expiration_interval
        if _keeping.fresh(self.lease, self.manager.now(), expiration):
            return True
        try:
            async with self._writing:
                if not _keeping.fresh(self.lease, self.manager.now(), expiration):
                    flow, carried = self._renewal()
                    self.lease = await self._timed(flow)
                    self._carried(carried)
                    self._heed()
        except LeaseLostError as lost:
            self._lost = lost
            raise
        except Exception as exc:
            self.processor._renewal_failed(self.lease.lease_token, exc, self._retry_delay(1))
            await self._wait(self._retry_delay(1))
            return False
        return True

    # -- reading and handing over -----------------------------------------------------------------

    async def _feed(self) -> None:
        processor = self.processor
        position, start = first_read(self.lease, self.start)
        if position or start != "Now":
            self.position_fixed.set()
        try:
            while True:
                self._check_lost()
                if self._halting:
                    await self._settle()
                    return
                page = await self._next(position, start)
                early = self._early_for(page)
                if page is None:
                    continue
                if page.gone:
                    await self._settle()
                    raise FeedRangeGoneError(self.lease.lease_token, position)
                self.position_fixed.set()
                if not page.items:
                    position = page.etag or position
                    due = self.plan.caught_up() or self._start_to_keep(page)
                    if due is not None:
                        await self._settle()
                        self._checkpointing = asyncio.create_task(self._checkpoint(due))
                        self._due = due
                    await self._pause()
                    continue
                # the previous batch's checkpoint was written while this one was read; it is
                # done before this one is handed over: at most the batch in flight is given again
                await self._settle()
                if not await self._fresh():
                    if early is not None:
                        early.drop()
                    continue  # the page is read again
                if page.etag is not None:
                    self._ahead = early or self._submit(page.etag, start)
                if not await self._handle(page, position):
                    self._drop_ahead()
                    continue
                if page.etag is None:
                    processor._no_etag(self.lease.lease_token)
                    await self._pause()
                    continue
                due = self.plan.handled(page.etag)
                if due is not None and self.processor._throttled:  # with the renewal: _keeping
                    self._deferred, due = due, None
                if due is not None:  # written while the next batch is read
                    self._checkpointing = asyncio.create_task(self._checkpoint(due))
                    self._due, self._deferred = due, None
                position = page.etag
        finally:
            self._drop_ahead()
            if self._checkpointing is not None and not self._checkpointing.done():
                self._checkpointing.cancel()

    async def _next(self, position: str | None, start: Start) -> Page | None:
        """The page at ``position``: the one read ahead, or read now (None: the read failed,
        and the poll delay was waited)."""
        ahead, self._ahead = self._ahead, None
        self._awaited = ahead.number if ahead is not None else next(self._numbers)
        try:
            if ahead is not None:
                return await ahead.task
            return await self._read(position, start, self._awaited)
        except Exception as exc:
            self.processor._read_failed(self.lease.lease_token, exc)
            await self._pause()
            return None
        finally:
            self._awaited = None

    async def _read(self, position: str | None, start: Start, number: int | None = None) -> Page:
        opts = self.processor.options
        reader = self.processor._reader
        if number is None or not isinstance(reader, CosmosFeedSource) or not reader._writes_at_once:
            return await reader.read(
                self.lease, position, start, mode=opts.mode, max_items=opts.max_items
            )
        return await reader.read(
            self.lease,
            position,
            start,
            mode=opts.mode,
            max_items=opts.max_items,
            answered=functools.partial(self._answered, number, start),
        )

    def _submit(self, position: str, start: Start) -> Pending:
        """The read of the page at ``position``, as a task."""
        number = next(self._numbers)
        return Pending(number, position, asyncio.create_task(self._read(position, start, number)))

    def _answered(self, number: int, start: Start, etag: str) -> None:
        """Read ``number``'s answer holds changes up to ``etag`` (told in its raw response hook,
        before azure-cosmos parses it: ``_reading.ReadHooks``). When the lease's task waits for
        that read, the next one starts now, as an eager task: its request goes out while this
        answer is parsed and handed over (see the module). The lease's task keeps it only if
        the page it gets ends at ``etag`` and is handed over (``_early_for``)."""
        if number != self._awaited or self._early is not None or self._halting:
            return
        following = next(self._numbers)
        task = _eager(self._read(etag, start, following))
        if task is not None:
            self._early = Pending(following, etag, task)

    def _early_for(self, page: Page | None) -> Pending | None:
        """The read sent from ``page``'s answer, if it reads on from there (``read_on``)."""
        early, self._early = self._early, None
        return read_on(early, page)

    def _start_to_keep(self, page: Page) -> str | None:
        """A lease without a checkpoint whose read found nothing: the position its start is
        at now, to keep in the lease (``_keeping``)."""
        if not self.processor.options.keep_start:
            return None
        if self.lease.continuation is None and self._due is None and not self._handed:
            return page.etag
        return None

    def _drop_ahead(self) -> None:
        for pending in (self._ahead, self._early):
            if pending is not None:
                pending.drop()
        self._ahead = self._early = None

    def _context(self, page: Page) -> LeaseContext:
        context = self.processor._context(self.lease, page)
        if self.plan.manual:
            number, etag = self.plan.handed(), page.etag
            return with_checkpoint(
                context, AsyncManualCheckpointContext, lambda: self._manual_checkpoint(number, etag)
            )
        return context

    async def _call(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        result = self.processor._handler(context, changes)
        not_awaitable(result)
        await result

    async def _handle(self, page: Page, position: str | None) -> bool:
        """Hand ``page`` to the handler: True when it is done with (handled, or set aside),
        False when it failed (and its retry delay is waited)."""
        processor = self.processor
        context = self._context(page)
        self._handed = True
        probed, self._probed = self._probed, None
        items, behind = await self._sorted_out(_order.without(page.items, probed))
        try:
            if items:
                await self._call(context, items)
        except Exception as exc:
            if exc is self._lost:  # the handler's checkpoint() found the lease lost
                raise
            batch = FailedBatch(context, items, self.attempts.failed(position), exc)
            delay = processor._handler_failed(batch)
            outcome = await self._apart(batch) if processor._to_set_aside(batch) else None
            if outcome is not None and outcome.settled:
                self._probed = _order.identity(outcome.probed) if outcome.probed else None
                return await self._settled(context, behind, outcome.held)
            processor._still_failing(batch, self.attempts.since, outcome)
            await self._pause(delay)
            return False
        if items:
            processor._handler_succeeded()
        return await self._settled(context, behind)

    async def _settled(
        self,
        context: LeaseContext,
        behind: list[tuple[dict[str, Any], SetAsideChange]],
        held: dict[str, SetAsideChange] | None = None,
    ) -> bool:
        """``_worker.LeaseWorker._settled``, awaited."""
        for change, holder in behind:
            waiting = FailedBatch(context, [change], 0, HeldBehindError(holder), behind=holder)
            if not await self._set_aside(waiting):
                await self._pause(self.processor.options.first_retry_delay)
                return False
        if held:
            async with self._writing:
                self.lease = _order.holding(self.lease, _order.held(self.lease) | held)
        self.attempts.passed()
        return True

    async def _sorted_out(
        self, changes: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], SetAsideChange]]]:
        """``_worker.LeaseWorker._sorted_out``, ``still_set_aside`` awaited."""
        processor = self.processor
        ask, paths = processor._still_set_aside, processor._paths
        if ask is None or paths is None or _order.HELD not in self.lease.properties:
            return changes, []
        keys = _order.held(self.lease)
        free = [
            key
            for key in _order.present(changes, keys, paths)
            if not await self._still(ask, keys[key])
        ]
        for key in free:
            processor._key_released(keys.pop(key))
        if free:
            async with self._writing:
                self.lease = _order.holding(self.lease, keys)
        found = _order.sort_out(changes, keys, paths)
        return found.handle, found.behind

    async def _still(self, ask: Callable[[SetAsideChange], Any], change: SetAsideChange) -> bool:
        try:
            return bool(await ask(change))
        except Exception as exc:
            self.processor._not_asked(change, exc)
            return True

    async def _apart(self, batch: FailedBatch) -> Apart:
        """Take a batch that failed its last attempt apart (``_retries.apart``): what it came
        to (``settled`` when every change was handled or set aside)."""
        processor, requested = self.processor, False

        async def asked() -> None:
            nonlocal requested
            requested = True

        context = batch.context
        if isinstance(context, AsyncManualCheckpointContext):  # written once all is settled
            context = with_checkpoint(context, AsyncManualCheckpointContext, asked)
        if len(batch.changes) > 1:
            processor._taking_apart(batch)
        steps = apart(
            dataclasses.replace(batch, context=context),
            evidence=lambda: processor._health.succeeded_since(self.attempts.since),
            paths=processor._paths if processor._still_set_aside is not None else None,
        )
        outcome: Any = None
        try:
            while True:
                kind, given = steps.send(outcome)
                if kind == "handle":
                    outcome = await self._piece(context, given, batch.attempt)
                elif kind == "set_aside":
                    outcome = await self._set_aside(given)
                else:
                    outcome = await self._probe(batch)
        except StopIteration as done:
            result: Apart = done.value
        if result.settled and requested and isinstance(batch.context, AsyncManualCheckpointContext):
            await batch.context.checkpoint()
        return result

    async def _piece(
        self, context: LeaseContext, changes: list[dict[str, Any]], attempt: int
    ) -> BaseException | None:
        """Hand a part of a batch taken apart over: what the handler raised, or None."""
        try:
            await self._call(context, changes)
        except Exception as exc:
            if exc is self._lost:
                raise
            self.processor._piece_failed(FailedBatch(context, changes, attempt, exc))
            return exc
        self.processor._handler_succeeded()
        return None

    async def _probe(self, batch: FailedBatch) -> list[dict[str, Any]] | None:
        """The lease's changes after ``batch`` (None: they could not be read)."""
        etag = batch.context.continuation
        if etag is None:
            return None
        try:
            return (await self._read(etag, "Now")).items
        except Exception:
            return None

    async def _set_aside(self, batch: FailedBatch) -> bool:
        processor = self.processor
        assert processor._set_aside is not None
        try:
            await processor._set_aside(batch)
        except Exception as failed:
            processor._set_aside_failed(batch, failed)
            return False
        processor._set_aside_done(batch)
        return True

    def _marked(self) -> Lease:
        """The lease as its next write leaves it (``_worker.LeaseWorker._marked``)."""
        return self.processor._marked(self.lease, self.attempts.count > 0)

    # -- checkpoints ------------------------------------------------------------------------------

    async def _checkpoint(self, etag: str) -> None:
        async with self._writing:
            try:
                checkpoint = self.manager.checkpoint(self._marked(), etag)
                self.lease = await self.processor._run(checkpoint)
                self._heed()
            except LeaseLostError as lost:
                self._lost = lost
                raise
        self.plan.written(etag)

    async def _manual_checkpoint(self, batch: int, etag: str | None) -> None:
        """A handler's ``await context.checkpoint()`` of batch ``batch``, read up to ``etag``."""
        if etag is not None and self.plan.manual_checkpoint(batch):
            await self._checkpoint(etag)

    async def flush(self) -> None:
        """Before the lease is released: what was handled and not checkpointed (a policy's
        batches, a write cut short by the stop) written -- tried again after a failure while
        the lease is within its bound (``_keeping.fresh``). Not while the lease container
        throttles: the release writes it (``unwritten``), one write rather than two."""
        if self.processor._throttled:
            return
        due, failures = self.plan.stopping(), 0
        while due is not None and self._lost is None:
            try:
                await self._checkpoint(due)
                return
            except Exception as exc:
                failures += 1
                if isinstance(exc, LeaseLostError) or not self._in_bound():
                    return
                token, again_in = self.lease.lease_token, self._retry_delay(failures)
                self.processor._checkpoint_failed(token, exc, again_in)
            await asyncio.sleep(again_in)

    def _in_bound(self) -> bool:
        expiration = self.processor.options.lease_expiration_interval
        return _keeping.fresh(self.lease, self.manager.now(), expiration)

    async def _settle(self) -> None:
        """Wait for the checkpoint being written, if any: one that failed (not lost) is written
        again, after a back-off, until it is or the lease is lost (its ``LeaseLostError``
        raises here) -- a lease given back waits for it too; a stop cancels the wait."""
        checkpointing, self._checkpointing = self._checkpointing, None
        if checkpointing is None:
            return
        failures = 0
        while True:
            try:
                await checkpointing
                return
            except LeaseLostError:
                raise
            except Exception as exc:
                failures += 1
                token, again_in = self.lease.lease_token, self._retry_delay(failures)
                self.processor._checkpoint_failed(token, exc, again_in)
            await self._wait(self._retry_delay(failures))
            self._check_lost()
            assert self._due is not None
            checkpointing = asyncio.create_task(self._checkpoint(self._due))

    def _retry_delay(self, failures: int) -> float:
        interval = self.processor.options.lease_renew_interval
        return _keeping.write_retry_delay(failures, interval / 8, interval)

    # -- waiting ---------------------------------------------------------------------------------

    def _check_lost(self) -> None:
        if self._lost is not None:
            raise self._lost

    async def _wait(self, seconds: float) -> None:
        """``seconds``, cut short when the lease is lost on renewal or given back."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def _pause(self, seconds: float | None = None) -> None:
        """The poll delay (or ``seconds``), once the checkpoint being written is; cut short
        when the lease is lost on renewal or given back."""
        await self._settle()
        await self._wait(self.processor.options.poll_delay if seconds is None else seconds)
        self._check_lost()

    def unwritten(self) -> str | None:
        """The last position handled, if its checkpoint was not written (a flush that did not
        get through): the release writes it."""
        plan = self.plan
        return None if plan.manual or plan.last == plan.stored else plan.last

    @property
    def halted(self) -> bool:
        """Whether its processing is ending (given back, handed over, stopped)."""
        return self._halting

    def _heed(self) -> None:
        """Another instance asked for the lease (``_handover``, seen in the lease as just
        written): its processing ends after the batch in flight, released to that instance."""
        if not self._halting and self.processor._hand_over_asked(self.lease):
            self.halt()

    def halt(self) -> None:
        """End this lease's processing after the batch in flight (its lease is given back)."""
        self._halting = True
        self._wake.set()


def _retrieved(task: asyncio.Task[Page]) -> None:
    """A read ahead that is dropped: its outcome taken, so that asyncio does not report it."""
    if not task.cancelled():
        task.exception()
