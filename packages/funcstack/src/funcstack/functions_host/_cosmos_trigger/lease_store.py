"""The Cosmos DB trigger's lease store: lease documents in the change feed processor's own
schema, and every operation on them, as the .NET SDK v3 change feed processor does it.

Follows Azure/azure-cosmos-dotnet-v3, ``Microsoft.Azure.Cosmos/src/ChangeFeedProcessor/``
(3.41, the version the Cosmos DB extension 4.x references):

* ``LeaseManagement/DocumentServiceLeaseCoreEpk``: a lease is ``{"id", "version": 1,
  "LeaseToken": "<min>-<max>", "FeedRange": {"Range": {...}}, "Owner", "ContinuationToken",
  "timestamp", "properties": {}, "Mode": "Incremental feed"}`` (plus ``partitionKey`` in a lease
  container partitioned on ``/partitionKey``); a lease's time is its explicit ``timestamp``,
  else the server's ``_ts``.
* ``DocumentServiceLeaseStoreManagerOptions`` / ``DocumentServiceLeaseStoreCosmos``: the
  processor's prefix (``<leaseContainerPrefix><account host>_<database rid>_<container rid>``)
  with ``..<lease token>`` for each lease, ``.info`` once the store is initialised and
  ``.lock`` (with a ``ttl``) while one instance initialises it.
* ``DocumentServiceLeaseUpdaterCosmos``: every update is a replace with ``If-Match`` on the
  etag the instance knows; on 412 the current document is read and the update tried again on
  it (5 more times), so a change another instance made is never overwritten blindly; 404 or
  409 is a lost lease. Every update stamps ``timestamp`` (which is what renews a lease).
* ``DocumentServiceLeaseManagerCosmos``: ``AcquireAsync`` (only while the owner is the one the
  instance saw when it chose the lease), ``RenewAsync`` and ``ReleaseAsync`` (only while the
  instance owns it; release clears ``Owner``), ``CreateLeaseIfNotExistAsync`` (409: another
  instance created it); ``DocumentServiceLeaseCheckpointerCore``: a checkpoint only while the
  instance owns the lease, else ``LeaseLostException``.
* ``DocumentServiceLeaseContainerCosmos``: all leases are the documents whose id starts with
  ``<prefix>..``.
* ``Bootstrapping/PartitionSynchronizerCore``: leases are created for the ranges that have
  none (an EPK lease sharing a range's min or max covers it); a lease whose partition split is
  replaced by child leases that start where it was, with its properties, then deleted
  (``replace_with_children``; ``lease_split`` decides when).

LOCAL DIFFERENCE: the continuation is the Python SDK's change-feed continuation (a token that
names its range; each child gets the parent's cut to its own range, ``continuation``)
where .NET keeps the service's etag (each child gets the parent's as it is); leases are
EPK-range leases (version 1, as .NET writes for an EPK lease's children) where .NET first
writes one per partition key range id (version 0). The parent is deleted only if nobody wrote
it since the split began (``If-Match``), where .NET deletes it unconditionally.
"""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from azure.core import MatchConditions
from azure.cosmos.aio import ContainerProxy
from azure.cosmos.exceptions import CosmosHttpResponseError

#: ``HttpConstants.A_IMHeaderValues.IncrementalFeed``: the latest-version change feed.
INCREMENTAL_FEED = "Incremental feed"
#: ``DocumentServiceLeaseUpdaterCosmos.RetryCountOnConflict``.
RETRIES_ON_CONFLICT = 5
_UNIX = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class LeaseLostError(Exception):
    """The processor's ``LeaseLostException``: the lease is owned by another instance now, or
    gone (``gone``). The instance stops processing it; what it had not checkpointed is read
    again by the new owner."""

    def __init__(self, token: str, reason: str, *, gone: bool = False) -> None:
        super().__init__(f"lease {token}: {reason}")
        self.token = token
        self.gone = gone


@dataclass
class Lease:
    """One lease document as stored (``_etag`` and ``_ts`` included)."""

    doc: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.doc["id"])

    @property
    def token(self) -> str:
        return str(self.doc.get("LeaseToken") or self.doc.get("PartitionId") or "")

    @property
    def owner(self) -> str | None:
        owner = self.doc.get("Owner")
        return str(owner) if owner else None

    @property
    def continuation(self) -> str | None:
        token = self.doc.get("ContinuationToken")
        return str(token) if token else None

    @property
    def etag(self) -> str | None:
        etag = self.doc.get("_etag")
        return str(etag) if etag else None

    @property
    def feed_range(self) -> dict[str, Any] | None:
        """The lease's ``FeedRange`` (``feedRange`` in the leases older funcstack wrote)."""
        found = self.doc.get("FeedRange") or self.doc.get("feedRange")
        return dict(found) if isinstance(found, dict) else None

    @property
    def timestamp(self) -> dt.datetime:
        """``DocumentServiceLease.Timestamp``: the explicit ``timestamp``, else ``_ts``."""
        raw = self.doc.get("timestamp")
        if isinstance(raw, str) and raw:
            parsed = _parse_time(raw)
            if parsed is not None:
                return parsed
        return _UNIX + dt.timedelta(seconds=float(self.doc.get("_ts") or 0))

    def expired(self, expiration: float, now: dt.datetime | None = None) -> bool:
        """``EqualPartitionsBalancingStrategy.IsExpired``: not updated within ``expiration``
        seconds."""
        moment = now or dt.datetime.now(dt.UTC)
        return self.timestamp + dt.timedelta(seconds=expiration) < moment


class LeaseStore:
    """The leases of one processor (one trigger's prefix) in its lease container, for the
    instance named ``owner`` (the processor's host name)."""

    def __init__(
        self, container: ContainerProxy, prefix: str, owner: str, *, partition_key_path: str = "/id"
    ) -> None:
        if partition_key_path not in {"/id", "/partitionKey"}:
            # DocumentServiceLeaseStoreManagerBuilder's refusal, word for word
            raise ValueError(
                "The lease container, if partitioned, must have partition key "
                "equal to /id or /partitionKey."
            )
        self.container = container
        #: ``ContainerNamePrefix``: ``<leaseContainerPrefix><host>_<db rid>_<container rid>``.
        self.prefix = prefix
        self.owner = owner
        self._by_partition_key = partition_key_path == "/partitionKey"
        self._lock_etag: str | None = None

    @property
    def lease_prefix(self) -> str:
        """``GetPartitionLeasePrefix``: the prefix and ``..``."""
        return f"{self.prefix}.."

    # -- the store's marker and lock (DocumentServiceLeaseStoreCosmos) ----------------------------

    @property
    def info_id(self) -> str:
        return f"{self.prefix}.info"

    @property
    def lock_id(self) -> str:
        return f"{self.prefix}.lock"

    async def is_initialized(self) -> bool:
        try:
            await self.container.read_item(self.info_id, partition_key=self._pk(self.info_id))
        except CosmosHttpResponseError as exc:
            if exc.status_code == 404:
                return False
            raise
        return True

    async def mark_initialized(self) -> None:
        await self.container.create_item(self._with_pk({"id": self.info_id}))

    async def acquire_initialization_lock(self, lock_seconds: float) -> bool:
        """Create ``.lock`` with a ``ttl`` (the lease container has TTL on when the trigger
        created it): False when another instance holds it."""
        body = self._with_pk({"id": self.lock_id, "ttl": int(lock_seconds)})
        try:
            created = await self.container.create_item(body)
        except CosmosHttpResponseError as exc:
            if exc.status_code == 409:
                return False
            raise
        self._lock_etag = str(created.get("_etag") or "")
        return True

    async def release_initialization_lock(self) -> bool:
        try:
            await self.container.delete_item(
                self.lock_id,
                partition_key=self._pk(self.lock_id),
                etag=self._lock_etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except CosmosHttpResponseError as exc:
            if exc.status_code in {404, 412}:
                return False
            raise
        self._lock_etag = None
        return True

    # -- the leases ---------------------------------------------------------------------------

    async def all_leases(self) -> list[Lease]:
        """``GetAllLeasesAsync``: every lease of this prefix."""
        query = "SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)"
        found = [
            Lease(dict(item))
            async for item in self.container.query_items(
                query=query, parameters=[{"name": "@prefix", "value": self.lease_prefix}]
            )
        ]
        return sorted(found, key=lambda lease: lease.id)

    def new_lease(
        self,
        feed_range: dict[str, Any],
        continuation: str | None,
        *,
        properties: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A lease document for ``feed_range`` (``CreateLeaseIfNotExistAsync(FeedRangeEpk)``)."""
        token = range_token(feed_range)
        return self._with_pk(
            {
                "id": f"{self.lease_prefix}{token}",
                "version": 1,
                "LeaseToken": token,
                "FeedRange": {"Range": _range(feed_range)},
                "Owner": None,
                "ContinuationToken": continuation,
                "timestamp": _stamp(),
                "properties": dict(properties or {}),
                "Mode": INCREMENTAL_FEED,
            },
            pk=str(uuid.uuid4()),
        )

    async def create_if_missing(
        self,
        feed_range: dict[str, Any],
        continuation: str | None = None,
        *,
        properties: dict[str, Any] | None = None,
    ) -> Lease | None:
        """The new lease, or None when another instance created it first (409)."""
        try:
            created = await self.container.create_item(
                self.new_lease(feed_range, continuation, properties=properties)
            )
        except CosmosHttpResponseError as exc:
            if exc.status_code == 409:
                return None
            raise
        return Lease(dict(created))

    async def acquire(self, lease: Lease) -> Lease:
        """Take ``lease`` for this instance, as long as its owner is still the one it had when
        it was chosen (``AcquireAsync``)."""
        seen_owner = lease.owner
        properties = dict(lease.doc.get("properties") or {})

        def take(server: Lease) -> dict[str, Any]:
            if server.owner != seen_owner:
                raise LeaseLostError(lease.token, f"taken over by owner '{server.owner}'")
            return {**server.doc, "Owner": self.owner, "properties": properties}

        return await self._update(lease, take)

    async def renew(self, lease: Lease) -> Lease:
        """Stamp a lease this instance owns (``RenewAsync``): read afresh, then update."""
        current = await self._read(lease)

        def stamp(server: Lease) -> dict[str, Any]:
            if server.owner != lease.owner:
                raise LeaseLostError(lease.token, f"taken over by owner '{server.owner}'")
            return dict(server.doc)

        return await self._update(current, stamp)

    async def checkpoint(self, lease: Lease, continuation: str) -> Lease:
        """Store ``continuation`` in a lease this instance owns (``CheckpointAsync``); a lease
        another instance owns now refuses it (``LeaseLostError``)."""
        if not continuation:
            raise ValueError("continuationToken must be a non-empty string")

        def move(server: Lease) -> dict[str, Any]:
            if server.owner != lease.owner:
                raise LeaseLostError(lease.token, f"taken over by owner '{server.owner}'")
            return {**server.doc, "ContinuationToken": continuation}

        return await self._update(lease, move)

    async def release(self, lease: Lease) -> None:
        """Clear the owner of a lease this instance still owns (``ReleaseAsync``); one another
        instance took is left alone (``LeaseLostError``)."""
        try:
            current = await self._read(lease)
        except LeaseLostError:
            return

        def clear(server: Lease) -> dict[str, Any]:
            if server.owner != lease.owner:
                raise LeaseLostError(lease.token, f"already taken by '{server.owner}'")
            return {**server.doc, "Owner": None}

        await self._update(current, clear)

    async def replace_with_children(
        self,
        parent: Lease,
        children: list[dict[str, Any]],
        *,
        continuation_for: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> list[Lease]:
        """A split (``PartitionSynchronizerCore.HandlePartitionGoneAsync`` for an EPK lease,
        with ``PartitionControllerCore.HandlePartitionGoneAsync``): a lease per child range,
        each starting from ``continuation_for(its range)`` (default: the parent's
        continuation) with the parent's properties, then the parent deleted. The children
        cover the parent's range in the processor's bounds: the first starts at its min, each
        ends at its partition's max, the last at the parent's max. Returns the leases created
        here (a child another instance created first is left to it).

        The parent is deleted only if unchanged since ``parent`` was read (``If-Match``):
        ``LeaseLostError`` when another instance wrote it meanwhile (the children stay; whoever
        owns the parent meets the split too, finds them and deletes it); one already gone was
        split by another instance."""
        parent_range = parent.feed_range
        if parent_range is None or not children:
            raise ValueError(f"lease {parent.token}: no range or no child ranges to split into")
        outer = _range(parent_range)
        bounds = [outer["min"], *(_range(child)["max"] for child in children[:-1]), outer["max"]]
        properties = dict(parent.doc.get("properties") or {})
        created: list[Lease] = []
        for low, high in itertools.pairwise(bounds):
            child = {
                "Range": {"min": low, "max": high, "isMinInclusive": True, "isMaxInclusive": False}
            }
            continuation = (
                parent.continuation if continuation_for is None else continuation_for(child)
            )
            lease = await self.create_if_missing(child, continuation, properties=properties)
            if lease is not None:
                created.append(lease)
        try:
            await self.container.delete_item(
                parent.id,
                partition_key=self._pk_of(parent),
                etag=parent.etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except CosmosHttpResponseError as exc:
            if exc.status_code == 412:
                raise LeaseLostError(
                    parent.token, "written by another instance while it was split"
                ) from None
            if exc.status_code != 404:
                raise
        return created

    # -- DocumentServiceLeaseUpdaterCosmos -----------------------------------------------------

    async def _update(self, lease: Lease, mutate: Callable[[Lease], dict[str, Any]]) -> Lease:
        current = lease
        for _ in range(RETRIES_ON_CONFLICT + 1):
            body = _schema(mutate(current))
            body["timestamp"] = _stamp()
            try:
                replaced = await self.container.replace_item(
                    current.id,
                    body,
                    etag=current.etag,
                    match_condition=MatchConditions.IfNotModified,
                )
            except CosmosHttpResponseError as exc:
                if exc.status_code == 404:
                    raise LeaseLostError(lease.token, "no longer exists", gone=True) from None
                if exc.status_code == 409:
                    raise LeaseLostError(lease.token, "conflict") from None
                if exc.status_code != 412:
                    raise
                current = await self._read(current)  # someone else wrote it: again, on theirs
                continue
            return Lease(dict(replaced))
        raise LeaseLostError(lease.token, f"still conflicting after {RETRIES_ON_CONFLICT} retries")

    async def _read(self, lease: Lease) -> Lease:
        try:
            found = await self.container.read_item(lease.id, partition_key=self._pk_of(lease))
        except CosmosHttpResponseError as exc:
            if exc.status_code == 404:
                raise LeaseLostError(lease.token, "no longer exists", gone=True) from None
            raise
        return Lease(dict(found))

    def _pk(self, item_id: str) -> str:
        return item_id  # markers use their id (PartitionedBy*RequestOptionsFactory)

    def _pk_of(self, lease: Lease) -> str:
        if self._by_partition_key:
            return str(lease.doc.get("partitionKey") or lease.id)
        return lease.id

    def _with_pk(self, doc: dict[str, Any], *, pk: str | None = None) -> dict[str, Any]:
        if self._by_partition_key:
            doc["partitionKey"] = pk or str(doc["id"])
        return doc


def range_token(feed_range: dict[str, Any]) -> str:
    """``<min>-<max>``: the lease token of an EPK range (``CreateLeaseIfNotExistAsync``)."""
    rng = _range(feed_range)
    return f"{rng['min']}-{rng['max']}"


def _range(feed_range: dict[str, Any]) -> dict[str, Any]:
    rng = feed_range.get("Range", feed_range)
    if not isinstance(rng, dict) or "min" not in rng or "max" not in rng:
        raise ValueError(f"not an effective-partition-key range: {feed_range!r}")
    return {
        "min": str(rng["min"]),
        "max": str(rng["max"]),
        "isMinInclusive": bool(rng.get("isMinInclusive", True)),
        "isMaxInclusive": bool(rng.get("isMaxInclusive", False)),
    }


def _schema(doc: dict[str, Any]) -> dict[str, Any]:
    """A lease as ``DocumentServiceLeaseCoreEpk`` serialises it; the names older funcstack
    versions wrote (``feedRange``, ``mode``) moved to the processor's."""
    out = {k: v for k, v in doc.items() if not k.startswith("_")}
    if "feedRange" in out:
        out.setdefault("FeedRange", out.pop("feedRange"))
    out.pop("mode", None)
    out["Mode"] = out.get("Mode") or INCREMENTAL_FEED
    out.setdefault("properties", {})
    return out


def _stamp() -> str:
    """``DateTime.UtcNow`` as Newtonsoft.Json writes it: seven fraction digits and ``Z``."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"


def _parse_time(raw: str) -> dt.datetime | None:
    text = raw.strip().replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # Python reads at most six fraction digits
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits) :]
        text = f"{head}.{digits[:6]}{zone}"
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
