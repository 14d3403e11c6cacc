"""What a processor says about its leases, worded once for both processors (logger
``cosmos_changefeed``, INFO for a lease's life, WARNING for what is retried, ERROR for what an
operator must look at), and the callbacks that tell an application the same."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

from cosmos_changefeed._continuation import Continuation
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import Failure
from cosmos_changefeed._reading import ProcessorStart

logger = logging.getLogger("cosmos_changefeed")


@dataclass(frozen=True)
class Monitor:
    """An application's hooks (.NET's ``WithLeaseAcquireNotification``,
    ``WithLeaseReleaseNotification``, ``WithErrorNotification``): each is called with the lease
    token (``on_error``: with a ``Failure``), from the processor's own thread or task; what
    they raise is logged and ignored."""

    on_lease_acquired: Callable[[str], object] | None = None
    on_lease_released: Callable[[str], object] | None = None
    on_error: Callable[[Failure], object] | None = None


def start_label(start: ProcessorStart) -> str:
    if isinstance(start, dt.datetime):
        return start.isoformat()
    if isinstance(start, Continuation):
        return "its position in the continuation given"
    return start


def came_from(seen: Lease, expiration: float, now: dt.datetime, me: str = "") -> str:
    """How a lease came to this instance (``me``): unowned, handed over to it (the store names
    it the owner: its owner released it to this instance, or it held it under its name
    before), expired, or stolen."""
    if not (seen.owner or "").strip():
        return "unowned"
    if me and (seen.owner or "").lower() == me.lower():
        return "handed over to it"
    if seen.is_expired(expiration, now):
        return f"expired, was {seen.owner}'s"
    return f"stolen from {seen.owner}"


def where_it_starts(lease: Lease, start: ProcessorStart) -> str:
    if lease.continuation:
        return "resumed from its lease"
    return f"no checkpoint: starts at {start_label(start)}"


def error_text(exc: BaseException) -> str:
    first = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
