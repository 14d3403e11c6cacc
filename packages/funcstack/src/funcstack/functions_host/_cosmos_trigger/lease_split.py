"""A lease whose physical partition split is replaced by child leases, as the change feed
processor does.

Follows Azure/azure-cosmos-dotnet-v3 (3.41), ``ChangeFeedProcessor/``:

* ``FeedProcessing/FeedProcessorCore``: a read answered 410 / 1002 ends the lease's processing
  with ``FeedRangeGoneException`` and the last continuation read
  (``lease_processing.FeedRangeGoneError``; ``continuation`` for how the
  Python SDK shows the 410).
* ``Bootstrapping/PartitionSynchronizerCore.HandlePartitionGoneAsync`` for an EPK lease: the
  partition key ranges overlapping the lease's range, read afresh (``forceRefresh: true``);
  one range: the lease is only "redirected" and stays; several: a child lease per range, the
  first from the lease's min, each up to its range's max, the last to the lease's max, each
  with the parent's continuation.
* ``FeedManagement/PartitionControllerCore.HandlePartitionGoneAsync``: the children get the
  parent's properties and are added (acquired and processed by this instance, like any lease
  it takes: balancing spreads them afterwards); the parent lease is deleted.

Only the parent's owner splits it: before anything is created, the last continuation is
checkpointed into the parent, an update that is refused when another instance owns the lease
now (``LeaseLostError``: the split is theirs); the parent is then deleted only if nobody wrote
it since (``If-Match``). Where .NET gives every child the parent's etag, the Python SDK's
continuation names its ranges, so each child gets it cut to its own range (the parent's
position in that part, nothing of the others'). A batch may come again (a child stolen before
its first checkpoint is read from it again, at least once); nothing is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from funcstack.functions_host._cosmos_trigger import continuation as continuations
from funcstack.functions_host._cosmos_trigger.lease_store import Lease, LeaseStore

logger = logging.getLogger("funcstack.functions_host.cosmos")

#: The monitored container's feed ranges (its physical partitions) read afresh, in EPK order.
FeedRanges = Callable[[], Awaitable[list[dict[str, Any]]]]


class PartitionSynchronizer:
    """Splits the leases of one trigger's store (``PartitionSynchronizerCore``)."""

    def __init__(self, store: LeaseStore, feed_ranges: FeedRanges, *, name: str) -> None:
        self._store = store
        self._feed_ranges = feed_ranges
        self._name = name

    async def handle_partition_gone(
        self, lease: Lease, continuation: str | None
    ) -> list[Lease] | None:
        """Replace ``lease``, whose partition split, by its children, starting from
        ``continuation`` (the last one its owner read; None: the parent's start options);
        the children created here, or None when one partition still holds the whole lease
        (it stays). ``LeaseLostError`` when the lease is not this instance's any more."""
        parent_range = lease.feed_range
        if parent_range is None:
            raise ValueError(f"lease {lease.token} has no FeedRange to split")
        low, high = _bounds(parent_range)
        overlapping = [
            rng
            for rng in await self._feed_ranges()
            if _bounds(rng)[0] < high and low < _bounds(rng)[1]
        ]
        if len(overlapping) <= 1:
            logger.info(
                "cosmos trigger %s: lease %s is gone but one partition holds its range (%s): kept",
                self._name,
                lease.token,
                ", ".join(f"{a}-{b}" for a, b in map(_bounds, overlapping)) or "none",
            )
            return None
        # still its owner? (refused if another instance took it); the children start here
        if continuation:
            parent = await self._store.checkpoint(lease, continuation)
        else:
            parent = await self._store.renew(lease)

        def start(child: dict[str, Any]) -> str | None:
            return continuations.for_range(continuation, child) if continuation else None

        children = await self._store.replace_with_children(
            parent, overlapping, continuation_for=start
        )
        logger.info(
            "cosmos trigger %s: lease %s split into %s, its physical partition having "
            "split; each starts where the lease was (%s)",
            self._name,
            lease.token,
            ", ".join(child.token for child in children) or "leases another instance created",
            "its continuation" if continuation else "no continuation yet",
        )
        return children


def _bounds(feed_range: dict[str, Any]) -> tuple[str, str]:
    rng = feed_range.get("Range", feed_range)
    return str(rng["min"]), str(rng["max"])
