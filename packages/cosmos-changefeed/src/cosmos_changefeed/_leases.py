"""A lease document in the .NET change feed processor's schema, both directions. Pure; the one
owner of the lease's stored form (sync and aio alike).

Follows Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/LeaseManagement/``:

* ``DocumentServiceLeaseCore`` (``"version": 0``, a lease per partition key range: ``LeaseToken``
  is the range's id) and ``DocumentServiceLeaseCoreEpk`` (``"version": 1``, a lease per EPK
  range: ``LeaseToken`` is ``<min>-<max>``), told apart by ``DocumentServiceLeaseConverter`` (no
  ``version``, or 0: the former). Their properties, in the order Newtonsoft.Json writes them
  (declaration order): ``id``, ``partitionKey`` (only when set), ``version``, ``LeaseToken``,
  ``PartitionId`` (version 0, only for a lease migrated from the V2 library, which had it in place
  of ``LeaseToken``), ``FeedRange`` (only when set), ``Owner``, ``ContinuationToken``,
  ``properties``, then ``timestamp`` and ``Mode`` (version 0: ``timestamp`` first; ``Mode`` only
  when set). Nulls are written (``"Owner": null``): the SDK's default serializer settings.
  ``_etag`` and ``_ts``, which .NET also writes into the body, are the service's and are not sent
  here (the service sets both on every write, whatever the body says).
* ``timestamp`` is ``DateTime.UtcNow`` at the last update, written as Newtonsoft writes a UTC
  ``DateTime`` (``yyyy-MM-ddTHH:mm:ss.FFFFFFFZ``: the fraction's trailing zeros dropped); null on
  a lease never updated, whose time is then the service's ``_ts`` (``Timestamp`` =
  ``ExplicitTimestamp ?? UnixStartTime.AddSeconds(TS)``).
* ``Mode`` is the A-IM header value of the feed it reads: ``Incremental Feed`` (latest version)
  or ``Full-Fidelity Feed`` (all versions and deletes) (``GetChangeFeedMode``); a lease without
  one is read as the former (``VerifyChangeFeedProcessorMode``).
* ``ContinuationToken`` is the service's own ``etag`` of the last change feed response the
  processor checkpointed (``ChangeFeedPartitionKeyResultSetIteratorCore``: the response's
  continuation *is* its etag), never an SDK's state.

One field is this package's own, after .NET's: ``handOver`` (``HANDOVER_FIELD``), written by
every update this processor makes -- ``null``, or a request that the owner hand the lease over,
``{"to": <instance>, "requested": <time>}`` (``HandOver``; ``_handover`` says how it is used).
.NET's processor ignores a member it does not know when it reads a lease (Newtonsoft's default)
and writes only its own when it updates one, so a lease .NET wrote last has no ``handOver``: its
owner does not hand over (``Lease.hands_over``). KEDA's scaler and the estimators read only
.NET's fields. A lease read and written back without an update keeps its form.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cosmos_changefeed._ranges import EpkRange

#: ``DocumentServiceLeaseVersion``.
PARTITION_KEY_RANGE_BASED = 0
EPK_RANGE_BASED = 1
#: ``HttpConstants.A_IMHeaderValues``: a lease's ``Mode``.
INCREMENTAL_FEED = "Incremental Feed"
FULL_FIDELITY_FEED = "Full-Fidelity Feed"

#: This package's member of a lease (see the module).
HANDOVER_FIELD = "handOver"

_UNIX = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_TIME = re.compile(
    r"^(?P<head>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d+))?(?P<zone>Z|[+-]\d{2}:\d{2})?$"
)


@dataclass(frozen=True)
class HandOver:
    """A request that a lease's owner hand it over to ``to`` (an instance under its fair
    share), made at ``requested`` (as ``timestamp`` is written)."""

    to: str
    requested: str

    @property
    def at(self) -> dt.datetime:
        """When it was requested (the epoch when the time is not one)."""
        return parse_time(self.requested) or _UNIX

    def to_json(self) -> dict[str, str]:
        return {"to": self.to, "requested": self.requested}

    @classmethod
    def from_json(cls, raw: Any) -> HandOver | None:
        if not isinstance(raw, Mapping) or not raw.get("to"):
            return None
        return cls(str(raw["to"]), str(raw.get("requested") or ""))


@dataclass(frozen=True)
class Lease:
    """One lease as stored. Immutable: every change makes a new one (``evolve``)."""

    id: str
    lease_token: str
    version: int = PARTITION_KEY_RANGE_BASED
    feed_range: EpkRange | None = None
    owner: str | None = None
    continuation: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    mode: str | None = INCREMENTAL_FEED
    #: ``timestamp`` as written: when an instance last updated it (None: never; ``_ts`` counts
    #: then). Kept as text, so a lease read and written back keeps its seven fraction digits.
    timestamp: str | None = None
    #: The service's ``_ts`` (seconds) and ``_etag`` of the stored version.
    ts: int = 0
    etag: str | None = None
    #: ``partitionKey``: the lease's partition key in a lease container on ``/partitionKey``.
    partition_key: str | None = None
    #: Read from a V2-library lease (``PartitionId``): written back with both names.
    legacy_partition_id: bool = False
    #: A ``FeedRange`` that is not an EPK range (``{"PKRangeId": ...}``, ``{"PK": ...}``, which
    #: .NET can read though its processor never writes one), kept as it was read.
    other_feed_range: Mapping[str, Any] | None = None
    #: ``handOver`` is a member of the document: this package wrote it last (its owner hands
    #: it over when asked), not .NET.
    hands_over: bool = False
    #: A request that the owner hand it over (``handOver``'s value), if any.
    hand_over: HandOver | None = None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Lease:
        """A lease from its stored document (``DocumentServiceLeaseConverter.ReadJson``)."""
        version = doc.get("version")
        epk = version == EPK_RANGE_BASED
        token = doc.get("LeaseToken")
        legacy = False
        if not epk and doc.get("PartitionId") is not None:
            token, legacy = doc["PartitionId"], True
        raw_range = doc.get("FeedRange")
        epk_range = other = None
        if isinstance(raw_range, Mapping):
            if "Range" in raw_range:
                epk_range = EpkRange.from_json(raw_range)
            else:
                other = dict(raw_range)
        return cls(
            id=str(doc["id"]),
            lease_token=str(token) if token is not None else "",
            version=EPK_RANGE_BASED if epk else PARTITION_KEY_RANGE_BASED,
            feed_range=epk_range,
            owner=_text(doc.get("Owner")),
            continuation=_text(doc.get("ContinuationToken")),
            properties={str(k): str(v) for k, v in (doc.get("properties") or {}).items()},
            mode=_text(doc.get("Mode")),
            timestamp=doc["timestamp"] if isinstance(doc.get("timestamp"), str) else None,
            ts=int(doc.get("_ts") or 0),
            etag=_text(doc.get("_etag")),
            partition_key=_text(doc.get("partitionKey")),
            legacy_partition_id=legacy,
            other_feed_range=other,
            hands_over=HANDOVER_FIELD in doc,
            hand_over=HandOver.from_json(doc.get(HANDOVER_FIELD)),
        )

    def to_document(self) -> dict[str, Any]:
        """The body .NET writes for this lease (``_etag`` and ``_ts`` left to the service)."""
        doc: dict[str, Any] = {"id": self.id}
        if self.partition_key is not None:
            doc["partitionKey"] = self.partition_key
        doc["version"] = self.version
        doc["LeaseToken"] = self.lease_token
        if self.version == PARTITION_KEY_RANGE_BASED and self.legacy_partition_id:
            doc["PartitionId"] = self.lease_token
        if self.feed_range is not None:
            doc["FeedRange"] = self.feed_range.to_lease_json()
        elif self.other_feed_range is not None:
            doc["FeedRange"] = dict(self.other_feed_range)
        doc["Owner"] = self.owner
        doc["ContinuationToken"] = self.continuation
        doc["properties"] = dict(self.properties)
        stamp = self.timestamp
        if self.version == PARTITION_KEY_RANGE_BASED:
            doc["timestamp"] = stamp
            if self.mode is not None:
                doc["Mode"] = self.mode
        else:
            if self.mode is not None:
                doc["Mode"] = self.mode
            doc["timestamp"] = stamp
        if self.hands_over or self.hand_over is not None:
            doc[HANDOVER_FIELD] = self.hand_over.to_json() if self.hand_over else None
        return doc

    @functools.cached_property
    def last_updated(self) -> dt.datetime:
        """``DocumentServiceLease.Timestamp``: the explicit ``timestamp``, else ``_ts`` (read
        once: a lease is immutable)."""
        explicit = parse_time(self.timestamp)
        if explicit is not None:
            return explicit
        return _UNIX + dt.timedelta(seconds=self.ts)

    def is_expired(self, expiration: float, now: dt.datetime) -> bool:
        """``EqualPartitionsBalancingStrategy.IsExpired``: not updated for ``expiration`` s."""
        return self.last_updated + dt.timedelta(seconds=expiration) < now

    def evolve(self, **changes: Any) -> Lease:
        return dataclasses.replace(self, **changes)

    def __str__(self) -> str:
        return f"lease {self.lease_token} (owner {self.owner or '-'})"


#: Leases parsed from their documents, by (id, ``_etag``): a document's etag changes at every
#: write, so a version is parsed once in a process however many instances list it.
_PARSED: dict[tuple[str, str], Lease] = {}
_PARSED_MOST = 65_536


def parsed(doc: Mapping[str, Any]) -> Lease:
    """``Lease.from_document(doc)``, once per version of a document (its ``_etag``)."""
    etag = doc.get("_etag")
    if not etag:
        return Lease.from_document(doc)
    key = (str(doc.get("id")), str(etag))
    lease = _PARSED.get(key)
    if lease is None:
        lease = Lease.from_document(doc)
        if len(_PARSED) >= _PARSED_MOST:
            _PARSED.clear()
        _PARSED[key] = lease
    return lease


def new_range_lease(
    lease_id: str,
    range_id: str,
    feed_range: EpkRange,
    continuation: str | None,
    *,
    mode: str,
    partition_key: str | None,
) -> Lease:
    """``CreateLeaseIfNotExistAsync(PartitionKeyRange, continuation)``: version 0, the range's id
    as its token, its EPK range as ``FeedRange``."""
    return Lease(
        id=lease_id,
        lease_token=range_id,
        version=PARTITION_KEY_RANGE_BASED,
        feed_range=feed_range,
        continuation=continuation,
        mode=mode,
        partition_key=partition_key,
    )


def new_epk_lease(
    lease_id: str,
    feed_range: EpkRange,
    continuation: str | None,
    *,
    mode: str,
    partition_key: str | None,
) -> Lease:
    """``CreateLeaseIfNotExistAsync(FeedRangeEpk, continuation)``: version 1, ``<min>-<max>``."""
    return Lease(
        id=lease_id,
        lease_token=feed_range.token,
        version=EPK_RANGE_BASED,
        feed_range=feed_range,
        continuation=continuation,
        mode=mode,
        partition_key=partition_key,
    )


def format_time(moment: dt.datetime) -> str:
    """A UTC time as Newtonsoft.Json writes a ``DateTimeKind.Utc`` ``DateTime``:
    ``yyyy-MM-ddTHH:mm:ss.FFFFFFFZ`` (up to seven fraction digits, trailing zeros dropped, no
    dot for a whole second)."""
    utc = moment.astimezone(dt.UTC)
    fraction = f"{utc.microsecond:06d}0".rstrip("0")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def parse_time(raw: Any) -> dt.datetime | None:
    """A ``timestamp`` as Newtonsoft reads an ISO 8601 date (up to seven fraction digits; ``Z``,
    an offset, or none: read as UTC); None for null or what is not such a date."""
    if not isinstance(raw, str):
        return None
    found = _TIME.match(raw.strip())
    if found is None:
        return None
    fraction = (found["fraction"] or "")[:6].ljust(6, "0")
    zone = found["zone"] or "Z"
    text = f"{found['head']}.{fraction}{'+00:00' if zone == 'Z' else zone}"
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC)


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None
