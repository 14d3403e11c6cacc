"""A container's change feed in memory: the state behind the in-memory feed source (sync here,
aio in ``aio/_memory_feed_async.py``: thin shells over the same ``InMemoryFeed``), so a test runs
processors without a server and makes the feed split, merge and delete as it likes. Shipped in
``cosmos_changefeed.testing`` and held to the feed source contract suite, as the real adapter is.

What it keeps, as the service keeps it (``_source`` lists what the port promises):

* **Physical partitions**: partition key ranges with an id and an EPK range, tiling the EPK
  space; each has its **own LSN**, advanced by each write to it (a delete is a write). A
  document lies at its partition key's EPK: an MD5 of the key's JSON with its top two bits
  cleared -- not Azure's MurmurHash (V2), whose only property the feed needs is that a key has
  one EPK, below ``"40"``, as V2's are.
* **A split** (``split``) makes two children, the parent's lower and upper halves, with the next
  free ids; each starts at the parent's LSN and keeps the parent's documents of its half, with
  their LSNs: a continuation taken on the parent reads each child on from where it was (the
  service's children do the same). **A merge** (``merge``) of adjacent ranges makes one with the
  next free id, at the highest of their LSNs, keeping every document with its LSN: the parents'
  continuations read their own EPK ranges of it on. Until a source's ``ranges`` is asked with
  ``force_refresh``, it answers from what it saw last (the SDK's routing map does the same); a
  read decides gone from the live ranges (the service's 410).
* **Reads** (``read``): from a position (the etag, ``"<lsn>"``, or azure-cosmos's continuation
  holding one), the beginning, a time (``If-Modified-Since``: whole seconds) or now; the changes
  of the lease's range after it, in LSN order, at most ``max_items`` (default 100); the etag of
  a full page is its last change's LSN, else the partition's latest; headers with the etag, the
  session token ``<range id>:-1#<lsn>`` (the partition's latest LSN: the estimator's lag) and a
  request charge. ``LatestVersion``: the latest version of each document changed after the
  position (with ``_lsn``, ``_ts``, ``_etag``), none for a deleted one. ``AllVersionsAndDeletes``:
  each create, replace and delete, as Azure writes them -- ``{"current": <document>,
  "metadata": {"operationType", "lsn", "crts", "previousImageLSN" (a replace)}}``, a delete
  ``{"metadata": {"operationType": "delete", "lsn", "crts", "previousImageLSN",
  "timeToLiveExpired", "id", "partitionKey": {<path>: <value>}}}``.

* **Documents** (``batch``, ``document``, ``documents``): as a container keeps them -- a new
  ``_etag`` and ``_ts`` at every write (this is the one place in the package that writes them),
  409 / 404 / 412 refusals, transactional batches all or none -- and **time to live** as
  Cosmos DB's: the container's ``default_ttl`` (None: TTL off, a document's ``ttl`` ignored;
  -1, the default: on, nothing expires but what asks to; n > 0: a document without ``ttl``
  expires n seconds after its last write), a document's ``ttl`` (-1: never; n > 0: n seconds
  after its last write; absent: the container's), ``expire`` deleting by ``clock`` what ran out.
  The in-memory lease store (``InMemoryDocuments``) keeps its documents in one of these.
* **Versions**: every change is kept, for the all-versions-and-deletes mode; a feed made with
  ``all_versions=False`` keeps each document's latest change only (what the latest-version mode
  reads), so a container written again and again -- a lease container -- does not grow.

Thread-safe (one lock): sync and aio sources and the test's own writes may share one feed.
"""

from __future__ import annotations

import base64
import bisect
import datetime as dt
import hashlib
import heapq
import itertools
import json
import math
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cosmos_changefeed._continuation import (
    ALL_VERSIONS_AND_DELETES,
    LATEST_VERSION,
    raw_etag,
    sdk_token,
)
from cosmos_changefeed._documents import (
    ConflictError,
    NotFoundError,
    PreconditionFailedError,
    json_copy,
)
from cosmos_changefeed._leases import EPK_RANGE_BASED, Lease
from cosmos_changefeed._ranges import MAX_EPK, MIN_EPK, EpkRange, PartitionKeyRange
from cosmos_changefeed._reading import (
    REQUEST_CHARGE_HEADER,
    SESSION_TOKEN_HEADER,
    Page,
    Start,
    range_of,
)
from cosmos_changefeed._source import FeedSource

#: The page size when a read names none (the service's default is its own; 100 here).
DEFAULT_PAGE = 100
#: Document EPKs are 32 hex digits below this (V2's top two bits are always clear).
_EPK_SPACE = 1 << 126
_EPK_DIGITS = 32


def epk_of(partition_key: Any) -> str:
    """The in-memory feed's EPK of a partition key value (see the module)."""
    digest = hashlib.md5(json.dumps(partition_key).encode("utf-8"), usedforsecurity=False)
    return f"{int.from_bytes(digest.digest(), 'big') % _EPK_SPACE:0{_EPK_DIGITS}X}"


def _bound(epk: str) -> int:
    if epk == MIN_EPK:
        return 0
    if epk == MAX_EPK:
        return _EPK_SPACE
    return int(epk.ljust(_EPK_DIGITS, "0")[:_EPK_DIGITS], 16)


def _epk(value: int) -> str:
    if value <= 0:
        return MIN_EPK
    if value >= _EPK_SPACE:
        return MAX_EPK
    return f"{value:0{_EPK_DIGITS}X}"


@dataclass
class _Partition:
    id: str
    range: EpkRange
    lsn: int = 0


@dataclass(frozen=True)
class _Change:
    """One write: its LSN (in the partition that took it), the document after it (None: a
    delete), the one before it, and when."""

    lsn: int
    key: tuple[str, str]
    epk: str
    document: dict[str, Any] | None
    previous: dict[str, Any] | None
    at: dt.datetime
    previous_lsn: int | None = None
    ttl_expired: bool = False


class InMemoryFeed:
    """A container of ``partitions`` physical partitions (ids ``"0"`` ..), partitioned on
    ``partition_key_path``, with its change feed. Write with ``upsert`` / ``create`` /
    ``delete``; reshape with ``split`` / ``merge``; read it through ``InMemoryFeedSource``
    (sync) or ``cosmos_changefeed.testing.AsyncInMemoryFeedSource``. ``clock`` gives the time
    a write is made at (a test writes "in the past" with one of its own). ``default_ttl``: the
    container's time to live, and ``all_versions``: whether every version is kept (see the
    module)."""

    def __init__(
        self,
        partitions: int = 1,
        *,
        partition_key_path: str = "/pk",
        account_endpoint: str = "https://in-memory.documents.azure.com:443/",
        container_rid: str | None = None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        default_ttl: int | None = -1,
        all_versions: bool = True,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        if default_ttl is not None and not _valid_ttl(default_ttl):
            raise ValueError(
                f"default_ttl: None (TTL off), -1 (on, nothing expires unasked) or a number of "
                f"seconds > 0, as Cosmos DB's defaultTtl, not {default_ttl!r}"
            )
        self.default_ttl = default_ttl
        self.all_versions = all_versions
        self.partition_key_path = partition_key_path
        self.account_endpoint = account_endpoint
        self.container_rid = container_rid or base64.b64encode(uuid.uuid4().bytes[:8]).decode(
            "ascii"
        ).replace("/", "-")
        self.clock = clock
        self._lock = threading.Lock()
        step = _EPK_SPACE / partitions
        self._partitions = [
            _Partition(str(i), EpkRange(_epk(math.ceil(i * step)), _epk(math.ceil((i + 1) * step))))
            for i in range(partitions)
        ]
        self._next_id = partitions
        #: Writes counted: the order of two expiries at the same time.
        self._writes = itertools.count()
        #: The latest change of each document (partition key JSON, id), deletes included.
        self._latest: dict[tuple[str, str], _Change] = {}
        #: Per live partition: the changes of its EPK range, in LSN order (a read scans its
        #: partition's only); redistributed at a split or a merge.
        self._buckets: dict[str, list[_Change]] = {p.id: [] for p in self._partitions}
        #: The live partitions by id and their EPK minimums, in order (None: to be made again).
        self._index: tuple[dict[str, _Partition], list[str]] | None = None
        #: When each document with a time to live expires, soonest first (``expire``): an
        #: entry whose change is no longer the document's latest is stale and skipped.
        self._expiries: list[tuple[dt.datetime, int, tuple[str, str], _Change]] = []

    # -- writes ---------------------------------------------------------------------------------

    def upsert(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace ``document`` (by its id and partition key); the stored version."""
        return self._write(document, must_exist=None)

    def create(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``document``; ``ValueError`` when it exists (the service's 409)."""
        return self._write(document, must_exist=False)

    def replace(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """Replace ``document``; ``KeyError`` when it does not exist (404)."""
        return self._write(document, must_exist=True)

    def delete(self, item_id: str, partition_key: Any, *, ttl_expired: bool = False) -> None:
        """Delete a document (``ttl_expired``: as its TTL deletes it); ``KeyError`` (404)."""
        key = (json.dumps(partition_key), item_id)
        with self._lock:
            current = self._latest.get(key)
            if current is None or current.document is None:
                raise KeyError(f"no document {item_id!r} in partition key {partition_key!r}")
            self._append(key, epk_of(partition_key), None, current, ttl_expired=ttl_expired)

    # -- a container's documents: transactional batches, etags, time to live -----------------

    def batch(
        self, operations: Sequence[tuple[str, Any, str | None]], *, partition_key: Any = None
    ) -> list[dict[str, Any] | None]:
        """Write ``operations`` all or none, as a transactional batch of one partition key: one
        change (one LSN) for them all. Each is ``(kind, document, if_match)``: ``kind``
        ``create``, ``upsert``, ``replace`` or ``delete``; ``document`` the document (a delete's:
        its id and partition key); ``if_match`` the etag it must still have (None: any). The stored
        documents (None for a delete); else ``ConflictError`` (409), ``NotFoundError`` (404) or
        ``PreconditionFailedError`` (412) with ``operation_index`` set, nothing written.
        ``partition_key``: the batch's; an operation on a document of another is refused
        (``ValueError``, the service's 400) when the operations before it pass."""
        with self._lock:
            staged: dict[tuple[str, str], dict[str, Any] | None] = {}
            writes: list[tuple[tuple[str, str], str, dict[str, Any] | None]] = []
            for index, (kind, document, if_match) in enumerate(operations):
                key, epk, body = self._staged(kind, document, if_match, staged, index)
                if partition_key is not None and key[0] != json.dumps(partition_key):
                    raise ValueError("batch operations must share the partition key")
                staged[key] = body
                writes.append((key, epk, body))
            lsn = None
            stored: list[dict[str, Any] | None] = []
            for key, epk, body in writes:
                previous = self._latest.get(key)
                if previous is not None and previous.document is None:
                    previous = None
                change = self._append(key, epk, body, previous, lsn=lsn)
                lsn = change.lsn
                stored.append(json_copy(change.document) if body is not None else None)
            return stored

    def _staged(
        self,
        kind: str,
        document: Mapping[str, Any],
        if_match: str | None,
        staged: Mapping[tuple[str, str], dict[str, Any] | None],
        index: int,
    ) -> tuple[tuple[str, str], str, dict[str, Any] | None]:
        """One operation of a batch checked against the documents as the batch left them."""
        if kind not in ("create", "upsert", "replace", "delete"):
            raise ValueError(f"operation {index}: {kind!r} is no write")
        key = self._key_of(document)
        current = staged[key] if key in staged else self._current(key)
        failure: Exception | None = None
        if kind == "create" and current is not None:
            failure = ConflictError(f"document {key[1]!r} exists")
        elif kind in ("replace", "delete") and current is None:
            failure = NotFoundError(f"no document {key[1]!r}")
        elif if_match is not None and current is not None and current.get("_etag") != if_match:
            failure = PreconditionFailedError(f"document {key[1]!r} changed since {if_match}")
        if failure is not None:
            failure.operation_index = index  # type: ignore[attr-defined]
            raise failure
        epk = epk_of(json.loads(key[0]))
        if kind == "delete":
            return key, epk, None
        body = {k: json_copy(v) for k, v in document.items() if not k.startswith("_")}
        _check_ttl(body)
        return key, epk, body

    def _key_of(self, document: Mapping[str, Any]) -> tuple[str, str]:
        if not isinstance(document.get("id"), str) or not document["id"]:
            raise ValueError("a document needs an id (a non-empty string)")
        return json.dumps(self.partition_key_of(document)), str(document["id"])

    def _current(self, key: tuple[str, str]) -> dict[str, Any] | None:
        change = self._latest.get(key)
        return change.document if change is not None else None

    def document(self, item_id: str, partition_key: Any) -> dict[str, Any] | None:
        """The document of ``item_id`` and ``partition_key`` as stored (with ``_etag``,
        ``_ts``), None when there is none."""
        with self._lock:
            found = self._current((json.dumps(partition_key), item_id))
            return json_copy(found) if found is not None else None

    def documents(self, id_prefix: str = "") -> list[dict[str, Any]]:
        """Every document as stored (those whose id starts with ``id_prefix``), in the order
        they were first written."""
        with self._lock:
            return [
                json_copy(change.document)
                for (_, item_id), change in self._latest.items()
                if change.document is not None and item_id.startswith(id_prefix)
            ]

    def expire(self) -> int:
        """Delete, as Cosmos DB's time to live does (a delete with ``timeToLiveExpired``),
        every document whose time to live (its ``ttl``, else the container's ``default_ttl``)
        ran out since it was last written, by ``clock``; how many."""
        gone = 0
        with self._lock:
            now = self.clock().astimezone(dt.UTC)
            while self._expiries and self._expiries[0][0] <= now:
                _, _, key, change = heapq.heappop(self._expiries)
                if self._latest.get(key) is change:
                    self._append(key, change.epk, None, change, ttl_expired=True)
                    gone += 1
        return gone

    def latest_since(self, lsn: int = 0) -> list[dict[str, Any]]:
        """The latest version of each document written after change ``lsn`` of its partition
        (with ``_lsn``), in LSN order: a whole read of the feed from ``lsn`` (what an estimator
        of a one-partition feed counts)."""
        with self._lock:
            changes = [
                change
                for partition in self._partitions
                for change in self._changes(partition, partition.range, lsn, None, latest=True)
            ]
            changes.sort(key=lambda change: change.lsn)
            return [self._item(change, LATEST_VERSION) for change in changes]

    def _write(self, document: Mapping[str, Any], *, must_exist: bool | None) -> dict[str, Any]:
        body = {k: json_copy(v) for k, v in document.items() if not k.startswith("_")}
        if not isinstance(body.get("id"), str) or not body["id"]:
            raise ValueError("a document needs an id (a non-empty string)")
        _check_ttl(body)
        partition_key = self.partition_key_of(body)
        key = (json.dumps(partition_key), body["id"])
        with self._lock:
            current = self._latest.get(key)
            exists = current is not None and current.document is not None
            if must_exist is False and exists:
                raise ValueError(f"document {body['id']!r} exists (409)")
            if must_exist is True and not exists:
                raise KeyError(f"no document {body['id']!r} (404)")
            change = self._append(key, epk_of(partition_key), body, current if exists else None)
            assert change.document is not None
            stored: dict[str, Any] = json_copy(change.document)
            return stored

    def _append(
        self,
        key: tuple[str, str],
        epk: str,
        body: dict[str, Any] | None,
        previous: _Change | None,
        *,
        ttl_expired: bool = False,
        lsn: int | None = None,
    ) -> _Change:
        partition = self._holding(epk)
        if lsn is None:  # else a change of the transactional batch that took that LSN
            partition.lsn += 1
        at = self.clock().astimezone(dt.UTC)
        if body is not None:
            body = body | {"_ts": int(at.timestamp()), "_etag": f'"{uuid.uuid4()}"'}
        change = _Change(
            lsn=partition.lsn,
            key=key,
            epk=epk,
            document=body,
            previous=previous.document if previous is not None else None,
            at=at,
            previous_lsn=previous.lsn if previous is not None else None,
            ttl_expired=ttl_expired,
        )
        self._latest[key] = change
        bucket = self._buckets[partition.id]
        bucket.append(change)
        if not self.all_versions:
            if body is None:  # a delete: nothing of the document is read any more
                del self._latest[key]
            if len(bucket) > 2 * len(self._latest) + 64:
                bucket[:] = [c for c in bucket if self._latest.get(c.key) is c]
        ttl = self._time_to_live(body) if body is not None else None
        if ttl is not None:
            expires = at + dt.timedelta(seconds=ttl)
            heapq.heappush(self._expiries, (expires, next(self._writes), key, change))
        return change

    def _time_to_live(self, body: Mapping[str, Any]) -> int | None:
        """The seconds a document written as ``body`` lives (None: for ever), as Cosmos DB's
        time to live: its ``ttl``, else the container's; -1 never; TTL off, never."""
        if self.default_ttl is None:
            return None
        ttl = body.get("ttl")
        if ttl is None:
            ttl = self.default_ttl
        return int(ttl) if ttl > 0 else None

    def partition_key_of(self, document: Mapping[str, Any]) -> Any:
        """The value at the container's partition key path (None when absent)."""
        value: Any = document
        for part in self.partition_key_path.strip("/").split("/"):
            value = value.get(part) if isinstance(value, Mapping) else None
        return value

    # -- reshaping ------------------------------------------------------------------------------

    def split(self, range_id: str, *, at: str | None = None) -> tuple[str, str]:
        """Split a live range into its lower and upper halves (or at the EPK ``at``); the
        children's ids."""
        with self._lock:
            parent = self._live(range_id)
            low, high = _bound(parent.range.min), _bound(parent.range.max)
            middle = _epk((low + high) // 2) if at is None else at
            if not parent.range.min < middle < parent.range.max:
                raise ValueError(f"{middle!r} is not inside range {range_id}'s {parent.range}")
            children = [
                _Partition(str(self._next_id), EpkRange(parent.range.min, middle), parent.lsn),
                _Partition(str(self._next_id + 1), EpkRange(middle, parent.range.max), parent.lsn),
            ]
            self._next_id += 2
            place = self._partitions.index(parent)
            self._partitions[place : place + 1] = children
            self._reshaped([parent], children)
            return children[0].id, children[1].id

    def merge(self, first_id: str, second_id: str) -> str:
        """Merge two adjacent live ranges into one; its id."""
        with self._lock:
            first, second = sorted(
                (self._live(first_id), self._live(second_id)), key=lambda p: p.range
            )
            if first.range.max != second.range.min:
                raise ValueError(f"ranges {first_id} and {second_id} are not adjacent")
            merged = _Partition(
                str(self._next_id),
                EpkRange(first.range.min, second.range.max),
                max(first.lsn, second.lsn),
            )
            self._next_id += 1
            place = self._partitions.index(first)
            self._partitions[place : place + 2] = [merged]
            self._reshaped([first, second], [merged])
            return merged.id

    def _reshaped(self, gone: list[_Partition], made: list[_Partition]) -> None:
        """The changes of ``gone`` partitions given to the ``made`` ones, by EPK."""
        changes = sorted((c for p in gone for c in self._buckets.pop(p.id)), key=lambda c: c.lsn)
        for partition in made:
            self._buckets[partition.id] = [c for c in changes if _holds(partition.range, c.epk)]
        self._index = None

    def _indexed(self) -> tuple[dict[str, _Partition], list[str]]:
        if self._index is None:
            self._index = (
                {p.id: p for p in self._partitions},
                [p.range.min for p in self._partitions],
            )
        return self._index

    def _live(self, range_id: str) -> _Partition:
        found = self._indexed()[0].get(range_id)
        if found is None:
            raise KeyError(f"no live partition key range {range_id!r}")
        return found

    def _holding(self, epk: str) -> _Partition:
        """The live partition whose range holds ``epk``."""
        place = bisect.bisect_right(self._indexed()[1], epk) - 1
        return self._partitions[max(place, 0)]

    def _overlapping(self, scope: EpkRange) -> list[_Partition]:
        """The live partitions that overlap ``scope``, in EPK order."""
        mins = self._indexed()[1]
        place = max(bisect.bisect_right(mins, scope.min) - 1, 0)
        found: list[_Partition] = []
        for partition in self._partitions[place:]:
            if partition.range.min >= scope.max:
                break
            if partition.range.overlaps(scope):
                found.append(partition)
        return found

    # -- what a source reads --------------------------------------------------------------------

    def ranges(self) -> list[PartitionKeyRange]:
        """The live partition key ranges, in EPK order."""
        with self._lock:
            return [PartitionKeyRange(p.id, p.range) for p in self._partitions]

    def lsn(self, range_id: str) -> int:
        """A live range's latest LSN."""
        with self._lock:
            return self._live(range_id).lsn

    def continuation_token(self, mode: str = LATEST_VERSION) -> str:
        """What azure-cosmos's pull model leaves as its continuation once it has read the whole
        container to now (``query_items_change_feed``'s ``continuation_token``): each live
        range at its latest LSN -- a ``Continuation`` to start a processor from."""
        with self._lock:
            entries = [(p.range, f'"{p.lsn}"') for p in self._partitions]
        return sdk_token(self.container_rid, entries, EpkRange.full(), mode)

    def read(
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = LATEST_VERSION,
        max_items: int | None = None,
    ) -> Page:
        """One page of ``lease``'s range (see the module)."""
        if mode not in (LATEST_VERSION, ALL_VERSIONS_AND_DELETES):
            raise ValueError(f"mode: {LATEST_VERSION!r} or {ALL_VERSIONS_AND_DELETES!r}")
        if mode != LATEST_VERSION and not self.all_versions:
            raise ValueError(
                "this feed keeps each document's latest version only (all_versions=False): "
                "the AllVersionsAndDeletes mode cannot read it"
            )
        scope = range_of(lease)
        with self._lock:
            holders = self._overlapping(scope)
            if not holders or self._gone(lease, holders):
                return Page.gone_at(position)
            partition = holders[0]
            since, not_before = self._since(partition, raw_etag(position), start, mode)
            changes = self._changes(
                partition, scope, since, not_before, latest=mode == LATEST_VERSION
            )
            size = max_items or DEFAULT_PAGE
            page, full = changes[:size], len(changes) > size
            etag_lsn = page[-1].lsn if full else max(partition.lsn, since)
            items = [self._item(change, mode) for change in page]
            headers = {
                "etag": f'"{etag_lsn}"',
                SESSION_TOKEN_HEADER: f"{partition.id}:-1#{partition.lsn}",
                REQUEST_CHARGE_HEADER: "1",
                "x-ms-item-count": str(len(items)),
            }
            return Page(items, headers["etag"], headers)

    def _since(
        self, partition: _Partition, etag: str | None, start: Start, mode: str
    ) -> tuple[int, dt.datetime | None]:
        """The LSN after which a read starts, and the time no change before which is read."""
        if etag is not None:
            try:
                return int(etag.strip('"')), None
            except ValueError:
                raise ValueError(f"Invalid change feed continuation '{etag}'") from None
        if start == "Now":
            return partition.lsn, None
        if start == "Beginning":
            return 0, None
        if mode != LATEST_VERSION:
            raise ValueError("AllVersionsAndDeletes reads from now or a continuation only")
        return 0, start.astimezone(dt.UTC).replace(microsecond=0)

    def _gone(self, lease: Lease, holders: list[_Partition]) -> bool:
        """``_reading.is_gone`` on the live partitions: a version-0 lease's range id is not
        live, an EPK lease's range spans several partitions."""
        if lease.version != EPK_RANGE_BASED:
            return lease.lease_token not in self._indexed()[0]
        return len(holders) > 1

    def _changes(
        self,
        partition: _Partition,
        scope: EpkRange,
        since: int,
        not_before: dt.datetime | None,
        *,
        latest: bool,
    ) -> list[_Change]:
        """The changes of ``scope`` (within ``partition``) after LSN ``since``, in LSN order:
        every one, or (``latest``) each document's latest, deletes left out."""
        found: list[_Change] = []
        for change in reversed(self._buckets[partition.id]):
            if change.lsn <= since:
                break
            if (
                _holds(scope, change.epk)
                and (
                    not latest
                    or (change.document is not None and self._latest.get(change.key) is change)
                )
                and (not_before is None or change.at >= not_before)
            ):
                found.append(change)
        found.reverse()
        return found

    def _item(self, change: _Change, mode: str) -> dict[str, Any]:
        if mode == LATEST_VERSION:
            assert change.document is not None
            item: dict[str, Any] = json_copy(change.document)
            return item | {"_lsn": change.lsn}
        metadata: dict[str, Any] = {
            "operationType": "create",
            "lsn": change.lsn,
            "crts": int(change.at.timestamp()),
        }
        previous_lsn = change.previous_lsn
        if change.document is not None:
            if change.previous is not None:
                metadata["operationType"] = "replace"
                metadata["previousImageLSN"] = previous_lsn
            return {"current": json_copy(change.document), "metadata": metadata}
        partition_key = json.loads(change.key[0])
        metadata |= {
            "operationType": "delete",
            "previousImageLSN": previous_lsn,
            "timeToLiveExpired": change.ttl_expired,
            "id": change.key[1],
            "partitionKey": {self.partition_key_path.strip("/"): partition_key},
        }
        return {"metadata": metadata}


def _holds(rng: EpkRange, epk: str) -> bool:
    return rng.min <= epk < rng.max


def _valid_ttl(ttl: object) -> bool:
    """A time to live Cosmos DB takes: -1 or a whole number of seconds > 0."""
    return type(ttl) is int and (ttl == -1 or ttl > 0)


def _check_ttl(body: Mapping[str, Any]) -> None:
    """A document's ``ttl``, if it has one, is one Cosmos DB takes (else its 400)."""
    ttl = body.get("ttl")
    if ttl is not None and not _valid_ttl(ttl):
        raise ValueError(
            f"document {body.get('id')!r}: ttl must be -1 (never expires) or a whole number of "
            f"seconds > 0, not {ttl!r}"
        )


class InMemoryFeedSource(FeedSource):
    """``feed`` as a feed source (sync): what a processor or an estimator is given in place of
    a container. It keeps the ranges it last saw, as an SDK client keeps its routing map, until
    asked with ``force_refresh``."""

    def __init__(self, feed: InMemoryFeed | None = None) -> None:
        self.feed = feed or InMemoryFeed()
        self._seen: list[PartitionKeyRange] | None = None

    @property
    def account_endpoint(self) -> str:
        return self.feed.account_endpoint

    def container_rid(self) -> str:
        return self.feed.container_rid

    def partition_key_paths(self) -> list[str]:
        return [self.feed.partition_key_path]

    def ranges(self, *, force_refresh: bool = False) -> list[PartitionKeyRange]:
        if self._seen is None or force_refresh:
            self._seen = self.feed.ranges()
        return list(self._seen)

    def read(
        self,
        lease: Lease,
        position: str | None,
        start: Start,
        *,
        mode: str = LATEST_VERSION,
        max_items: int | None = None,
    ) -> Page:
        return self.feed.read(lease, position, start, mode=mode, max_items=max_items)
