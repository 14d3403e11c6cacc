"""The handler's health across an instance's leases: what tells an outage from a poison, and
when the instance is stalled. Pure (a lock: the sync processor's lease threads share it).

* Every handler call is counted: one that returned (a batch, a part of one taken apart, a probe)
  is a **success**, at a time; one that raised is a failure.
* **Evidence** that the handler works (``succeeded_since``): a success since a given moment -- the
  moment a failing batch first failed. A change that fails alone while the handler succeeds on
  others (of its batch, of its lease, of the instance's other leases) is a poison; one that fails
  alone while nothing succeeds is an outage (``_retries``).
* **Stalled** (``stall``): every handler call on the instance has failed since a time T, and a
  batch has failed the attempts after which a batch would be set aside (``set_aside_after``,
  default 5: over a minute with the default back-off): the instance says so once -- a WARNING,
  ``stalled_since`` (the processor's, and each failing lease's property that the estimator
  reads) -- and once more when a call succeeds again.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

from cosmos_changefeed import _clock

#: The lease property a stalled instance writes into each lease whose batch keeps failing
#: (the time the stall began, ISO 8601, UTC): what the estimator reports as ``stalled_since``.
STALLED_SINCE = "stalledSince"


class HandlerHealth:
    """One instance's handler calls, across its leases (see the module)."""

    def __init__(
        self,
        monotonic: Callable[[], float] = _clock.monotonic,
        wall: Callable[[], dt.datetime] = _clock.now,
    ) -> None:
        self._monotonic, self._wall = monotonic, wall
        self._lock = threading.Lock()
        self._last_success: float | None = None
        #: When the calls began to fail, all of them (None: the last one succeeded).
        self._failing_since: tuple[float, dt.datetime] | None = None
        self._stalled_since: dt.datetime | None = None

    @property
    def stalled_since(self) -> dt.datetime | None:
        """When the instance's stall began (None: not stalled)."""
        return self._stalled_since

    def succeeded(self) -> dt.datetime | None:
        """A handler call returned; the start of the stall it ends, if it ends one."""
        with self._lock:
            self._last_success = self._monotonic()
            self._failing_since = None
            ended, self._stalled_since = self._stalled_since, None
            return ended

    def failed(self) -> None:
        """A handler call raised."""
        with self._lock:
            if self._failing_since is None:
                self._failing_since = (self._monotonic(), self._wall())

    def succeeded_since(self, moment: float) -> bool:
        """Whether a handler call succeeded at or after ``moment`` (``_clock.monotonic``)."""
        last = self._last_success
        return last is not None and last >= moment

    def stall(self, failing_since: float) -> dt.datetime | None:
        """A batch that first failed at ``failing_since`` failed as many times as it takes: if
        every call has failed since before then, the instance is stalled since the first of
        them -- that time, when the stall is new (None: not stalled, or said already)."""
        with self._lock:
            if self._failing_since is None or self._stalled_since is not None:
                return None
            if self._failing_since[0] > failing_since:  # a call succeeded meanwhile
                return None
            self._stalled_since = self._failing_since[1]
            return self._stalled_since
