"""What a processor says of the moves of its leases -- a request for one, a hand-over, a lease
given back -- and of a start that waits through 429s: a part of ``ProcessorBase``
(``_processing``), which the two processors share.

Every line is logged as its caller's (``stacklevel``), as ``_processing``'s are.
"""

from __future__ import annotations

from cosmos_changefeed import _handover
from cosmos_changefeed._balancing import Outcome
from cosmos_changefeed._events import error_text, logger
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import ProcessorOptions
from cosmos_changefeed._protocol import LeaseLostError, LeaseManager
from cosmos_changefeed._starting import start_wait


class MovesLog:
    """The lines of the moves (a mixin: ``ProcessorBase`` gives it its options and manager)."""

    options: ProcessorOptions
    _manager: LeaseManager | None

    def _not_acquired(self, lease: Lease, exc: Exception) -> None:
        """Say that a lease was not acquired (``ProcessorBase``'s)."""

    def _start_patience(self, error: Exception, failures: int) -> float | None:
        """A start's operation failed: the wait before it is done again (a 429: said), or None
        (``_starting.start_wait``)."""
        wait = start_wait(error, failures)
        if wait is not None:
            logger.warning(
                "processor '%s' (instance %s): starting: the lease container throttles (%s, "
                "past azure-cosmos's own retries); waiting %gs and trying again (attempt %d) -- "
                "a start waits for as long as it takes",
                self.options.processor_name,
                self.options.instance_name,
                error_text(error),
                wait,
                failures + 1,
                stacklevel=2,
            )
        return wait

    def _requested(self, lease: Lease) -> None:
        logger.info(
            "processor '%s' (instance %s): lease %s asked of %s (this instance holds none and "
            "is under its fair share): its owner hands it over once its batch in flight is "
            "handled and checkpointed",
            self.options.processor_name,
            self.options.instance_name,
            lease.lease_token,
            lease.owner,
            stacklevel=2,
        )

    def _request_failed(self, lease: Lease, exc: Exception) -> Outcome:
        """A request that failed: said as an acquisition that failed; its outcome."""
        self._not_acquired(lease, exc)
        return "lost" if isinstance(exc, LeaseLostError) else "failed"

    def _asker(self, lease: Lease) -> str | None:
        """The instance that asked for ``lease``, which this instance owns (``_handover``)."""
        opts = self.options
        manager = self._manager
        if manager is None or not manager.hands_over:
            return None
        expiration = opts.lease_expiration_interval
        return _handover.asked_by(lease, opts.instance_name, manager.now(), expiration)

    def _hand_over_asked(self, lease: Lease) -> bool:
        """Whether another instance asked for ``lease`` (seen as it was just written): it is
        then handed over -- said here."""
        if self._asker(lease) is None:
            return False
        self._giving_back(lease, stacklevel=3)
        return True

    def _giving_back(self, lease: Lease, stacklevel: int = 2) -> None:
        asker = self._asker(lease)
        if asker is not None:
            logger.info(
                "processor '%s' (instance %s): lease %s asked for by %s (under its fair share):"
                " handed over once its batch in flight is handled and checkpointed",
                self.options.processor_name,
                self.options.instance_name,
                lease.lease_token,
                asker,
                stacklevel=stacklevel,
            )
            return
        logger.info(
            "processor '%s' (instance %s): lease %s given back: this instance holds more than "
            "its fair share, another holds less; released once its batch in flight is done",
            self.options.processor_name,
            self.options.instance_name,
            lease.lease_token,
            stacklevel=stacklevel,
        )
