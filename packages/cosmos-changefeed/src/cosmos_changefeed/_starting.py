"""A processor's start, written once as a flow of ``_protocol`` operations that the sync and
the aio processor drive (``ChangeFeedProcessorCore.StartAsync``): every check that needs a
round trip is made here, before any lease is taken, so a start that fails has changed nothing
but, at most, the leases it created.

In order: the monitored container's resource id (its properties read: a missing container or
database is ``MissingResourceError``, named) and, for a start from a ``Continuation``, that the
continuation is this container's; the lease store's partition key path and whether it honours
a ``ttl`` (a missing lease container, named); the leases' mode against the processor's
(``ChangeFeedModeSwitchingCheck``); what KEDA's ``azure-cosmosdb`` scaler would find under its
own prefix (``_names.keda_prefix``); then the store initialised (``BootstrapperCore``).

**A throttled lease container is waited through** (``start_patience``): an operation of the
start refused with a 429 after azure-cosmos's own retries (9, over up to 30 s) is done again
after a back-off (1 s, doubled up to 30 s), for as long as it takes -- a start never fails for a
429 (the processor says each wait, WARNING). At a fleet's cold start or scale-out under a lease
container at a quarter of the request units it needs, a start that gave up (azure-cosmos's
retries are not enough when a whole fleet starts at once) left an instance that an
orchestrator restarts, to meet the same 429s again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from cosmos_changefeed import _names
from cosmos_changefeed._continuation import Continuation
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._options import ProcessorOptions
from cosmos_changefeed._protocol import (
    LeaseManager,
    ListDocuments,
    Op,
    ReadContainerRid,
    StoreFacts,
)
from cosmos_changefeed._reading import ProcessorStart, resolve_start

#: The first wait of a start throttled past azure-cosmos's retries, and the longest.
START_WAIT_FIRST, START_WAIT_MOST = 1.0, 30.0


def throttled(error: BaseException) -> bool:
    """Whether ``error`` is the lease container's (or the monitored container's) 429."""
    return getattr(error, "status_code", None) == 429


def start_wait(error: Exception, failures: int) -> float | None:
    """The wait before a start's operation refused with ``error`` (its ``failures``-th in a
    row) is done again: a back-off for a 429, None (fail) for anything else."""
    if not throttled(error):
        return None
    return float(min(START_WAIT_MOST, START_WAIT_FIRST * 2.0 ** min(failures - 1, 16)))


@dataclass(frozen=True)
class Started:
    """What a start found and did."""

    manager: LeaseManager
    created: int
    start: ProcessorStart
    #: Whether the lease store honours a ``ttl`` (None: not known).
    expires_documents: bool | None
    #: The prefix KEDA's scaler finds this processor's leases by; None when it finds none (the
    #: account's host has no dot: ``localhost``).
    keda_prefix: str | None
    #: Leases under KEDA's prefix that are not this processor's (another container's with the
    #: same processor name): KEDA would add their lag to this processor's.
    foreign_leases: list[str] = field(default_factory=list)
    #: The prefix 1.0 wrote the leases under, where it differs (an IPv6 literal's host), and
    #: how many of them this instance adopted.
    legacy_prefix: str | None = None
    adopted: int = 0
    #: Whether the account is on this machine (``_names.is_loopback``): a developer's emulator.
    loopback: bool = False

    @property
    def prefix(self) -> str:
        return self.manager.prefix


def start_flow(
    options: ProcessorOptions, account_endpoint: str, started: dt.datetime
) -> Generator[Op, Any, Started]:
    """Start a processor of ``options`` at ``started`` (see the module)."""
    rid = yield ReadContainerRid()
    if isinstance(options.start_from, Continuation):
        options.start_from.check_container(rid)
    start = resolve_start(options.start_from, options.mode, started)
    path, expires = yield StoreFacts()
    manager = LeaseManager(
        _names.store_prefix(options.processor_name, account_endpoint, rid),
        options.instance_name,
        partition_key_path=path,
        mode=options.mode,
        expiration=options.lease_expiration_interval,
    )
    keda = _names.keda_prefix(options.processor_name, account_endpoint)
    foreign: list[str] = []
    if keda is not None and manager.lease_prefix.startswith(keda):
        # one listing for both: the processor's leases are under KEDA's prefix
        docs = yield ListDocuments(keda)
        mine = [doc for doc in docs if str(doc["id"]).startswith(manager.lease_prefix)]
        manager.check_mode([Lease.from_document(doc) for doc in mine])
        foreign = sorted(
            str(doc["id"])
            for doc in docs
            if doc.get("LeaseToken") and not str(doc["id"]).startswith(manager.lease_prefix)
        )
    else:
        manager.check_mode((yield from manager.all_leases()))
        if keda is not None:
            docs = yield ListDocuments(keda)
            foreign = sorted(
                str(doc["id"])
                for doc in docs
                if doc.get("LeaseToken") and not str(doc["id"]).startswith(manager.lease_prefix)
            )
    legacy = _names.legacy_prefix(options.processor_name, account_endpoint, rid)
    created = yield from manager.initialize(adopt=legacy)
    loopback = _names.is_loopback(account_endpoint)
    return Started(
        manager, created, start, expires, keda, foreign, legacy, manager.adopted, loopback
    )
