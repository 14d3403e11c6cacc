"""What becomes of a lease whose range is gone (its physical partition split or merged), and
which leases a store lacks. Pure; the sync and the aio processor carry the plans out.

Follows Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/Bootstrapping/
PartitionSynchronizerCore.cs``:

* ``CreateMissingLeasesAsync`` / ``CreateLeasesAsync``: a version-0 lease per partition key
  range, except for the ranges a version-0 lease already names (its ``LeaseToken`` the range's
  id) or an EPK lease covers (one sharing the range's min or its max); none at all is
  skipped when the store holds no lease.
* ``HandlePartitionGoneAsync`` for a version-0 lease (``DocumentServiceLeaseCore``): the ranges
  now overlapping its ``FeedRange``, read afresh; several (a split): a version-0 lease per
  child range, each from the parent's last continuation; one (a merge): one EPK lease
  (version 1) over the parent's own range, from its last continuation; the parent is deleted
  in both cases.
* ``HandlePartitionGoneAsync`` for an EPK lease (``DocumentServiceLeaseCoreEpk``): several: EPK
  children that tile the parent's range -- the first from the parent's min, each up to its
  range's max, the last up to the parent's max -- each from the parent's continuation, the
  parent deleted; one: the lease is only "redirected" and stays.
* ``PartitionControllerCore.HandlePartitionGoneAsync``: the children get the parent's
  ``properties``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cosmos_changefeed._leases import EPK_RANGE_BASED, Lease
from cosmos_changefeed._ranges import EpkRange, PartitionKeyRange


@dataclass(frozen=True)
class ChildLease:
    """A lease to create: version 0 when ``range_id`` is set, else an EPK lease."""

    feed_range: EpkRange
    range_id: str | None = None


@dataclass(frozen=True)
class GonePlan:
    children: tuple[ChildLease, ...]
    #: Delete the gone lease once the children exist (False: it stays, "redirected").
    delete_parent: bool


class NoRangeError(ValueError):
    """No live partition key range overlaps a gone lease's range."""


def missing_ranges(
    ranges: Sequence[PartitionKeyRange], leases: Sequence[Lease]
) -> list[PartitionKeyRange]:
    """The ranges a lease must be created for (``CreateLeasesAsync``)."""
    if not leases:
        return list(ranges)
    named = {lease.lease_token for lease in leases if lease.version != EPK_RANGE_BASED}
    epk = [
        lease.feed_range
        for lease in leases
        if lease.version == EPK_RANGE_BASED and lease.feed_range is not None
    ]
    return [
        r
        for r in ranges
        if r.id not in named and not any(e.min == r.range.min or e.max == r.range.max for e in epk)
    ]


def plan_gone(lease: Lease, overlapping: Sequence[PartitionKeyRange]) -> GonePlan:
    """The leases that replace ``lease``, whose range the ``overlapping`` ranges now hold."""
    if lease.feed_range is None:
        raise NoRangeError(f"lease {lease.lease_token} has no FeedRange to split or merge")
    if not overlapping:
        raise NoRangeError(
            f"lease {lease.lease_token} is gone but no range overlaps {lease.feed_range}"
        )
    if lease.version != EPK_RANGE_BASED:
        if len(overlapping) > 1:
            return GonePlan(tuple(ChildLease(r.range, r.id) for r in overlapping), True)
        return GonePlan((ChildLease(lease.feed_range),), True)
    if len(overlapping) == 1:
        return GonePlan((), False)
    low, high = lease.feed_range.min, lease.feed_range.max
    children: list[ChildLease] = []
    for child in overlapping[:-1]:
        children.append(ChildLease(EpkRange(low, child.range.max)))
        low = child.range.max
    children.append(ChildLease(EpkRange(low, high)))
    return GonePlan(tuple(children), True)
