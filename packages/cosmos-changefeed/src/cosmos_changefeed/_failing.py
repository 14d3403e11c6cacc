"""What a processor decides and says of a batch its handler fails on, written once for both
processors (``ProcessorBase`` is one): the poison policy's words and hooks (``_retries`` decides
the retries and the verdict, ``_health`` keeps the handler's calls across the leases), an
outage said and the instance's stall declared, the keys held past a change set aside
(``_order``), and the application's hooks told. Every line is logged as its caller's
(``stacklevel=2``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cosmos_changefeed._events import Monitor, error_text, logger
from cosmos_changefeed._health import STALLED_SINCE, HandlerHealth
from cosmos_changefeed._leases import Lease, format_time
from cosmos_changefeed._options import (
    DEFAULT_SET_ASIDE_AFTER,
    During,
    FailedBatch,
    Failure,
    ProcessorOptions,
)
from cosmos_changefeed._order import SetAsideChange
from cosmos_changefeed._retries import Apart, retry_delay, to_set_aside


class FailingBatches:
    """The part of a processor that handles a failing batch's words and hooks."""

    options: ProcessorOptions
    _monitor: Monitor
    _health: HandlerHealth
    _set_aside: Callable[[FailedBatch], Any] | None
    _still_set_aside: Callable[[SetAsideChange], Any] | None
    _set_aside_count: int

    def _handler_failed(self, batch: FailedBatch) -> float:
        """Say that the handler failed on ``batch``; the wait before it is given again."""
        opts = self.options
        delay = retry_delay(batch.attempt, opts.first_retry_delay, opts.max_retry_delay)
        logger.error(
            "processor '%s': lease %s: the handler failed on a batch of %d (attempt %d: %s); "
            "the batch is given again in %gs",
            self.options.processor_name,
            batch.context.lease_token,
            len(batch.changes),
            batch.attempt,
            error_text(batch.error),
            delay,
            stacklevel=2,
            extra=_batch_fields(batch),
        )
        self._health.failed()
        self._notify_error(batch.context.lease_token, batch.error, "handler", batch)
        return delay

    def _handler_succeeded(self) -> None:
        """A handler call returned (a batch, a part of one, a probe): a stall ends."""
        ended = self._health.succeeded()
        if ended is not None:
            logger.warning(
                "processor '%s' (instance %s): no longer stalled: the handler succeeded again "
                "(it failed on every change from %s)",
                self.options.processor_name,
                self.options.instance_name,
                format_time(ended),
                stacklevel=2,
            )

    def _still_failing(
        self, batch: FailedBatch, failing_since: float, outcome: Apart | None = None
    ) -> None:
        """A batch that first failed at ``failing_since`` failed again and is given again: an
        outage said (``outcome``: it was taken apart and nothing succeeded), and the instance's
        stall declared once it failed the attempts after which it would have been set aside
        while nothing succeeded (``_health``)."""
        token = batch.context.lease_token
        if outcome is not None and outcome.outage:
            logger.warning(
                "processor '%s': lease %s: every change of the batch of %d failed alone and "
                "the handler succeeded nowhere else since it first failed: an outage, not a "
                "poison; nothing set aside, the batch is given again",
                self.options.processor_name,
                token,
                len(batch.changes),
                stacklevel=2,
                extra=_batch_fields(batch),
            )
        if batch.attempt < (self.options.set_aside_after or DEFAULT_SET_ASIDE_AFTER):
            return
        since = self._health.stall(failing_since)
        if since is not None:
            logger.warning(
                "processor '%s' (instance %s): stalled: the handler fails on every change since "
                "%s (lease %s: attempt %d); the leases are kept and their batches given again "
                "(every %gs at most), nothing is set aside",
                self.options.processor_name,
                self.options.instance_name,
                format_time(since),
                token,
                batch.attempt,
                self.options.max_retry_delay,
                stacklevel=2,
                extra=_batch_fields(batch) | {"stalled_since": format_time(since)},
            )

    def _marked(self, lease: Lease, failing: bool) -> Lease:
        """``lease`` with the stall's property (``STALLED_SINCE``) as it is now: the stall's
        start on a lease whose batch keeps failing (``failing``) while the instance is
        stalled, none otherwise -- written with the lease's next renewal or checkpoint, for the
        estimator."""
        since = self._health.stalled_since if failing else None
        value = format_time(since) if since is not None else None
        if lease.properties.get(STALLED_SINCE) == value:
            return lease
        properties = {k: v for k, v in lease.properties.items() if k != STALLED_SINCE}
        if value is not None:
            properties[STALLED_SINCE] = value
        return lease.evolve(properties=properties)

    def _checked_paths(self, paths: list[str] | None) -> list[str] | None:
        """The monitored container's partition key paths, which ``still_set_aside`` needs (its
        feed source says them once started: ``FeedSource.partition_key_paths``)."""
        if self._still_set_aside is not None and not paths:
            raise ValueError(
                "still_set_aside: the monitored container's feed source does not say its "
                "partition key paths (FeedSource.partition_key_paths returned None), so a "
                "change's key cannot be held; give the processor a container, or a source "
                "that says them"
            )
        return paths

    def _key_released(self, change: SetAsideChange) -> None:
        logger.info(
            "processor '%s': lease %s: partition key %s no longer held: its change %r set aside "
            "is not (replayed or dropped); its next changes are handled",
            self.options.processor_name,
            change.lease_token,
            change.partition_key,
            change.id,
            stacklevel=2,
        )

    def _not_asked(self, change: SetAsideChange, exc: Exception) -> None:
        """``still_set_aside`` raised: the key stays held."""
        logger.error(
            "processor '%s': lease %s: still_set_aside failed on change %r (%s); its partition "
            "key stays held",
            self.options.processor_name,
            change.lease_token,
            change.id,
            error_text(exc),
            stacklevel=2,
        )
        self._notify_error(change.lease_token, exc, "set_aside")

    def _taking_apart(self, batch: FailedBatch) -> None:
        logger.warning(
            "processor '%s': lease %s: a batch of %d failed its attempt %d: its changes are "
            "given to the handler again in halves, and only those that fail alone are set aside",
            self.options.processor_name,
            batch.context.lease_token,
            len(batch.changes),
            batch.attempt,
            stacklevel=2,
            extra=_batch_fields(batch),
        )

    def _piece_failed(self, batch: FailedBatch) -> None:
        """A part of a batch taken apart failed (``on_error`` is told, with that part)."""
        logger.info(
            "processor '%s': lease %s: %d change(s) of the batch taken apart failed (%s)",
            self.options.processor_name,
            batch.context.lease_token,
            len(batch.changes),
            error_text(batch.error),
            stacklevel=2,
            extra=_batch_fields(batch),
        )
        self._health.failed()
        self._notify_error(batch.context.lease_token, batch.error, "handler", batch)

    def _to_set_aside(self, batch: FailedBatch) -> bool:
        """Whether ``batch`` goes to ``set_aside`` now."""
        if self._set_aside is None or batch.context.continuation is None:
            return False
        return to_set_aside(batch.attempt, self.options.set_aside_after, batch.error)

    def _set_aside_done(self, batch: FailedBatch) -> None:
        self._set_aside_count += 1
        if batch.behind is not None:
            logger.warning(
                "processor '%s': lease %s: a change of partition key %s set aside behind change "
                "%r, which is set aside",
                self.options.processor_name,
                batch.context.lease_token,
                batch.behind.partition_key,
                batch.behind.id,
                stacklevel=2,
                extra=_batch_fields(batch),
            )
            return
        logger.warning(
            "processor '%s': lease %s: a batch of %d set aside after %d attempt(s) (%s); the "
            "application's set_aside took it; the lease moves past it, checkpointed as any "
            "handled batch (%s)",
            self.options.processor_name,
            batch.context.lease_token,
            len(batch.changes),
            batch.attempt,
            error_text(batch.error),
            batch.context.continuation,
            stacklevel=2,
            extra=_batch_fields(batch),
        )

    def _set_aside_failed(self, batch: FailedBatch, exc: Exception) -> None:
        logger.error(
            "processor '%s': lease %s: set_aside failed on a batch of %d (%s); it is not "
            "checkpointed, and is given to the handler again",
            self.options.processor_name,
            batch.context.lease_token,
            len(batch.changes),
            error_text(exc),
            stacklevel=2,
            extra=_batch_fields(batch),
        )
        self._notify_error(batch.context.lease_token, exc, "set_aside", batch)

    def _notify(self, hook: Callable[[str], object] | None, token: str) -> None:
        if hook is None:
            return
        try:
            hook(token)
        except Exception:
            logger.exception(
                "processor '%s': a lease notification failed", self.options.processor_name
            )

    def _notify_error(
        self, token: str, exc: BaseException, during: During, batch: FailedBatch | None = None
    ) -> None:
        hook = self._monitor.on_error
        if hook is None:
            return
        try:
            hook(Failure(token, exc, during, batch))
        except Exception:
            logger.exception(
                "processor '%s': an error notification failed", self.options.processor_name
            )


def _batch_fields(batch: FailedBatch) -> dict[str, Any]:
    """A failing batch's structured fields on its log records (``extra``)."""
    return {
        "lease_token": batch.context.lease_token,
        "attempt": batch.attempt,
        "changes": len(batch.changes),
        "continuation": batch.context.continuation,
    }
