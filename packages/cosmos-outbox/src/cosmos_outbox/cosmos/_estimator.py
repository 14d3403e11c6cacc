"""The backlog estimator on Cosmos DB, on cosmos-changefeed's estimator (the one implementation
of finding a processor's leases and reading what follows their checkpoints; the relay's leases
are that processor's whether the Functions trigger or `cosmos-outbox relay` writes them): for
each lease of the relay (the processor named OUTBOX_PROCESSOR_NAME, over the
outbox's container), its first pending changes, of which the transactions that carry events
are counted:

- up to SCAN changes: when the feed ends within them, `pending` is exact: the number of
  distinct LSNs among the event documents (`type: domainEvent`). Changes that carry no event
  (an idempotency record written alone for a write that raised no event, a quarantine record)
  are not counted;
- beyond that, estimated from the first pending event document, as the change feed estimator
  estimates from the first change (cosmos-changefeed's `estimated_lag`, .NET's arithmetic):

      pending = latest LSN of the range - LSN of the first unprocessed event + 1

The ids of the pending event documents read are kept (`pending_ids`; all of them when the feed
ended within the read: `pending_ids_complete`): the journey of an event tells from them whether
its lease's continuation is past it. The creation time comes from the first pending event (its
`createdAt`, read by `cosmos_outbox._mapper`, else `_ts`). A lease never checkpointed is read
from the start of its range (the relay starts there: `start_from_beginning`); with no lease at
all (the relay never started), each partition key range of the container is, so a relay that
never ran still shows its backlog. A lease whose range split and is not replaced yet counts 1,
as .NET's estimator counts it.

Leases are found by the processor's whole prefix (its name, the account's host, the database's
and the container's resource ids), as the Functions host and KEDA find them: another container's
relay sharing the lease container and the prefix is not counted here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from azure.cosmos import ContainerProxy
from azure.cosmos.aio import ContainerProxy as AsyncContainerProxy
from azure.cosmos.exceptions import CosmosHttpResponseError

from cosmos_changefeed import ChangeFeedEstimator, MissingResourceError, PendingChanges
from cosmos_changefeed.aio import ChangeFeedEstimator as AsyncChangeFeedEstimator
from cosmos_outbox._mapper import EVENT_TYPE, document_created_at
from cosmos_outbox.cosmos._errors import cosmos_errors
from cosmos_outbox.errors import RelayNotReadyError
from cosmos_outbox.ports import AsyncBacklogEstimator, BacklogEstimator, LeaseBacklog

logger = logging.getLogger("cosmos_outbox.cosmos")
#: Changes read per lease for an exact count (beyond them, the backlog is estimated).
SCAN = 100


def backlog_of(found: PendingChanges) -> LeaseBacklog:
    """A lease's backlog from its pending changes as cosmos-changefeed read them (exact when the
    feed ended within them, else from the range's latest LSN)."""
    lease = found.lease
    owner, checkpoint = found.instance_name, None
    if lease is not None:
        checkpoint = lease.timestamp or (
            datetime.fromtimestamp(float(lease.ts), UTC).isoformat() if lease.ts else None
        )
    changes = found.changes
    events = [c for c in changes if c.get("type") == EVENT_TYPE]
    ids = tuple(str(c.get("id")) for c in events)
    if found.complete and not events:
        return LeaseBacklog(found.lease_token, 0, None, owner, checkpoint, (), True)
    if not changes:  # nothing read: its range split (not replaced yet); .NET counts it 1
        return LeaseBacklog(found.lease_token, found.estimated_lag, None, owner, checkpoint)
    first = min(events or changes, key=_lsn)
    if found.complete:
        pending = len({c.get("_lsn") for c in events})
    else:  # the estimate counts from the first change; the backlog from the first event
        pending = max(1, found.estimated_lag - (_lsn(first) - _lsn(changes[0])))
    created = document_created_at(first)
    if created is None and isinstance(first.get("_ts"), int | float):
        created = float(first["_ts"])
    return LeaseBacklog(found.lease_token, pending, created, owner, checkpoint, ids, found.complete)


def _lsn(change: Mapping[str, Any]) -> int:
    try:
        return int(change.get("_lsn", 0))
    except (TypeError, ValueError):
        return 0


def _lease_container_missing(name: str) -> RelayNotReadyError:
    return RelayNotReadyError(
        f"the relay's lease container {name!r} does not exist: its trigger cannot start. "
        "Create it (partition key /id; the deploy templates create it), or let the trigger "
        "create it (create_lease_container_if_not_exists, which needs the account's key: an "
        "identity cannot create containers), and check COSMOS_LEASE_CONTAINER"
    )


@contextlib.contextmanager
def _leases_named(name: str, *, read: bool = False) -> Iterator[None]:
    """Store failures translated (`cosmos_errors`); the lease container `name` missing is the
    relay not ready, naming it: cosmos-changefeed's MissingResourceError for it (the monitored
    container's, naming it and the fix, goes on), or, once the leases are `read`, a 404."""
    with cosmos_errors():
        try:
            yield
        except MissingResourceError as exc:
            if exc.role == "lease container":
                raise _lease_container_missing(name) from exc
            raise
        except CosmosHttpResponseError as exc:
            if read and exc.status_code == 404:
                raise _lease_container_missing(name) from exc
            raise


class CosmosBacklogEstimator(BacklogEstimator):
    """Estimates from the relay's leases (the processor `processor_name`) over the monitored
    container (sync SDK). Raises RelayNotReadyError when the lease container does not exist,
    StoreUnavailableError/ThrottledError when the store fails."""

    def __init__(
        self, monitored: ContainerProxy, leases: ContainerProxy, *, processor_name: str = ""
    ) -> None:
        self._lease_container = str(leases.id)
        self._estimator = ChangeFeedEstimator(
            monitored, leases, processor_name=processor_name, estimate_from="beginning"
        )

    def pending(self) -> list[PendingChanges]:
        """The leases' pending changes as cosmos-changefeed reads them (`estimate`'s input)."""
        with _leases_named(self._lease_container):  # the monitored container missing: NotFound
            self._estimator.lease_prefix()
        with _leases_named(self._lease_container, read=True):
            return self._estimator.get_pending(SCAN)

    def estimate(self) -> list[LeaseBacklog]:
        return [backlog_of(found) for found in self.pending()]


class AsyncCosmosBacklogEstimator(AsyncBacklogEstimator):
    """`CosmosBacklogEstimator` on the SDK's `aio` client."""

    def __init__(
        self,
        monitored: AsyncContainerProxy,
        leases: AsyncContainerProxy,
        *,
        processor_name: str = "",
    ) -> None:
        self._lease_container = str(leases.id)
        self._estimator = AsyncChangeFeedEstimator(
            monitored, leases, processor_name=processor_name, estimate_from="beginning"
        )

    async def pending(self) -> list[PendingChanges]:
        """The leases' pending changes as cosmos-changefeed reads them (`estimate`'s input)."""
        with _leases_named(self._lease_container):
            await self._estimator.lease_prefix()
        with _leases_named(self._lease_container, read=True):
            return await self._estimator.get_pending(SCAN)

    async def estimate(self) -> list[LeaseBacklog]:
        return [backlog_of(found) for found in await self.pending()]
