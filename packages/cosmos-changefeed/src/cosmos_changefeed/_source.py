"""The feed source port: the monitored container's change feed, as the processor and the
estimator read it -- the few things they need of it, whatever holds the feed.

Shaped as the lease store port (``_store``): a small interface the processor drives, the real
adapter beside it (``CosmosFeedSource``: a container through azure-cosmos, ``_feed``), an
in-memory one for tests (``cosmos_changefeed.testing.InMemoryFeed``), and one contract suite
both are held to (``cosmos_changefeed.testing.FeedSourceContract``). What a source keeps is
what the service keeps:

* the container's resource id and its account's endpoint (a processor's lease prefix:
  ``_names.store_prefix``);
* its physical partitions (partition key ranges: an id and an EPK range each, tiling the EPK
  space), which split and merge (``ranges``; without ``force_refresh`` a source may answer from
  a cache made before a split, as the SDK's routing map does);
* one page of a lease's range (``read``): the changes after a position (the service's etag, or
  azure-cosmos's continuation holding one) or from a start (the beginning, a time, now), in the
  order of the partition's log, at most ``max_items``; the page's etag (where the next read
  starts), and the response's headers, whose session token names the partition's latest LSN
  (the estimator's lag); ``Page.gone`` when the lease's range is gone -- a version-0 lease's
  range id split or merged away, an EPK lease's range now across several partitions -- as the
  service answers 410 / 1002 (``_reading.is_gone``);
* the latest version of each document (``LatestVersion``) or every create, replace and delete
  with its metadata (``AllVersionsAndDeletes``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from cosmos_changefeed._continuation import LATEST_VERSION
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._ranges import PartitionKeyRange
from cosmos_changefeed._reading import Page, Start


class FeedSource(ABC):
    """The monitored container's change feed (sync). See the module for what each method keeps
    of the service's behaviour; ``FeedSourceContract`` holds an implementation to it."""

    @property
    @abstractmethod
    def account_endpoint(self) -> str:
        """The account's endpoint (``https://<account>.documents.azure.com:443/``)."""

    @abstractmethod
    def container_rid(self) -> str:
        """The container's resource id (``_rid``)."""

    @abstractmethod
    def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        """The live partition key ranges, in EPK order (``force_refresh``: not from a cache)."""

    @abstractmethod
    def read(
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = LATEST_VERSION,
        max_items: int | None = None,
    ) -> Page:
        """One page of ``lease``'s range from ``position`` (a lease's ``ContinuationToken``),
        or from ``start`` when there is none, of at most ``max_items`` changes (None: the
        source's page)."""

    def partition_key_paths(self) -> list[str] | None:
        """The container's partition key paths (one; several for a hierarchical key), once
        ``container_rid`` was read; None when the source cannot say (the default). Only
        ``still_set_aside`` needs them."""
        return None

    def close(self) -> None:  # noqa: B027 - nothing to close by default
        """Release what the source holds."""
