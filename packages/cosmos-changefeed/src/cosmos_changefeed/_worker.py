"""One lease's processing in the sync processor: the lease's own thread reads its range, hands
each batch to the handler and checkpoints it; one more thread renews it. What it does is the aio
worker's (``aio/_worker_async.py`` says it), with threads: the next page is read on the
processor's reading pool while the handler runs, a checkpoint is written on its checkpoint
pool while the next batch is handed over.

A stop cannot interrupt a handler that is running: the lease's thread ends after it (and
checkpoints that batch first, as it completed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from cosmos_changefeed import _clock, _keeping, _order
from cosmos_changefeed._checkpoints import CheckpointPlan
from cosmos_changefeed._checks import awaited_nothing
from cosmos_changefeed._drive import drive
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._manual import ManualCheckpointContext, with_checkpoint
from cosmos_changefeed._options import FailedBatch, LeaseContext
from cosmos_changefeed._order import HeldBehindError, SetAsideChange
from cosmos_changefeed._protocol import FeedRangeGoneError, Flow, LeaseLostError
from cosmos_changefeed._reading import Page, ProcessorStart, Start, first_read, read_on
from cosmos_changefeed._retries import Apart, Attempts, apart

if TYPE_CHECKING:
    from cosmos_changefeed._processor import ChangeFeedProcessor


#: How long a read told that its page holds changes waits, at most, for the next read's request
#: to be on its way before its own answer is parsed (``LeaseWorker._answered``).
EARLY_SEND = 0.05


@dataclasses.dataclass(frozen=True)
class Pending:
    """A read of a lease's range on the reading pool: its number (the lease's thread waits for
    one read at a time: ``LeaseWorker._awaited``) and the position it reads from."""

    number: int
    position: str
    future: Future[Page]

    def drop(self) -> None:
        """Not wanted any more (a read already sent runs on; its page is not used)."""
        self.future.cancel()


class StoppedError(Exception):
    """The processor is stopping (or gave the lease back): the lease's thread ends and
    releases it."""


def no_sleep(_seconds: float) -> None:
    return None


class LeaseWorker:
    """One lease's renewer thread and feed processor (the lease's own thread)."""

    def __init__(self, processor: ChangeFeedProcessor, lease: Lease, start: ProcessorStart) -> None:
        self.processor = processor
        manager = processor._manager
        assert manager is not None
        self.manager = manager
        self.lease = lease
        self.start = start
        self.thread: threading.Thread | None = None
        self.position_fixed = threading.Event()
        #: Set to end this lease's processing (the processor stops, or gives the lease back);
        #: set once it ended (the renewals end then).
        self.stop = threading.Event()
        self._finished = threading.Event()
        self._writing = threading.Lock()
        self._lost: LeaseLostError | None = None
        self._wake = threading.Event()
        self._checkpointing: Future[None] | None = None
        self._due: str | None = None
        self._ahead: Pending | None = None
        #: The next read, sent from the answer of the read the lease's thread waits for.
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

    def run(self) -> None:
        renewer = threading.Thread(
            target=self._renew, name=f"renew-{self.lease.lease_token}", daemon=True
        )
        renewer.start()
        try:
            self._feed()
        finally:
            self.halt()
            self._drop_ahead()
            with contextlib.suppress(Exception):  # a batch handled is checkpointed if it can be
                self._settle()
            self.flush()
            self._finished.set()
            renewer.join(5.0)

    def flush(self) -> None:
        """Before the lease is released: what was handled and not checkpointed (a policy's
        batches, a write cut short by the stop) written -- tried again after a failure while
        the lease is within its bound (``_keeping.fresh``). Not while the lease container
        throttles: the release writes it (``unwritten``), one write rather than two."""
        if self.processor._throttled:
            return
        due, failures = self.plan.stopping(), 0
        expiration = self.processor.options.lease_expiration_interval
        while due is not None and self._lost is None:
            try:
                self._checkpoint(due)
                return
            except Exception as exc:
                failures += 1
                fresh = _keeping.fresh(self.lease, self.manager.now(), expiration)
                if isinstance(exc, LeaseLostError) or not fresh:
                    return
                token, again_in = self.lease.lease_token, self._retry_delay(failures)
                self.processor._checkpoint_failed(token, exc, again_in)
            time.sleep(again_in)

    def unwritten(self) -> str | None:
        """The last position handled, if its checkpoint was not written (a flush that did not
        get through): the release writes it."""
        plan = self.plan
        return None if plan.manual or plan.last == plan.stored else plan.last

    @property
    def halted(self) -> bool:
        """Whether its processing is ending (given back, handed over, stopped)."""
        return self.stop.is_set()

    def _heed(self) -> None:
        """Another instance asked for the lease (``_handover``, seen in the lease as just
        written): its processing ends after the batch in flight, released to that instance."""
        if not self.stop.is_set() and self.processor._hand_over_asked(self.lease):
            self.halt()

    def halt(self) -> None:
        """End this lease's processing (at once when it waits, after the handler when one
        runs)."""
        self.stop.set()
        self._wake.set()

    def _write(self, flow: Flow) -> Any:
        return drive(flow, self.processor._store, self.processor._reader, no_sleep)

    # -- keeping the lease ----------------------------------------------------------------------

    def _renew(self) -> None:
        failures = 0
        while True:
            interval = self.processor._renew_interval()
            # renewed until the processing ends (a lease handed over or given back is still
            # this instance's while its batch in flight is handled and checkpointed)
            if self._finished.wait(self.processor._renewal_retry(self.lease, interval, failures)):
                return
            if not failures and _keeping.age(self.lease, self.manager.now()) < interval:
                continue  # written since (a checkpoint stamps it too)
            try:
                with self._writing:
                    if self._finished.is_set():
                        return
                    flow, carried = self._renewal()
                    self.lease = self._timed(flow)
                    self._carried(carried)
                    self._heed()
                failures = 0
            except LeaseLostError as lost:
                self._lost = lost
                self._wake.set()
                return
            except Exception as exc:
                failures += 1
                again_in = self.processor._renewal_retry(self.lease, interval, failures)
                self.processor._renewal_failed(self.lease.lease_token, exc, again_in)

    def _timed(self, flow: Flow) -> Lease:
        """A renewal's write (``aio/_worker_async.LeaseWorker._timed``)."""
        began = _clock.monotonic()
        try:
            lease: Lease = self._write(flow)
        finally:
            self.processor._renewal_took(_clock.monotonic() - began)
        return lease

    def _renewal(self) -> tuple[Flow, str | None]:
        """A renewal's write (``aio/_worker_async.LeaseWorker._renewal``)."""
        due, writing = self._deferred, self._checkpointing
        if due is None or (writing is not None and not writing.done()):
            return self.manager.renew(self._marked()), None
        return self.manager.checkpoint(self._marked(), due), due

    def _carried(self, due: str | None) -> None:
        if due is not None:
            self.plan.written(due)
            if self._deferred == due:
                self._deferred = None

    def _fresh(self) -> bool:
        """Whether a batch may be handed over (``aio/_worker_async.LeaseWorker._fresh``)."""
        expiration = self.processor.options.lease_expiration_interval
        if _keeping.fresh(self.lease, self.manager.now(), expiration):
            return True
        try:
            with self._writing:
                if not _keeping.fresh(self.lease, self.manager.now(), expiration):
                    flow, carried = self._renewal()
                    self.lease = self._timed(flow)
                    self._carried(carried)
                    self._heed()
        except LeaseLostError as lost:
            self._lost = lost
            raise
        except Exception as exc:
            self.processor._renewal_failed(self.lease.lease_token, exc, self._retry_delay(1))
            self._wake.wait(self._retry_delay(1))
            return False
        return True

    # -- reading and handing over -----------------------------------------------------------------

    def _check(self) -> None:
        if self._lost is not None:
            raise self._lost
        if self.stop.is_set():
            raise StoppedError

    def _pause(self, seconds: float | None = None) -> None:
        """The poll delay (or ``seconds``), once the checkpoint being written is; cut short
        when the lease is lost or the processing ends."""
        self._settle()
        self._wake.wait(self.processor.options.poll_delay if seconds is None else seconds)
        self._check()

    def _feed(self) -> None:
        processor = self.processor
        position, start = first_read(self.lease, self.start)
        if position or start != "Now":
            self.position_fixed.set()
        while True:
            self._check()
            page = self._next(position, start)
            early = self._early_for(page)
            if page is None:
                continue
            if page.gone:
                self._settle()
                raise FeedRangeGoneError(self.lease.lease_token, position)
            self.position_fixed.set()
            if not page.items:
                position = page.etag or position
                due = self.plan.caught_up() or self._start_to_keep(page)
                if due is not None:
                    self._settle()
                    self._checkpointing = processor._write_behind(self._checkpoint, due)
                    self._due = due
                self._pause()
                continue
            # the previous batch's checkpoint was written while this one was read; it is done
            # before this one is handed over: at most the batch in flight is given again
            self._settle()
            if not self._fresh():
                self._drop(early)
                continue  # the page is read again
            if page.etag is not None:
                self._ahead = early or self._submit(page.etag, start)
            if not self._handle(page, position):
                self._drop_ahead()
                continue
            if page.etag is None:
                self._pause()
                continue
            due = self.plan.handled(page.etag)
            if due is not None and processor._throttled:  # written with the renewal: _keeping
                self._deferred, due = due, None
            if due is not None:  # written while the next batch is read
                self._checkpointing = processor._write_behind(self._checkpoint, due)
                self._due, self._deferred = due, None
            position = page.etag

    def _next(self, position: str | None, start: Start) -> Page | None:
        """The page at ``position``: the one read ahead, or read now (None: the read failed,
        and the poll delay was waited)."""
        ahead, self._ahead = self._ahead, None
        self._awaited = ahead.number if ahead is not None else next(self._numbers)
        try:
            if ahead is not None:
                return ahead.future.result()
            return self._read(position, start, self._awaited)
        except Exception as exc:
            self.processor._read_failed(self.lease.lease_token, exc)
            self._pause()
            return None
        finally:
            self._awaited = None

    def _read(
        self,
        position: str | None,
        start: Start,
        number: int | None = None,
        sent: Callable[[], None] | None = None,
    ) -> Page:
        opts = self.processor.options
        reader = self.processor._reader
        if not isinstance(reader, CosmosFeedSource):  # a source of the application's
            return reader.read(
                self.lease, position, start, mode=opts.mode, max_items=opts.max_items
            )
        answered = None if number is None else functools.partial(self._answered, number, start)
        return reader.read(
            self.lease,
            position,
            start,
            mode=opts.mode,
            max_items=opts.max_items,
            sent=sent,
            answered=answered,
        )

    def _submit(self, position: str, start: Start, sent: threading.Event | None = None) -> Pending:
        """The read of the page at ``position``, sent on the reading pool."""
        number = next(self._numbers)
        read = functools.partial(self._read, number=number, sent=sent.set if sent else None)
        return Pending(number, position, self.processor._read_ahead(read, position, start))

    def _answered(self, number: int, start: Start, etag: str) -> None:
        """Read ``number``'s answer holds changes up to ``etag`` (told in the reading thread,
        before azure-cosmos parses it: ``_reading.ReadHooks``). When the lease's thread waits
        for that read, the next one is sent now, on the reading pool if a thread of it is free,
        and this thread waits (``EARLY_SEND`` at most) until its request is on its way: the
        service answers it while this answer is parsed and handed over. The lease's thread
        keeps it only if the page it gets ends at ``etag`` and is handed over (``_early_for``);
        it reads ahead of one page, as ever."""
        if number != self._awaited or self._early is not None or self.stop.is_set():
            return
        if not self.processor._reading_free():
            return
        sent = threading.Event()
        try:
            early = self._submit(etag, start, sent)
        except RuntimeError:  # the reading pool shut down: the processor stops
            return
        early.future.add_done_callback(lambda _done: sent.set())
        self._early = early
        sent.wait(EARLY_SEND)

    def _early_for(self, page: Page | None) -> Pending | None:
        """The read sent from ``page``'s answer, if it reads on from there (``read_on``)."""
        early, self._early = self._early, None
        return read_on(early, page)

    @staticmethod
    def _drop(pending: Pending | None) -> None:
        if pending is not None:
            pending.drop()

    def _start_to_keep(self, page: Page) -> str | None:
        """A lease without a checkpoint whose read found nothing: the position its start is
        at now, to keep in the lease (``_keeping``)."""
        if not self.processor.options.keep_start:
            return None
        if self.lease.continuation is None and self._due is None and not self._handed:
            return page.etag
        return None

    def _drop_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        self._drop(ahead)
        early, self._early = self._early, None
        self._drop(early)

    def _context(self, page: Page) -> LeaseContext:
        context = self.processor._context(self.lease, page)
        if self.plan.manual:
            number, etag = self.plan.handed(), page.etag
            return with_checkpoint(
                context, ManualCheckpointContext, lambda: self._manual_checkpoint(number, etag)
            )
        return context

    def _handle(self, page: Page, position: str | None) -> bool:
        """Hand ``page`` to the handler: True when it is done with (handled, or set aside),
        False when it failed (and its retry delay is waited)."""
        processor = self.processor
        context = self._context(page)
        self._handed = True
        probed, self._probed = self._probed, None
        items, behind = self._sorted_out(_order.without(page.items, probed))
        try:
            if items:
                awaited_nothing(processor._handler(context, items))
        except Exception as exc:
            if exc is self._lost:  # the handler's checkpoint() found the lease lost
                raise
            batch = FailedBatch(context, items, self.attempts.failed(position), exc)
            delay = processor._handler_failed(batch)
            outcome = self._apart(batch) if processor._to_set_aside(batch) else None
            if outcome is not None and outcome.settled:
                self._probed = _order.identity(outcome.probed) if outcome.probed else None
                return self._settled(context, behind, outcome.held)
            processor._still_failing(batch, self.attempts.since, outcome)
            self._pause(delay)
            return False
        if items:
            processor._handler_succeeded()
        return self._settled(context, behind)

    def _settled(
        self,
        context: LeaseContext,
        behind: list[tuple[dict[str, Any], SetAsideChange]],
        held: dict[str, SetAsideChange] | None = None,
    ) -> bool:
        """The batch handled, or its failing changes set aside: the changes of keys held set
        aside behind their change, the keys held from now kept in the lease (``_order``);
        False when a ``set_aside`` failed (the batch comes again)."""
        for change, holder in behind:
            waiting = FailedBatch(context, [change], 0, HeldBehindError(holder), behind=holder)
            if not self._set_aside(waiting):
                self._pause(self.processor.options.first_retry_delay)
                return False
        if held:
            with self._writing:
                self.lease = _order.holding(self.lease, _order.held(self.lease) | held)
        self.attempts.passed()
        return True

    def _sorted_out(
        self, changes: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], SetAsideChange]]]:
        """``changes`` of a lease that holds keys (``still_set_aside``): those to hand over,
        and those to set aside behind their key's change -- once ``still_set_aside`` was asked
        about each key they have (a key it says is free is held no more)."""
        processor = self.processor
        ask, paths = processor._still_set_aside, processor._paths
        if ask is None or paths is None or _order.HELD not in self.lease.properties:
            return changes, []
        keys = _order.held(self.lease)
        free = [k for k in _order.present(changes, keys, paths) if not self._still(ask, keys[k])]
        for key in free:
            processor._key_released(keys.pop(key))
        if free:
            with self._writing:
                self.lease = _order.holding(self.lease, keys)
        found = _order.sort_out(changes, keys, paths)
        return found.handle, found.behind

    def _still(self, ask: Callable[[SetAsideChange], Any], change: SetAsideChange) -> bool:
        try:
            return bool(ask(change))
        except Exception as exc:
            self.processor._not_asked(change, exc)
            return True

    def _apart(self, batch: FailedBatch) -> Apart:
        """Take a batch that failed its last attempt apart (``_retries.apart``): what it came
        to (``settled`` when every change was handled or set aside)."""
        processor, requested = self.processor, []
        context = batch.context
        if isinstance(context, ManualCheckpointContext):  # written once all is settled
            context = with_checkpoint(context, ManualCheckpointContext, lambda: requested.append(1))
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
                    outcome = self._piece(FailedBatch(context, given, batch.attempt, batch.error))
                elif kind == "set_aside":
                    outcome = self._set_aside(given)
                else:
                    outcome = self._probe(batch)
        except StopIteration as done:
            result: Apart = done.value
        if result.settled and requested and isinstance(batch.context, ManualCheckpointContext):
            batch.context.checkpoint()
        return result

    def _piece(self, part: FailedBatch) -> BaseException | None:
        """Hand a part of a batch taken apart over: what the handler raised, or None."""
        try:
            awaited_nothing(self.processor._handler(part.context, part.changes))
        except Exception as exc:
            if exc is self._lost:
                raise
            self.processor._piece_failed(FailedBatch(part.context, part.changes, part.attempt, exc))
            return exc
        self.processor._handler_succeeded()
        return None

    def _probe(self, batch: FailedBatch) -> list[dict[str, Any]] | None:
        """The lease's changes after ``batch`` (None: they could not be read)."""
        etag = batch.context.continuation
        if etag is None:
            return None
        try:
            return self._read(etag, "Now").items
        except Exception:
            return None

    def _set_aside(self, batch: FailedBatch) -> bool:
        processor = self.processor
        assert processor._set_aside is not None
        try:
            processor._set_aside(batch)
        except Exception as failed:
            processor._set_aside_failed(batch, failed)
            return False
        processor._set_aside_done(batch)
        return True

    def _marked(self) -> Lease:
        """The lease as its next write leaves it: with the instance's stall while its batch
        keeps failing (``_failing``)."""
        return self.processor._marked(self.lease, self.attempts.count > 0)

    # -- checkpoints ------------------------------------------------------------------------------

    def _checkpoint(self, etag: str) -> None:
        with self._writing:
            try:
                self.lease = self._write(self.manager.checkpoint(self._marked(), etag))
                self._heed()
            except LeaseLostError as lost:
                self._lost = lost
                raise
        self.plan.written(etag)

    def _manual_checkpoint(self, batch: int, etag: str | None) -> None:
        """A handler's ``context.checkpoint()`` of batch ``batch``, read up to ``etag``."""
        if etag is not None and self.plan.manual_checkpoint(batch):
            self._checkpoint(etag)

    def _settle(self) -> None:
        """Wait for the checkpoint being written, if any: one that failed (not lost) is written
        again, after a back-off, until it is or the lease is lost (its ``LeaseLostError``
        raises here) -- a lease given back waits for it too; a stop does not (its end tries once
        more)."""
        checkpointing, self._checkpointing = self._checkpointing, None
        if checkpointing is None:
            return
        failures = 0
        while True:
            try:
                if checkpointing is not None:
                    checkpointing.result()
                else:
                    assert self._due is not None
                    self._checkpoint(self._due)  # again, in this thread
                return
            except LeaseLostError:
                raise
            except Exception as exc:
                failures += 1
                token, again_in = self.lease.lease_token, self._retry_delay(failures)
                self.processor._checkpoint_failed(token, exc, again_in)
                if self.processor._stopping.is_set():
                    raise
            checkpointing = None
            self._wake.wait(self._retry_delay(failures))
            if self._lost is not None:
                raise self._lost

    def _retry_delay(self, failures: int) -> float:
        interval = self.processor.options.lease_renew_interval
        return _keeping.write_retry_delay(failures, interval / 8, interval)
