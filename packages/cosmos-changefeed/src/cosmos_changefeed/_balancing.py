"""Which leases an instance takes in one round: the .NET processor's equal-partitions balancing.
Pure; the sync and the aio processor run it every lease acquire interval.

Follows Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/FeedManagement/
EqualPartitionsBalancingStrategy.cs`` (``SelectLeasesToTake``): a lease without an owner (null or
blank) or not updated within the expiration interval is available; the owners of the others are
the instances, this one counted with 0 if it owns none; the target is ``ceil(leases /
instances)``, at least 1 (``CalculateTargetPartitionCount``; the minimum and maximum lease counts
are .NET's defaults, 0: none); an instance under its target takes available leases up to what
it needs, in the order the store listed them, else steals **one** lease from the instance with
the most (the last of equals in the order met, ``FindWorkerWithMostPartitions``; its first lease
in the store's order) when that instance holds more than the target (more than the target - 1
while this one needs more than one). Owners are compared as .NET compares them: the counts by
the exact name, the lease to steal ignoring case.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from cosmos_changefeed._leases import Lease


def select_leases_to_take(
    leases: Sequence[Lease], instance_name: str, expiration: float, now: dt.datetime
) -> list[Lease]:
    """The leases ``instance_name`` should try to acquire now."""
    counts: dict[str, int] = {}
    available: list[Lease] = []
    by_token: dict[str, Lease] = {}
    for lease in leases:
        by_token[lease.lease_token] = lease
        if not (lease.owner or "").strip() or lease.is_expired(expiration, now):
            available.append(lease)
        else:
            assert lease.owner is not None
            counts[lease.owner] = counts.get(lease.owner, 0) + 1
    counts.setdefault(instance_name, 0)
    if not by_token:
        return []
    partitions, workers = len(by_token), len(counts)
    target = math.ceil(partitions / workers) if partitions > workers else 1
    needed = target - counts[instance_name]
    if needed <= 0:
        return []
    if available:
        return available[:needed]
    most_owner, most = "", 0
    for name, count in counts.items():
        if most <= count:
            most_owner, most = name, count
    if most > target - (1 if needed > 1 else 0):
        victim = most_owner.lower()
        return [next(lease for lease in by_token.values() if (lease.owner or "").lower() == victim)]
    return []
