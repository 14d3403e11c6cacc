"""When a lease is checkpointed, decided once for both processors. Pure.

* **Per batch** (the default, ``CheckpointPolicy()``): after each batch the handler returned
  from, as .NET's ``AutoCheckpointer``: after a crash the next owner is given again at most the
  batch in flight.
* **Every N batches or T seconds** (``CheckpointPolicy(batches=N, seconds=T)``, whichever comes
  first, counted from the lease's last checkpoint; as .NET's V2 library's ``CheckpointFrequency``):
  fewer lease writes -- against a local or CPU-bound endpoint a checkpoint costs as much as the
  read it follows -- for a larger resend bound. After a crash the next owner is given again the
  batches handled since the last checkpoint -- fewer than N, none handled more than T seconds
  before it (a read that finds the lease caught up checkpoints what is due by time, so an idle
  lease is checkpointed within T plus a poll delay) -- and the batch in flight. A stop, and a
  lease replaced by its children after a split, lose nothing: the stop checkpoints what was
  handled before it releases the lease, the children start where the parent was read to.
* **Manual** (``checkpoint="manual"``, .NET's
  ``GetChangeFeedProcessorBuilderWithManualCheckpoint``): the handler's context has
  ``checkpoint()`` (awaited in aio), which stores that batch's position; nothing else
  checkpoints the lease -- a stop releases it as it is, and the next owner is given again
  every batch since the handler's last ``checkpoint()``. A context's ``checkpoint()`` called
  after a later batch's was is a no-op (a lease never moves back).

**At most one checkpoint per lease per interval** (``checkpoint_interval=T``, beside a policy):
the cost bound, where the policy is the resend bound. A checkpoint the policy asks for less than
T seconds after the lease's last one waits (the position is kept as pending) until T has passed
-- at the next batch handled, or the next read that finds the lease caught up (so an idle lease
is checkpointed within T plus a poll delay); the lease's first checkpoint is written at once. A
busy lease is then written once per T (its renewals need no write: a checkpoint stamps it),
whatever its pages cost: against a local endpoint a checkpoint per page of 1,000 costs about
half the page's read. The last position handled is always written when the lease is released
(a stop, a lease given back to balance the leases); a crash gives again to the lease's next owner
what followed its last written checkpoint: the batches of at most T seconds, and the batch in
flight. A split loses nothing either way (the children start where the parent was read to).
Manual checkpoints take no interval.

``CheckpointPlan`` is one lease's count; the shells ask it after each batch handled
(``handled``) and each read that found nothing new (``caught_up``), and write what it returns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from cosmos_changefeed import _clock


@dataclass(frozen=True)
class CheckpointPolicy:
    """Checkpoint a lease after ``batches`` handled batches or ``seconds`` since its last
    checkpoint, whichever comes first (None: no time bound). The default: every batch."""

    batches: int = 1
    seconds: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.batches, bool) or not isinstance(self.batches, int):
            raise TypeError(f"CheckpointPolicy: batches is a whole number, not {self.batches!r}")
        if self.batches < 1:
            raise ValueError(f"CheckpointPolicy: batches must be 1 or more, not {self.batches}")
        if self.seconds is not None and (
            isinstance(self.seconds, bool)
            or not isinstance(self.seconds, int | float)
            or not math.isfinite(self.seconds)
            or self.seconds <= 0
        ):
            raise ValueError(
                f"CheckpointPolicy: seconds is a number of seconds > 0, or None, not "
                f"{self.seconds!r}"
            )


#: The default: a checkpoint after each batch.
PER_BATCH = CheckpointPolicy()
#: The ``checkpoint`` option: a policy, or "manual" (the handler's ``context.checkpoint()``).
Checkpointing: TypeAlias = CheckpointPolicy | Literal["manual"]
MANUAL = "manual"


def check_checkpointing(value: object, interval: object = None) -> None:
    """Refuse a ``checkpoint`` option that is neither a ``CheckpointPolicy`` nor "manual", and
    a ``checkpoint_interval`` that is not a number of seconds > 0 (or None), or beside
    "manual"."""
    if not (isinstance(value, CheckpointPolicy) or value == MANUAL):
        raise TypeError(
            f"checkpoint: a CheckpointPolicy(batches=..., seconds=...) or 'manual', not {value!r}"
        )
    if interval is None:
        return
    if isinstance(interval, bool) or not isinstance(interval, int | float):
        raise TypeError(f"checkpoint_interval is a number of seconds, not {interval!r}")
    if not math.isfinite(interval) or interval <= 0:
        raise ValueError(
            f"checkpoint_interval must be a finite number of seconds > 0 (or None: no bound), "
            f"not {interval!r}"
        )
    if value == MANUAL:
        raise ValueError(
            "checkpoint_interval is given with checkpoint='manual': only the handler "
            "checkpoints then; bound its checkpoints in the handler, or leave one of the two out"
        )


@dataclass
class CheckpointPlan:
    """One lease's checkpoints under ``checkpointing`` (see the module). Not thread-safe: the
    lease's own feed loop asks it (the handler's ``checkpoint()`` runs in that loop too)."""

    checkpointing: Checkpointing
    clock: Callable[[], float] = _clock.monotonic
    #: At most one checkpoint per this many seconds (None: as the policy asks).
    interval: float | None = None
    #: The position handled and not yet checkpointed (None: nothing is).
    pending: str | None = None
    #: The last position handled, and the last one written (``written``).
    last: str | None = None
    stored: str | None = None
    _count: int = 0
    _since: float = field(default=0.0)
    #: The number of the last batch whose position was checkpointed (manual: a context's).
    _written: int = 0
    _batches: int = 0
    #: When the last checkpoint was taken (None: none yet), for ``interval``.
    _taken_at: float | None = None

    def __post_init__(self) -> None:
        self._since = self.clock()

    @property
    def manual(self) -> bool:
        return self.checkpointing == MANUAL

    def handed(self) -> int:
        """A batch is given to the handler: its number (what a manual context checkpoints)."""
        self._batches += 1
        return self._batches

    def handled(self, etag: str) -> str | None:
        """The batch read up to ``etag`` was handled: the position to checkpoint now, or None
        (kept as ``pending``; always None when manual)."""
        if self.manual:
            return None
        self._count += 1
        self.pending = self.last = etag
        return self._take() if self._due() else None

    def caught_up(self) -> str | None:
        """A read found nothing new: the pending position if its time bound has passed."""
        if self.pending is None or self.manual:
            return None
        return self._take() if self._due() else None

    def written(self, etag: str) -> None:
        """``etag`` is the lease's checkpoint now."""
        self.stored = etag

    def stopping(self) -> str | None:
        """The lease is about to be released (a stop): the last position handled if it is not
        the lease's checkpoint (a write cut short included); None when manual: only the
        handler checkpoints."""
        if self.manual or self.last is None or self.last == self.stored:
            return None
        self._take()
        return self.last

    def manual_checkpoint(self, batch: int) -> bool:
        """A handler's ``checkpoint()`` of batch ``batch``: False when a later batch's was
        (nothing to write: a lease never moves back)."""
        if batch <= self._written:
            return False
        self._written = batch
        return True

    def _due(self) -> bool:
        """Whether the pending position is to be written now: the policy asks for it (its
        batches, or its seconds since the last checkpoint), and the interval allows it."""
        assert isinstance(self.checkpointing, CheckpointPolicy)
        now, seconds = self.clock(), self.checkpointing.seconds
        due_by_time = seconds is not None and now - self._since >= seconds
        if not (self._count >= self.checkpointing.batches or due_by_time):
            return False
        taken = self._taken_at
        return self.interval is None or taken is None or now - taken >= self.interval

    def _take(self) -> str | None:
        etag, self.pending = self.pending, None
        self._count, self._since = 0, self.clock()
        self._taken_at = self._since
        return etag
