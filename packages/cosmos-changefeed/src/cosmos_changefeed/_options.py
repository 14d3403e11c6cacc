"""A processor's options, checked once, and what its handler is given. Pure; both processors
take the same options and hand the same context.

Defaults as .NET's (Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/Configuration/``):
``ChangeFeedLeaseOptions`` -- renew every 17 s, acquire (balance) every 13 s, a lease expires
after 60 s without renewal; ``ChangeFeedProcessorOptions`` -- a poll delay of 5 s after a read
that found nothing new, no maximum item count (the service's page size), latest version; a start
from now. ``ChangeFeedProcessorBuilder``: an instance name is required, the maximum item count is
positive, the all-versions-and-deletes mode takes neither the beginning nor a time as its start.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from cosmos_changefeed._checkpoints import PER_BATCH, Checkpointing, check_checkpointing
from cosmos_changefeed._continuation import (
    ALL_VERSIONS_AND_DELETES,
    LATEST_VERSION,
    Continuation,
)
from cosmos_changefeed._health import STALLED_SINCE
from cosmos_changefeed._leases import Lease, parse_time
from cosmos_changefeed._order import SetAsideChange
from cosmos_changefeed._reading import REQUEST_CHARGE_HEADER, SESSION_TOKEN_HEADER

#: Where a lease without a checkpoint starts: "now" (the processor's start), "beginning", a
#: time (timezone-aware), or where a pull-model reader stopped (``Continuation``).
StartFrom: TypeAlias = Literal["now", "beginning"] | dt.datetime | Continuation
#: The change feed mode.
Mode: TypeAlias = Literal["LatestVersion", "AllVersionsAndDeletes"]
#: How an instance balances the leases and keeps them (``_balancing``, ``_handover``): this
#: package's fair share with hand-overs, or .NET's processor's way (``EqualPartitionsBalancing
#: Strategy``: one steal per round, nothing given back nor handed over, a read before a renewal).
Balancing: TypeAlias = Literal["fair-share", "dotnet"]
BALANCINGS: tuple[Balancing, ...] = ("fair-share", "dotnet")

DEFAULT_POLL_DELAY = 5.0
DEFAULT_RENEW_INTERVAL = 17.0
DEFAULT_ACQUIRE_INTERVAL = 13.0
DEFAULT_EXPIRATION_INTERVAL = 60.0
#: The longest wait before a failed batch is given again (the wait doubles from the poll delay).
DEFAULT_MAX_RETRY_DELAY = 60.0
#: With ``set_aside`` and no ``set_aside_after``: the attempts after which a batch is set aside.
DEFAULT_SET_ASIDE_AFTER = 5
#: ``x-ms-max-item-count`` is an Int32 on the service's side.
MAX_ITEMS_LIMIT = 2**31 - 1
#: Characters a Cosmos DB id cannot hold: a processor's name is the start of its leases' ids.
ID_FORBIDDEN = "/\\?#"


@dataclass(frozen=True)
class ProcessorOptions:
    """Everything a processor is configured with besides its containers and its callables,
    each checked alone and against the others when it is made (``ValueError`` / ``TypeError``
    naming the option and what would be right)."""

    processor_name: str
    instance_name: str
    start_from: StartFrom = "now"
    mode: Mode = "LatestVersion"
    poll_delay: float = DEFAULT_POLL_DELAY
    max_items: int | None = None
    lease_renew_interval: float = DEFAULT_RENEW_INTERVAL
    lease_acquire_interval: float = DEFAULT_ACQUIRE_INTERVAL
    lease_expiration_interval: float = DEFAULT_EXPIRATION_INTERVAL
    #: The wait before a failed batch is given again the first time (None: the poll delay).
    min_retry_delay: float | None = None
    max_retry_delay: float = DEFAULT_MAX_RETRY_DELAY
    #: The attempts after which a failing batch goes to ``set_aside``; None: never set aside.
    set_aside_after: int | None = None
    #: When a lease is checkpointed (``_checkpoints``): a policy, or "manual".
    checkpoint: Checkpointing = PER_BATCH
    #: Whether a lease without a checkpoint keeps its start once a read of it finds nothing
    #: (``_keeping``); False: as .NET, each new owner starts at its own ``start_from``.
    keep_start: bool = True
    #: At most one checkpoint per lease per this many seconds (``_checkpoints``); None: as
    #: ``checkpoint`` asks.
    checkpoint_interval: float | None = None
    #: How the instance balances and keeps its leases.
    balancing: Balancing = "fair-share"

    def __post_init__(self) -> None:
        check_processor_name(self.processor_name)
        check_checkpointing(self.checkpoint, self.checkpoint_interval)
        if not isinstance(self.instance_name, str) or not self.instance_name.strip():
            raise ValueError(
                "instance_name is required for the processor to initialize: a name unique among "
                "the instances of this processor (a pod's or a host's name)"
            )
        if self.mode not in (LATEST_VERSION, ALL_VERSIONS_AND_DELETES):
            raise ValueError(
                f"mode: {LATEST_VERSION!r} or {ALL_VERSIONS_AND_DELETES!r}, not {self.mode!r}"
            )
        check_start(self.start_from, self.mode)
        if not isinstance(self.keep_start, bool):
            raise TypeError(f"keep_start is True or False, not {self.keep_start!r}")
        if self.balancing not in BALANCINGS:
            raise ValueError(
                f"balancing: 'fair-share' (the default) or 'dotnet' (.NET's processor's "
                f"balancing, for a fleet that must behave as .NET's), not {self.balancing!r}"
            )
        self._check_numbers()
        if self.lease_renew_interval >= self.lease_expiration_interval:
            raise ValueError(
                f"lease_renew_interval ({self.lease_renew_interval:g}s) must be shorter than "
                f"lease_expiration_interval ({self.lease_expiration_interval:g}s): a lease "
                "renewed less often than it expires is taken by another instance between two "
                "renewals (.NET's defaults: 17s and 60s)"
            )
        if self.max_retry_delay < self.first_retry_delay:
            raise ValueError(
                f"max_retry_delay ({self.max_retry_delay:g}s) must be at least min_retry_delay "
                f"(or, without it, the poll delay: {self.first_retry_delay:g}s): a failed batch "
                "waits that first, then twice as long at each attempt, up to max_retry_delay"
            )

    @property
    def first_retry_delay(self) -> float:
        """The wait before a failed batch is given again the first time."""
        return self.poll_delay if self.min_retry_delay is None else self.min_retry_delay

    def _check_numbers(self) -> None:
        for name in (
            "poll_delay",
            "lease_renew_interval",
            "lease_acquire_interval",
            "lease_expiration_interval",
            "min_retry_delay",
            "max_retry_delay",
        ):
            value = getattr(self, name)
            if value is None and name == "min_retry_delay":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} is a number of seconds, not {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number of seconds >= 0, not {value!r}")
            if value == 0 and name not in ("poll_delay", "min_retry_delay"):
                raise ValueError(f"{name} must be more than 0 seconds")
        if self.max_items is not None:
            if isinstance(self.max_items, bool) or not isinstance(self.max_items, int):
                raise TypeError(f"max_items is a whole number, not {type(self.max_items).__name__}")
            if not 1 <= self.max_items <= MAX_ITEMS_LIMIT:
                raise ValueError(
                    f"max_items must be positive and at most {MAX_ITEMS_LIMIT} (the service's "
                    f"x-ms-max-item-count), not {self.max_items}; None: the service's page"
                )
        if self.set_aside_after is not None and (
            isinstance(self.set_aside_after, bool)
            or not isinstance(self.set_aside_after, int)
            or self.set_aside_after < 1
        ):
            raise ValueError(
                f"set_aside_after is a number of attempts, 1 or more, not {self.set_aside_after!r}"
            )


def check_processor_name(name: object) -> None:
    """A processor's name: a string a Cosmos DB id can start with. It may be empty: the
    Functions trigger's processor, without a ``leaseContainerPrefix``, is named "" (.NET
    refuses only null)."""
    if not isinstance(name, str):
        raise TypeError(f"processor_name must be a string, not {type(name).__name__}")
    bad = sorted({c for c in name if c in ID_FORBIDDEN})
    if bad:
        raise ValueError(
            f"processor_name {name!r} holds {' '.join(bad)}, which a Cosmos DB id cannot: it is "
            "the start of every lease's id"
        )


def check_start(start_from: object, mode: str, *, option: str = "start_from") -> None:
    """A start: "now", "beginning", a timezone-aware time not in the future, or a
    ``Continuation``; the all-versions-and-deletes mode takes "now" or a continuation only."""
    if isinstance(start_from, Continuation):
        if start_from.mode != mode:
            raise ValueError(
                f"{option}: the continuation was read in the {start_from.mode} mode, the "
                f"processor reads the {mode} mode"
            )
        return
    if isinstance(start_from, dt.datetime):
        if start_from.tzinfo is None:
            raise ValueError(
                f"{option}: a time needs a time zone (datetime.now(timezone.utc), not "
                "datetime.now()): .NET refuses an unspecified kind too"
            )
        now = dt.datetime.now(dt.UTC)
        if start_from > now:
            raise ValueError(
                f"{option}: {start_from.isoformat()} is in the future (now is "
                f"{now.isoformat(timespec='seconds')}): the processor would read nothing before "
                "then and skip nothing after; is its time zone the one you meant?"
            )
    elif start_from not in ("now", "beginning"):
        raise ValueError(
            f"{option}: 'now', 'beginning', a datetime or a Continuation, not {start_from!r}"
        )
    if mode == ALL_VERSIONS_AND_DELETES and start_from != "now":
        raise ValueError(
            f"{option}: only 'now' (or a Continuation) is supported with the "
            "AllVersionsAndDeletes mode, as in .NET"
        )


@dataclass(frozen=True)
class LeaseContext:
    """What a handler is told about the batch it is given (.NET's
    ``ChangeFeedProcessorContext``): the lease, its range, and the response it came in."""

    lease_token: str
    #: The lease's range, as azure-cosmos takes it (``feed_range=``).
    feed_range: dict[str, Any]
    processor_name: str
    instance_name: str
    #: Where the lease resumes once this batch is checkpointed (the response's etag).
    continuation: str | None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def session_token(self) -> str | None:
        return self.headers.get(SESSION_TOKEN_HEADER)

    @property
    def request_charge(self) -> float:
        try:
            return float(self.headers.get(REQUEST_CHARGE_HEADER, "0"))
        except ValueError:
            return 0.0


@dataclass(frozen=True)
class FailedBatch:
    """A batch the handler failed on: what ``set_aside`` is given, and ``on_error`` with it.
    ``attempt`` counts the handler's failures on this batch in a row -- the same lease read
    from the same continuation (``context.continuation`` is where it would be checkpointed)
    -- by this instance (another instance that takes the lease counts from 1 again)."""

    context: LeaseContext
    changes: list[dict[str, Any]]
    attempt: int
    #: What the handler raised at this attempt (for a change held behind another: a
    #: ``HeldBehindError``, which it did not raise).
    error: BaseException
    #: With ``still_set_aside``: the change set aside that this one waits behind (its
    #: partition key's earlier change), None for a change that failed itself.
    behind: SetAsideChange | None = None


#: What a processor was doing when something failed (``Failure.during``).
During: TypeAlias = Literal[
    "handler", "set_aside", "read", "acquire", "renew", "release", "split", "process", "checkpoint"
]


@dataclass(frozen=True)
class Failure:
    """What ``on_error`` is told (.NET's ``WithErrorNotification``, with more): the lease, the
    error, what the processor was doing, and -- for a failing handler or ``set_aside`` -- the
    batch and how many times in a row it failed."""

    lease_token: str
    error: BaseException
    during: During
    batch: FailedBatch | None = None

    @property
    def attempt(self) -> int:
        """The batch's attempt (0 when no batch failed)."""
        return self.batch.attempt if self.batch is not None else 0


@dataclass(frozen=True)
class ChangeFeedProcessorState:
    """One lease as the estimator sees it (.NET's ``ChangeFeedProcessorState``)."""

    lease_token: str
    #: Changes not yet processed, as .NET estimates them.
    estimated_lag: int
    #: The owner, None when no instance holds the lease.
    instance_name: str | None
    #: When the owner's handler began to fail on every change it is given, as the owner wrote it
    #: into the lease (``ChangeFeedProcessor.stalled_since``); None: not stalled (or not said).
    stalled_since: dt.datetime | None = None


#: Where an estimator reads a lease that has no checkpoint yet from (the processor's
#: ``start_from`` but "now", which only a running processor knows): None, as .NET's estimator,
#: counts such a lease 1 and reads nothing.
EstimateFrom: TypeAlias = Literal["beginning"] | dt.datetime | None


@dataclass(frozen=True)
class PendingChanges:
    """One lease's changes not processed yet, as ``ChangeFeedEstimator.get_pending`` read them:
    its estimate (``ChangeFeedProcessorState``'s fields) and the first of its pending changes
    themselves, so a caller can tell what they are (their documents, their ``_lsn``)."""

    lease_token: str
    #: As ``ChangeFeedProcessorState.estimated_lag``.
    estimated_lag: int
    #: The owner, None when no instance holds the lease (or there is no lease yet).
    instance_name: str | None
    #: The lease as stored (its ``continuation``, ``timestamp``, ``owner``); None for a range
    #: that has no lease yet (a processor that never started, estimated from ``estimate_from``).
    lease: Lease | None
    #: The first changes after the lease's checkpoint (or its start), in the order of its feed;
    #: at most the ``max_changes`` asked for.
    changes: list[dict[str, Any]] = field(default_factory=list)
    #: Whether ``changes`` are all of them: the feed ended within the read.
    complete: bool = False

    @property
    def stalled_since(self) -> dt.datetime | None:
        """As ``ChangeFeedProcessorState.stalled_since``: the lease's owner's stall."""
        return stalled_since_of(self.lease)


def stalled_since_of(lease: Lease | None) -> dt.datetime | None:
    """When ``lease``'s owner said its handler began to fail on every change (``_health``'s
    ``STALLED_SINCE`` property, written while it holds the lease); None for a lease without an
    owner or the property."""
    if lease is None or lease.owner is None:
        return None
    return parse_time(lease.properties.get(STALLED_SINCE))
