"""Which leases an instance takes, and when: the change feed processor's equal-partitions
balancing, run every lease acquire interval.

Follows Azure/azure-cosmos-dotnet-v3 (3.41), ``ChangeFeedProcessor/FeedManagement/``:

* ``EqualPartitionsBalancingStrategy.SelectLeasesToTake``: the owners of unexpired leases are
  the instances; the target is ``ceil(leases / instances)`` (at least 1); an instance under its
  target takes expired or unowned leases (up to what it needs), else **steals one** lease from
  the instance with the most (the last of them in the order met; its first lease in lease
  order) when that instance holds more than the target (or than the target - 1 while it
  needs more than one).
* ``PartitionLoadBalancerCore``: read every lease, select, acquire each selected one (a
  failure is logged and the loop goes on), then wait the acquire interval.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
from collections.abc import Awaitable, Callable

from funcstack.functions_host._cosmos_trigger.lease_store import Lease, LeaseLostError, LeaseStore

logger = logging.getLogger("funcstack.functions_host.cosmos")


def leases_to_take(
    leases: list[Lease], owner: str, expiration: float, *, now: dt.datetime | None = None
) -> list[Lease]:
    """The leases ``owner`` should take now (``SelectLeasesToTake``)."""
    moment = now or dt.datetime.now(dt.UTC)
    counts: dict[str, int] = {}
    available: list[Lease] = []
    by_token: dict[str, Lease] = {}
    for lease in leases:
        by_token[lease.token] = lease
        if lease.owner is None or lease.expired(expiration, moment):
            available.append(lease)
        else:
            counts[lease.owner] = counts.get(lease.owner, 0) + 1
    counts.setdefault(owner, 0)
    if not by_token:
        return []
    target = max(1, math.ceil(len(by_token) / len(counts)))
    needed = target - counts[owner]
    if needed <= 0:
        return []
    if available:
        return available[:needed]
    most_owner, most = "", 0
    for name, count in counts.items():  # FindWorkerWithMostPartitions: the last of the most
        if most <= count:
            most_owner, most = name, count
    if most > target - (1 if needed > 1 else 0):
        return [
            next(
                lease
                for lease in by_token.values()
                if (lease.owner or "").lower() == most_owner.lower()
            )
        ]
    return []


class LoadBalancer:
    """Every ``acquire_interval`` seconds: the leases to take, each handed to ``take``."""

    def __init__(
        self,
        store: LeaseStore,
        *,
        acquire_interval: float,
        expiration: float,
        take: Callable[[Lease], Awaitable[None]],
        name: str,
        after_round: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._acquire_interval = acquire_interval
        self._expiration = expiration
        self._take = take
        self._name = name
        self._after_round = after_round  # the listener's readiness: the first round ended

    async def run(self) -> None:
        while True:
            try:
                leases = await self._store.all_leases()
                for lease in leases_to_take(leases, self._store.owner, self._expiration):
                    try:
                        await self._take(lease)
                    except asyncio.CancelledError:
                        raise
                    except LeaseLostError as exc:  # another instance was quicker
                        logger.info(
                            "cosmos trigger %s: lease %s not acquired (%s)",
                            self._name,
                            lease.token,
                            exc,
                        )
                    except Exception as exc:
                        logger.warning(
                            "cosmos trigger %s: lease %s not acquired (%s: %s)",
                            self._name,
                            lease.token,
                            type(exc).__name__,
                            exc,
                        )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning(
                    "cosmos trigger %s: lease balancing failed (%s: %s)",
                    self._name,
                    type(exc).__name__,
                    str(exc).splitlines()[0][:200] if str(exc) else "",
                )
            else:
                self._after_round()
            await asyncio.sleep(self._acquire_interval)
