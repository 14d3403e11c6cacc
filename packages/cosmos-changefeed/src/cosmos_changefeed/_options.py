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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from cosmos_changefeed._continuation import ALL_VERSIONS_AND_DELETES, LATEST_VERSION
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._reading import REQUEST_CHARGE_HEADER, SESSION_TOKEN_HEADER

#: Where a lease without a checkpoint starts: "now" (the processor's start), "beginning", or
#: a time (timezone-aware).
StartFrom: TypeAlias = Literal["now", "beginning"] | dt.datetime
#: The change feed mode.
Mode: TypeAlias = Literal["LatestVersion", "AllVersionsAndDeletes"]

DEFAULT_POLL_DELAY = 5.0
DEFAULT_RENEW_INTERVAL = 17.0
DEFAULT_ACQUIRE_INTERVAL = 13.0
DEFAULT_EXPIRATION_INTERVAL = 60.0


@dataclass(frozen=True)
class ProcessorOptions:
    """Everything a processor is configured with besides its containers and its handler."""

    processor_name: str
    instance_name: str
    start_from: StartFrom = "now"
    mode: Mode = "LatestVersion"
    poll_delay: float = DEFAULT_POLL_DELAY
    max_items: int | None = None
    lease_renew_interval: float = DEFAULT_RENEW_INTERVAL
    lease_acquire_interval: float = DEFAULT_ACQUIRE_INTERVAL
    lease_expiration_interval: float = DEFAULT_EXPIRATION_INTERVAL

    def __post_init__(self) -> None:
        if not isinstance(self.processor_name, str):
            raise TypeError("processor_name must be a string")
        if not self.instance_name:
            raise ValueError("instance_name is required for the processor to initialize")
        if self.mode not in (LATEST_VERSION, ALL_VERSIONS_AND_DELETES):
            raise ValueError(f"mode: {LATEST_VERSION!r} or {ALL_VERSIONS_AND_DELETES!r}")
        if self.mode == ALL_VERSIONS_AND_DELETES and self.start_from != "now":
            raise ValueError(
                "start_from: only 'now' is supported with the AllVersionsAndDeletes mode"
            )
        if isinstance(self.start_from, dt.datetime) and self.start_from.tzinfo is None:
            raise ValueError("start_from: a time needs a time zone")
        if not isinstance(self.start_from, dt.datetime) and self.start_from not in (
            "now",
            "beginning",
        ):
            raise ValueError(
                f"start_from: 'now', 'beginning' or a datetime, not {self.start_from!r}"
            )
        if self.max_items is not None and self.max_items <= 0:
            raise ValueError("max_items must be positive")
        for name in ("poll_delay", "lease_renew_interval", "lease_acquire_interval"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} cannot be negative")
        if self.lease_expiration_interval <= 0:
            raise ValueError("lease_expiration_interval must be positive")


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
class ChangeFeedProcessorState:
    """One lease as the estimator sees it (.NET's ``ChangeFeedProcessorState``)."""

    lease_token: str
    #: Changes not yet processed, as .NET estimates them.
    estimated_lag: int
    #: The owner, None when no instance holds the lease.
    instance_name: str | None


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
