"""The leases an instance owns, each processed on its own: acquired, renewed, read, delivered,
checkpointed, released; stopped when another instance takes it.

Follows Azure/azure-cosmos-dotnet-v3 (3.41), ``ChangeFeedProcessor/``:

* ``FeedManagement/PartitionControllerCore``: ``AddOrUpdateLeaseAsync`` acquires a lease and
  starts its supervisor (a lease it already processes is left as it is); when the supervisor
  ends, for whatever reason, the lease is released (``RemoveLeaseAsync``: a lease another
  instance took stays theirs); ``ShutdownAsync`` stops every supervisor (so releases every
  lease: a clean stop hands the leases over at once, where a killed instance's wait for their
  expiry).
* ``FeedManagement/PartitionSupervisorCore``: the processor and the renewer run together; the
  first to end ends the other.
* ``FeedManagement/LeaseRenewerCore``: the first renewal after half the renew interval, then
  one per renew interval; a lost lease ends it (``LeaseLostException``), any other failure is
  logged and the next renewal tried.
* ``FeedProcessing/FeedProcessorCore`` with ``Observers/AutoCheckpointer``: read a page from the
  lease's continuation (or, without one, from the start options), hand the changes over, then
  checkpoint; pages follow one another while full, then the poll delay; the continuation of a
  page with nothing new is kept in memory only, so a lease that never saw a change starts
  again from its start option when it is next acquired (the "now" start re-anchors at each
  start, as in Azure). A checkpoint refused (another owner) ends the processing of that lease:
  what was delivered and not checkpointed is read again by the new owner (at least once).
  A read that finds the lease's physical partition split (the .NET processor's 410 / 1002,
  ``HandleFailedRequest``; see ``continuation`` for how the Python SDK shows it) ends
  the lease's processing with ``FeedRangeGoneError`` and the last continuation read.
* ``PartitionControllerCore.HandlePartitionGoneAsync``: on ``FeedRangeGoneError`` the lease is
  replaced by child leases (``lease_split``), which this instance then acquires and
  processes as any lease it takes (the balancers spread them later); the parent is deleted,
  not released.

The Cosmos DB extension's part (``CosmosDBTriggerListener.ProcessChangesAsync``): the delivery
is an invocation of the function; a stop cancels it and its batch is not checkpointed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from azure.cosmos.exceptions import CosmosHttpResponseError

from funcstack.functions_host._cosmos_trigger.lease_store import Lease, LeaseLostError, LeaseStore

logger = logging.getLogger("funcstack.functions_host.cosmos")


@dataclass(frozen=True)
class Page:
    """One read of a lease's range."""

    items: list[dict[str, Any]]
    #: Where the next read starts (None: the read gave none).
    continuation: str | None
    #: The lease's range spans several physical partitions now: its partition split.
    split: bool = False


#: ``(lease, position) -> page``: one page of the lease's range, from ``position`` (a
#: continuation) or, when None, from the start options.
ReadPage = Callable[[Lease, str | None], Awaitable[Page]]
#: Hand a page over (the function's invocation, with its retry policy); returns once the
#: page may be checkpointed.
Deliver = Callable[[Lease, list[dict[str, Any]]], Awaitable[None]]
#: ``(lease, last continuation) -> children``: replace a lease whose partition split by its
#: child leases (``PartitionSynchronizer.handle_partition_gone``; None: not split, the lease
#: stays); ``LeaseLostError`` when the lease is no longer this instance's to split.
Split = Callable[[Lease, str | None], Awaitable[list[Lease] | None]]


class FeedRangeGoneError(Exception):
    """The processor's ``FeedRangeGoneException``: the lease's physical partition split;
    ``continuation`` is the last one read (where its children start)."""

    def __init__(self, token: str, continuation: str | None) -> None:
        super().__init__(f"lease {token}: its physical partition split")
        self.continuation = continuation


@dataclass(frozen=True)
class ProcessingOptions:
    renew_interval: float
    expiration: float
    feed_poll_delay: float
    max_items: int
    #: How a lease without a checkpoint starts ("Beginning", "Now", or a time), for the log.
    start: str


class PartitionController:
    """The leases this instance processes, by lease token."""

    def __init__(
        self,
        store: LeaseStore,
        options: ProcessingOptions,
        *,
        read_page: ReadPage,
        deliver: Deliver,
        split: Split,
        name: str,
    ) -> None:
        self._store = store
        self._options = options
        self._read_page = read_page
        self._deliver = deliver
        self._split = split
        self._name = name
        self._owned: dict[str, asyncio.Task[None]] = {}
        #: Tokens being acquired now (``currentlyOwnedPartitions.TryAdd`` comes first there
        #: too): the balancer and a split may both want a new child.
        self._acquiring: set[str] = set()
        self._closing = False

    @property
    def owned(self) -> list[str]:
        """The tokens of the leases processed now."""
        return sorted(self._owned)

    async def add(self, lease: Lease) -> None:
        """Acquire ``lease`` and process it (``AddOrUpdateLeaseAsync``)."""
        if self._closing or lease.token in self._owned or lease.token in self._acquiring:
            return
        previous = lease.owner
        self._acquiring.add(lease.token)
        try:
            acquired = await self._store.acquire(lease)
        finally:
            self._acquiring.discard(lease.token)
        if previous is None:
            came = "unowned"
        elif lease.expired(self._options.expiration):
            came = f"expired, was {previous}'s"
        else:
            came = f"stolen from {previous}"
        start = (
            "resumed from its lease"
            if acquired.continuation
            else f"no checkpoint: starts at {self._options.start}"
        )
        logger.info(
            "cosmos trigger %s: lease %s acquired (%s); %s", self._name, acquired.token, came, start
        )
        self._owned[acquired.token] = asyncio.create_task(
            self._process(acquired), name=f"lease-{acquired.token}"
        )

    async def shutdown(self) -> None:
        """Stop processing every lease and release them (``ShutdownAsync``); a second at most
        (a stack stops each part within 1.5 s): a lease not released by then is left to
        expire."""
        self._closing = True  # a split under way takes no child from now on
        tasks = list(self._owned.values())
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=1.0)
            if pending:
                logger.info(
                    "cosmos trigger %s: %d lease(s) not released in time; they expire after %gs",
                    self._name,
                    len(pending),
                    self._options.expiration,
                )
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending, timeout=0.2)
        self._owned.clear()

    async def _process(self, lease: Lease) -> None:
        supervisor = LeaseSupervisor(
            self._store, lease, self._options, read_page=self._read_page, deliver=self._deliver
        )
        lost = False
        try:
            await supervisor.run()
        except FeedRangeGoneError as gone:
            lost = await self._handle_partition_gone(supervisor.lease, gone.continuation)
        except LeaseLostError as exc:
            lost = True
            logger.info(
                "cosmos trigger %s: lease %s lost (%s); its processing stopped, the new "
                "owner reads again from its last checkpoint",
                self._name,
                lease.token,
                exc,
            )
        except asyncio.CancelledError:
            await self._release(supervisor.lease)
            raise
        except Exception:
            logger.exception(
                "cosmos trigger %s: lease %s processing failed", self._name, lease.token
            )
        finally:
            if self._owned.get(lease.token) is asyncio.current_task():
                del self._owned[lease.token]
        if not lost:
            await self._release(supervisor.lease)

    async def _handle_partition_gone(self, lease: Lease, continuation: str | None) -> bool:
        """Replace ``lease`` by its children and take them (``HandlePartitionGoneAsync``);
        True when the parent is gone (or another instance's): nothing to release."""
        try:
            children = await self._split(lease, continuation)
        except LeaseLostError as exc:
            logger.info(
                "cosmos trigger %s: lease %s lost before its split (%s); its owner splits it",
                self._name,
                lease.token,
                exc,
            )
            return True
        except Exception as exc:
            logger.error(
                "cosmos trigger %s: lease %s: its partition split, but the lease could "
                "not be replaced by its children (%s: %s); released, to be split by "
                "the next instance that reads it",
                self._name,
                lease.token,
                type(exc).__name__,
                exc,
            )
            return False
        if children is None:  # one partition still holds it ("redirected"): released, as there
            return False
        for child in children:
            try:
                await self.add(child)
            except LeaseLostError as exc:  # another instance took it first
                logger.info(
                    "cosmos trigger %s: lease %s not acquired (%s)", self._name, child.token, exc
                )
            except Exception as exc:  # unowned: the next balancing takes it
                logger.warning(
                    "cosmos trigger %s: lease %s not acquired (%s: %s)",
                    self._name,
                    child.token,
                    type(exc).__name__,
                    exc,
                )
        return True

    async def _release(self, lease: Lease) -> None:
        try:
            await self._store.release(lease)
            logger.info("cosmos trigger %s: lease %s released", self._name, lease.token)
        except LeaseLostError:
            pass  # taken by another instance meanwhile: theirs
        except Exception as exc:
            logger.warning(
                "cosmos trigger %s: lease %s not released (%s)", self._name, lease.token, exc
            )


class LeaseSupervisor:
    """One lease: its renewer and its feed processor (``PartitionSupervisorCore``)."""

    def __init__(
        self,
        store: LeaseStore,
        lease: Lease,
        options: ProcessingOptions,
        *,
        read_page: ReadPage,
        deliver: Deliver,
    ) -> None:
        self._store = store
        #: The lease as last written by this instance (renewals and checkpoints update it).
        self.lease = lease
        self._options = options
        self._read_page = read_page
        self._deliver = deliver
        self._lost = asyncio.Event()
        self._writing = asyncio.Lock()

    async def run(self) -> None:
        renewer = asyncio.create_task(self._renew(), name=f"renew-{self.lease.token}")
        processor = asyncio.create_task(self._feed(), name=f"feed-{self.lease.token}")
        try:
            done, _ = await asyncio.wait({renewer, processor}, return_when=asyncio.FIRST_EXCEPTION)
            if renewer in done and (lost := renewer.exception()) is not None:
                # lost on renewal: the processor stops before its next page, and a checkpoint
                # of the batch it may be delivering is refused
                self._lost.set()
                with contextlib.suppress(LeaseLostError):
                    await processor
                raise lost  # its cause (taken over by whom, or gone), not the processor's echo
            for task in (processor, renewer):
                if task.done() and not task.cancelled() and (error := task.exception()):
                    raise error
        finally:
            for task in (renewer, processor):
                task.cancel()
            for task in (renewer, processor):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _renew(self) -> None:
        await asyncio.sleep(self._options.renew_interval / 2)
        while True:
            try:
                async with self._writing:
                    self.lease = await self._store.renew(self.lease)
            except LeaseLostError:
                raise
            except Exception as exc:
                logger.warning(
                    "lease %s: renewal failed (%s); trying again in %.1fs",
                    self.lease.token,
                    exc,
                    self._options.renew_interval,
                )
            await asyncio.sleep(self._options.renew_interval)

    async def _feed(self) -> None:
        position = self.lease.continuation
        first = position is None
        while True:
            if self._lost.is_set():
                raise LeaseLostError(self.lease.token, "lost on renewal")
            try:
                page = await self._read_page(self.lease, position)
                if first:
                    first = False
                    logger.info(
                        "lease %s: read from %s (no checkpoint)",
                        self.lease.token,
                        self._options.start,
                    )
            except CosmosHttpResponseError as exc:
                logger.warning(
                    "lease %s: change feed read failed (status %s)",
                    self.lease.token,
                    exc.status_code,
                )
                await self._pause()
                continue
            except Exception as exc:  # the endpoint unreachable for a while: try again
                logger.warning(
                    "lease %s: change feed read failed (%s: %s)",
                    self.lease.token,
                    type(exc).__name__,
                    str(exc).splitlines()[0][:200] if str(exc) else "",
                )
                await self._pause()
                continue
            items, token = page.items, page.continuation
            if items:
                await self._deliver(self.lease, items)
                if token is None:
                    logger.error("lease %s: no continuation token to checkpoint", self.lease.token)
                else:
                    async with self._writing:
                        self.lease = await self._store.checkpoint(self.lease, token)
                    position = token
            elif token:
                position = token  # nothing new: the position moves in memory, not in the lease
            if page.split:
                raise FeedRangeGoneError(self.lease.token, position)
            if len(items) >= self._options.max_items:
                continue
            await self._pause()

    async def _pause(self) -> None:
        """The poll delay, cut short when the lease is lost."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._lost.wait(), self._options.feed_poll_delay)
