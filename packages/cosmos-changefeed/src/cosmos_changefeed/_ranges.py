"""Effective partition key (EPK) ranges and partition key ranges: what a lease covers, in the
forms each side writes it. Pure; serves the sync and the aio processor alike.

* The .NET processor writes a lease's ``FeedRange`` as ``FeedRangeEpk`` through
  ``FeedRangeInternalConverter`` and ``RangeJsonConverter`` (Azure/azure-cosmos-dotnet-v3,
  ``src/Serializer/FeedRange/``, ``src/Routing/RangeJsonConverter.cs``): ``{"Range": {"min":
  ..., "max": ...}}``, ``isMinInclusive`` written only when false and ``isMaxInclusive`` only when
  true -- a lease's range is always min-inclusive, max-exclusive, so neither appears.
* azure-cosmos (Python) hands feed ranges over as ``{"Range": {"min", "max", "isMinInclusive",
  "isMaxInclusive"}}`` (``ContainerProxy.read_feed_ranges``); both forms are read.
* EPKs compare as strings, as both SDKs compare them (upper-case hex; "" the lowest, "FF" the
  end of the space).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: ``PartitionKeyInternal.MinimumInclusiveEffectivePartitionKey`` / ``MaximumExclusive...``.
MIN_EPK = ""
MAX_EPK = "FF"


@dataclass(frozen=True, order=True)
class EpkRange:
    """A min-inclusive, max-exclusive range of effective partition keys."""

    min: str
    max: str

    @classmethod
    def full(cls) -> EpkRange:
        return cls(MIN_EPK, MAX_EPK)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> EpkRange:
        """A range from a lease's ``FeedRange`` or an SDK feed range (``{"Range": {...}}``), or
        the bare ``{"min", "max"}``. ValueError for anything else (a partition key's or a range
        id's feed range included: a lease never holds one)."""
        rng = value.get("Range", value)
        if not isinstance(rng, Mapping) or "min" not in rng or "max" not in rng:
            raise ValueError(f"not an effective partition key range: {dict(value)!r}")
        if rng.get("isMinInclusive", True) is not True or rng.get("isMaxInclusive", False):
            raise ValueError(f"a lease's range is min-inclusive and max-exclusive: {dict(rng)!r}")
        return cls(str(rng["min"]), str(rng["max"]))

    def to_lease_json(self) -> dict[str, Any]:
        """``FeedRange`` as the .NET processor writes it."""
        return {"Range": {"min": self.min, "max": self.max}}

    def to_feed_range(self) -> dict[str, Any]:
        """The feed range azure-cosmos takes (``feed_range=``)."""
        return {
            "Range": {
                "min": self.min,
                "max": self.max,
                "isMinInclusive": True,
                "isMaxInclusive": False,
            }
        }

    def overlaps(self, other: EpkRange) -> bool:
        return self.min < other.max and other.min < self.max

    @property
    def token(self) -> str:
        """The lease token .NET gives an EPK lease: ``<min>-<max>``
        (``DocumentServiceLeaseManagerCosmos.CreateLeaseIfNotExistAsync(FeedRangeEpk)``)."""
        return f"{self.min}-{self.max}"

    def __str__(self) -> str:
        return f"[{self.min},{self.max})"


@dataclass(frozen=True)
class PartitionKeyRange:
    """A physical partition of the monitored container: its id and its EPK range."""

    id: str
    range: EpkRange


def overlapping(ranges: Iterable[PartitionKeyRange], scope: EpkRange) -> list[PartitionKeyRange]:
    """The ranges that overlap ``scope``, in EPK order (``TryGetOverlappingRangesAsync``)."""
    return sorted((r for r in ranges if r.range.overlaps(scope)), key=lambda r: r.range)
