"""What the sync and the aio processor share, written once: the options and the application's
hooks, what an application sees of a processor, the context a handler is given, and each line
a processor says of a lease's life with the hook that tells the application the same. The
shells (``_processor.py``: threads; ``aio/_processor_async.py``: tasks) keep only how they wait,
run and stop; the decisions are the pure core's (``_protocol``, ``_balancing``, ``_reading``).

Every line is logged as its caller's (``stacklevel=2``): a record names the shell's function
that decided, as it did when each shell logged its own lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from cosmos_changefeed._events import Monitor, came_from, error_text, logger, where_it_starts
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import LeaseContext, ProcessorOptions
from cosmos_changefeed._protocol import LeaseLostError, LeaseManager
from cosmos_changefeed._reading import Page, Start


class ProcessorBase:
    """The part of a processor that neither waits nor runs anything."""

    def __init__(self, options: ProcessorOptions, monitor: Monitor) -> None:
        self.options = options
        self._monitor = monitor
        self._manager: LeaseManager | None = None
        self._start: Start | None = None
        self._acquiring: set[str] = set()

    # -- what an application sees ------------------------------------------------------------

    @property
    def processor_name(self) -> str:
        return self.options.processor_name

    @property
    def instance_name(self) -> str:
        return self.options.instance_name

    @property
    def lease_prefix(self) -> str | None:
        """The prefix of this processor's documents in the lease container (once started)."""
        return self._manager.prefix if self._manager is not None else None

    @property
    def start_position(self) -> Start | None:
        """Where a lease without a checkpoint starts (once started): "Beginning", "Now" (at
        its first read: the all-versions-and-deletes mode) or a time."""
        return self._start

    # -- what a handler is given ---------------------------------------------------------------

    def _context(self, lease: Lease, page: Page) -> LeaseContext:
        return LeaseContext(
            lease_token=lease.lease_token,
            feed_range=lease.feed_range.to_feed_range() if lease.feed_range is not None else {},
            processor_name=self.options.processor_name,
            instance_name=self.options.instance_name,
            continuation=page.etag,
            headers=page.headers,
        )

    # -- what a processor says of its leases (and tells the application) -----------------------

    def _started(self, prefix: str, created: int, start: Start) -> None:
        opts = self.options
        logger.info(
            "processor '%s' (instance %s): leases '%s..*'%s; acquire %gs, renew %gs, expiry %gs; "
            "poll %gs; a lease without a checkpoint starts at %s",
            opts.processor_name,
            opts.instance_name,
            prefix,
            f" ({created} created)" if created else "",
            opts.lease_acquire_interval,
            opts.lease_renew_interval,
            opts.lease_expiration_interval,
            opts.poll_delay,
            start if isinstance(start, str) else start.isoformat(),
            stacklevel=2,
        )

    def _listening_now(self, tokens: Iterable[str]) -> None:
        logger.info(
            "processor '%s' (instance %s): listening, lease(s) %s",
            self.processor_name,
            self.instance_name,
            ", ".join(sorted(tokens)) or "none yet",
            stacklevel=2,
        )

    def _balancing_failed(self, exc: Exception) -> None:
        logger.warning(
            "processor '%s': lease balancing failed (%s); again in %gs",
            self.processor_name,
            error_text(exc),
            self.options.lease_acquire_interval,
            stacklevel=2,
        )

    def _not_acquired(self, lease: Lease, exc: Exception) -> None:
        if isinstance(exc, LeaseLostError):
            logger.info(
                "processor '%s': %s not acquired (%s)",
                self.processor_name,
                lease,
                exc,
                stacklevel=2,
            )
            return
        logger.warning(
            "processor '%s': lease %s not acquired (%s)",
            self.processor_name,
            lease.lease_token,
            error_text(exc),
            stacklevel=2,
        )
        self._notify_error(lease.lease_token, exc)

    def _acquired(self, seen: Lease, acquired: Lease, manager: LeaseManager, start: Start) -> None:
        logger.info(
            "processor '%s': lease %s acquired (%s); %s",
            self.processor_name,
            seen.lease_token,
            came_from(seen, self.options.lease_expiration_interval, manager.now()),
            where_it_starts(acquired, start),
            stacklevel=2,
        )
        self._notify(self._monitor.on_lease_acquired, seen.lease_token)

    def _lost(self, token: str, exc: LeaseLostError) -> None:
        logger.info(
            "processor '%s': lease %s lost (%s); its processing stopped, the new owner "
            "reads again from its last checkpoint",
            self.processor_name,
            token,
            exc,
            stacklevel=2,
        )
        self._notify(self._monitor.on_lease_released, token)

    def _processing_failed(self, token: str, exc: Exception) -> None:
        logger.error(
            "processor '%s': lease %s processing failed (%s)",
            self.processor_name,
            token,
            error_text(exc),
            stacklevel=2,
        )
        self._notify_error(token, exc)

    def _released(self, lease: Lease, failure: Exception | None) -> None:
        """The end of a release: done (``failure`` None, or another instance took the lease
        meanwhile: a LeaseLostError, theirs), or not done (the lease expires)."""
        if isinstance(failure, LeaseLostError):
            failure = None
        if failure is not None:
            logger.warning(
                "processor '%s': lease %s not released (%s); it expires after %gs",
                self.processor_name,
                lease.lease_token,
                error_text(failure),
                self.options.lease_expiration_interval,
                stacklevel=2,
            )
            return
        logger.info(
            "processor '%s': lease %s released",
            self.processor_name,
            lease.lease_token,
            stacklevel=2,
        )
        self._notify(self._monitor.on_lease_released, lease.lease_token)

    def _not_replaced(self, lease: Lease, exc: Exception) -> bool:
        """Why a gone lease was not replaced: lost to its owner (False: nothing to do), or a
        failure (True: the caller releases it, for the next instance that reads it)."""
        if isinstance(exc, LeaseLostError):
            logger.info(
                "processor '%s': lease %s lost before its split (%s); its owner replaces it",
                self.processor_name,
                lease.lease_token,
                exc,
                stacklevel=2,
            )
            return False
        logger.error(
            "processor '%s': lease %s: its range is gone but the lease could not be "
            "replaced (%s); released, for the next instance that reads it",
            self.processor_name,
            lease.lease_token,
            error_text(exc),
            stacklevel=2,
        )
        self._notify_error(lease.lease_token, exc)
        return True

    def _split(self, lease: Lease, created: Sequence[Lease], last_continuation: str | None) -> None:
        logger.info(
            "processor '%s': lease %s split into %s; each starts where the lease was (%s)",
            self.processor_name,
            lease.lease_token,
            ", ".join(child.lease_token for child in created) or "leases another instance made",
            "its continuation" if last_continuation else "no continuation yet",
            stacklevel=2,
        )
        self._notify(self._monitor.on_lease_released, lease.lease_token)

    def _not_released_in(self, count: int, seconds: float) -> None:
        logger.warning(
            "processor '%s': %d lease(s) not released in %gs; they expire after %gs",
            self.processor_name,
            count,
            seconds,
            self.options.lease_expiration_interval,
            stacklevel=2,
        )

    def _renewal_failed(self, token: str, exc: Exception) -> None:
        self._again(token, "renewal", exc, self.options.lease_renew_interval)

    def _read_failed(self, token: str, exc: Exception) -> None:
        self._again(token, "change feed read", exc, self.options.poll_delay)

    def _again(self, token: str, what: str, exc: Exception, seconds: float) -> None:
        logger.warning(
            "processor '%s': lease %s %s failed (%s); again in %gs",
            self.processor_name,
            token,
            what,
            error_text(exc),
            seconds,
            stacklevel=3,
        )

    def _handler_failed(self, token: str, changes: int, exc: Exception) -> None:
        logger.error(
            "processor '%s': lease %s: the handler failed on a batch of %d (%s); "
            "the batch is given again in %gs",
            self.processor_name,
            token,
            changes,
            error_text(exc),
            self.options.poll_delay,
            stacklevel=2,
        )
        self._notify_error(token, exc)

    def _no_etag(self, token: str) -> None:
        logger.error(
            "processor '%s': lease %s: the response had no etag to checkpoint",
            self.processor_name,
            token,
            stacklevel=2,
        )

    def _notify(self, hook: Callable[[str], object] | None, token: str) -> None:
        if hook is None:
            return
        try:
            hook(token)
        except Exception:
            logger.exception("processor '%s': a lease notification failed", self.processor_name)

    def _notify_error(self, token: str, exc: BaseException) -> None:
        hook = self._monitor.on_error
        if hook is None:
            return
        try:
            hook(token, exc)
        except Exception:
            logger.exception("processor '%s': an error notification failed", self.processor_name)
