"""The lease protocol, written once: every operation on a processor's leases as a generator of
store operations, which the sync and the aio processor drive (httpx's ``Auth.auth_flow`` habit:
the logic yields what it needs done and is sent the result, or has the store's error thrown in).

Follows Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/``:

* ``LeaseManagement/DocumentServiceLeaseUpdaterCosmos.UpdateLeaseAsync``: an update is applied to
  the lease as last read, stamped ``timestamp`` = now, and written with ``If-Match`` on its etag;
  412: the current document is read and the update applied to it again, up to 5 retries, then
  the lease is lost; 404 on the write or the read: lost and gone; 409: lost.
* ``DocumentServiceLeaseManagerCosmos``: ``AcquireAsync`` (refused when the owner is no longer the
  one seen when the lease was chosen; sets ``Owner`` and the lease's ``properties``; a version-0
  lease without ``FeedRange`` gets its range's), ``RenewAsync`` (refused when another instance
  owns it; .NET reads the lease first, here the replace is conditioned on this instance's own
  last write: one request, not two) and ``ReleaseAsync`` (read first; refused when another
  instance owns it; clears ``Owner``; a release of a deleted lease is done),
  ``CreateLeaseIfNotExistAsync`` (409: another instance created it first), ``DeleteAsync``;
  ``DocumentServiceLeaseCheckpointerCore.CheckpointAsync`` (refused when another instance owns
  it; an empty continuation refused); the lease container's partition key per
  ``RequestOptionsFactory``: the id, or the lease's ``partitionKey`` (which a new lease gets
  equal to its id: ``GetLeasePartitionKeyValue``, the .NET default since 3.56).
* ``LeaseManagement/DocumentServiceLeaseContainerCosmos``: a processor's leases are the documents
  whose id starts with ``<prefix>..``; its own, those whose owner is its name (ignoring case).
* ``LeaseManagement/DocumentServiceLeaseStoreCosmos`` + ``Bootstrapping/BootstrapperCore``: until
  ``<prefix>.info`` exists, the instance that creates ``<prefix>.lock`` (``ttl`` 30 s) creates the
  missing leases and ``.info``, then deletes the lock (``If-Match``); the others sleep 15 s and
  try again -- looking at ``.info`` every half second meanwhile, so they go on as soon as it is
  there (.NET looks once after the 15 s: a read, no other difference). An error deletes the
  lock too (.NET's ``finally``); a flow closed while it holds the lock (its driver cancelled or
  interrupted) yields nothing more and leaves the lock to expire.
* ``LeaseManager.ChangeFeedModeSwitchingCheck``: a processor refuses leases of the other mode.
* Not .NET's: a request that a lease's owner hand it over (``request``, ``_handover``), which
  its owner honours when it releases the lease (``release``: to the instance that asked). Every
  update writes ``handOver`` (null, or the request it keeps): the mark of an owner that hands
  over (``hands_over``; .NET's updates write only .NET's fields).
* ``FeedManagement/PartitionControllerCore.HandlePartitionGoneAsync`` with
  ``Bootstrapping/PartitionSynchronizerCore.HandlePartitionGoneAsync``: the gone lease's
  children (``_splits.plan_gone``) from its last continuation with its properties, then the
  parent deleted (``DeleteAsync``). One thing more here: before anything is created the parent is
  renewed, so an instance that lost it meanwhile leaves the split to its owner.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from cosmos_changefeed import _clock, _handover, _names
from cosmos_changefeed._continuation import LATEST_VERSION
from cosmos_changefeed._leases import (
    FULL_FIDELITY_FEED,
    INCREMENTAL_FEED,
    HandOver,
    Lease,
    format_time,
    new_epk_lease,
    new_range_lease,
    parsed,
)
from cosmos_changefeed._ranges import EpkRange, PartitionKeyRange, overlapping
from cosmos_changefeed._reading import Start, is_gone
from cosmos_changefeed._splits import ChildLease, missing_ranges, plan_gone
from cosmos_changefeed._store import (
    PARTITION_KEY_PATH,
    ConflictError,
    NotFoundError,
    PreconditionFailedError,
)

#: ``DocumentServiceLeaseUpdaterCosmos.RetryCountOnConflict``.
RETRIES_ON_CONFLICT = 5
#: ``BootstrapperCore.DefaultLockTime`` / ``DefaultSleepTime`` (seconds).
INIT_LOCK_SECONDS = 30
INIT_SLEEP_SECONDS = 15.0
#: While another instance initialises the store, ``.info`` is looked at this often (.NET looks
#: once per sleep): the lock is tried again at .NET's pace, the wait ends as soon as it is done.
INIT_POLL_SECONDS = 0.5


class LeaseLostError(Exception):
    """The processor's ``LeaseLostException``: another instance owns the lease now, or it is
    gone (deleted: ``gone``). The instance stops processing it; what it did not checkpoint is
    read again by the next owner."""

    def __init__(self, lease_token: str, reason: str, *, gone: bool = False) -> None:
        super().__init__(f"lease {lease_token}: {reason}")
        self.lease_token = lease_token
        self.gone = gone


class FeedRangeGoneError(Exception):
    """The processor's ``FeedRangeGoneException``: the lease's range split (or, for a version-0
    lease, merged); ``last_continuation`` is where its replacements start."""

    def __init__(self, lease_token: str, last_continuation: str | None) -> None:
        super().__init__(f"lease {lease_token}: its range is gone")
        self.last_continuation = last_continuation


# -- what a flow asks its driver to do --------------------------------------------------------


@dataclass(frozen=True)
class ListDocuments:
    prefix: str


@dataclass(frozen=True)
class Read:
    item_id: str
    partition_key: str


@dataclass(frozen=True)
class Create:
    document: dict[str, Any]
    partition_key: str


@dataclass(frozen=True)
class Replace:
    document: dict[str, Any]
    partition_key: str
    etag: str | None


@dataclass(frozen=True)
class Delete:
    item_id: str
    partition_key: str
    etag: str | None = None


@dataclass(frozen=True)
class ReadRanges:
    """The monitored container's partition key ranges (``force_refresh``: not from a cache)."""

    force_refresh: bool = False


@dataclass(frozen=True)
class ReadPage:
    """One page of ``lease``'s range of the monitored container, from ``position`` (or
    ``start``), of at most ``max_items`` changes (None: the source's page), in ``mode``: a
    ``_reading.Page``."""

    lease: Lease
    position: str | None
    start: Start
    max_items: int | None = None
    mode: str = LATEST_VERSION


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class ReadContainerRid:
    """The monitored container's resource id (its properties read: ``MissingResourceError``
    when it or its database does not exist)."""


@dataclass(frozen=True)
class StoreFacts:
    """What a lease store says of itself: ``partition_key_path()`` and ``expires_documents()``
    (a Cosmos DB store reads its container's properties: ``MissingResourceError``)."""


Op: TypeAlias = (
    ListDocuments
    | Read
    | Create
    | Replace
    | Delete
    | ReadRanges
    | ReadPage
    | Sleep
    | ReadContainerRid
    | StoreFacts
)
Flow: TypeAlias = Generator[Op, Any, Any]


def mode_value(mode: str) -> str:
    """A lease's ``Mode`` for the processor's change feed mode."""
    return FULL_FIDELITY_FEED if mode == "AllVersionsAndDeletes" else INCREMENTAL_FEED


class LeaseManager:
    """One processor instance's view of its leases: the flows that read and change them."""

    def __init__(
        self,
        prefix: str,
        instance_name: str,
        *,
        partition_key_path: str,
        mode: str,
        clock: Callable[[], dt.datetime] = _clock.now,
        expiration: float = 60.0,
    ) -> None:
        self.prefix = prefix
        self.instance_name = instance_name
        self.mode = mode_value(mode)
        self._by_partition_key = partition_key_path == PARTITION_KEY_PATH
        self._clock = clock
        self._lock_etag: str | None = None
        #: Read the lease before each renewal, as .NET does (``SimulatedFleet(dotnet=True)``).
        self.read_before_renew = False
        #: Hand a lease over when asked, and say so in every update (``handOver``); False: as
        #: .NET, whose updates write only its own fields (``SimulatedFleet(dotnet=True)``).
        self.hands_over = True
        #: The lease expiration interval: a hand-over request lives this long.
        self.expiration = expiration
        #: Leases of 1.0's prefix this instance adopted when it initialised the store.
        self.adopted = 0

    @property
    def lease_prefix(self) -> str:
        return f"{self.prefix}{_names.LEASE_SEPARATOR}"

    def now(self) -> dt.datetime:
        return self._clock()

    # -- reading ------------------------------------------------------------------------------

    def all_leases(self) -> Flow:
        """``GetAllLeasesAsync``: every lease of the processor, in the store's order."""
        docs = yield ListDocuments(self.lease_prefix)
        return [parsed(doc) for doc in docs]

    def owned_leases(self) -> Flow:
        """``GetOwnedLeasesAsync``."""
        return self.mine((yield from self.all_leases()))

    def mine(self, leases: Sequence[Lease]) -> list[Lease]:
        """The leases this instance owns (its name, ignoring case), in their order."""
        name = self.instance_name.lower()
        return [lease for lease in leases if (lease.owner or "").lower() == name]

    def check_mode(self, leases: Sequence[Lease]) -> None:
        """``ChangeFeedModeSwitchingCheck``: ValueError when the leases are of the other mode."""
        if not leases:
            return
        theirs = leases[0].mode or INCREMENTAL_FEED
        if theirs.lower() != self.mode.lower():
            raise ValueError(f"Switching ChangeFeedMode {theirs} to {self.mode} is not allowed.")

    # -- updates ------------------------------------------------------------------------------

    def acquire(self, lease: Lease, ranges: Sequence[PartitionKeyRange] = ()) -> Flow:
        """``AcquireAsync``: ``lease`` for this instance, while its owner is the one seen --
        and, for a lease taken as expired, while it still is: an owner that renewed it since
        it was listed keeps it (.NET takes it, the owner learning of it at its next write)."""
        seen_owner = lease.owner
        expired = (
            self.hands_over
            and seen_owner is not None
            and lease.is_expired(self.expiration, self.now())
        )
        if lease.feed_range is None:
            found = next((r for r in ranges if r.id == lease.lease_token), None)
            if found is not None:
                lease = lease.evolve(feed_range=found.range)
        feed_range, properties = lease.feed_range, dict(lease.properties)

        def take(server: Lease) -> Lease:
            if server.owner != seen_owner:
                raise LeaseLostError(lease.lease_token, f"taken over by owner '{server.owner}'")
            if expired and not server.is_expired(self.expiration, self.now()):
                raise LeaseLostError(lease.lease_token, f"renewed by '{server.owner}' since")
            return server.evolve(
                owner=self.instance_name,
                properties=properties,
                feed_range=server.feed_range or feed_range,
                hand_over=None,
            )

        return (yield from self._update(lease, take))

    def renew(self, lease: Lease) -> Flow:
        """``RenewAsync``: the lease stamped, while this instance owns it -- one request: a
        replace conditioned on the etag of this instance's own last write (``lease``), which
        is the stored one unless another instance wrote since; then (412) it is read afresh
        and stamped, or lost. .NET reads the lease before every renewal, as its renewer does
        not see the checkpoints' writes: two requests."""

        def stamp(server: Lease) -> Lease:
            if server.owner != lease.owner:
                raise LeaseLostError(lease.lease_token, f"taken over by owner '{server.owner}'")
            return server

        current = (yield from self._reread(lease)) if self.read_before_renew else lease
        return (yield from self._update(current, stamp))

    def release(self, lease: Lease, continuation: str | None = None) -> Flow:
        """``ReleaseAsync``: ``Owner`` cleared, unless another instance owns it now
        (``LeaseLostError``); a lease already deleted is released (None). A lease another
        instance asked for (a live request, ``_handover``) is released to it: ``Owner`` that
        instance. ``continuation``: a checkpoint written by the same write (what was handled
        and not yet checkpointed: the next owner reads on from there, or the lease stays).
        The lease as written."""
        try:
            current = yield from self._reread(lease)
        except LeaseLostError as lost:
            if lost.gone:
                return None
            raise

        def clear(server: Lease) -> Lease:
            if server.owner != lease.owner:
                raise LeaseLostError(lease.lease_token, f"already taken by '{server.owner}'")
            asker = None
            if self.hands_over:
                asker = _handover.asked_by(server, self.instance_name, self.now(), self.expiration)
            return server.evolve(
                owner=asker, hand_over=None, continuation=continuation or server.continuation
            )

        return (yield from self._update(current, clear))

    def checkpoint(self, lease: Lease, continuation: str) -> Flow:
        """``CheckpointAsync``: ``continuation`` stored while this instance owns the lease."""
        if not continuation:
            raise ValueError("continuationToken must be a non-empty string")

        def move(server: Lease) -> Lease:
            if server.owner != lease.owner:
                raise LeaseLostError(lease.lease_token, f"taken over by owner '{server.owner}'")
            return server.evolve(continuation=continuation)

        return (yield from self._update(lease, move))

    def request(self, lease: Lease) -> Flow:
        """Ask the owner of ``lease`` to hand it over to this instance (``_handover``): the
        request written, nothing else changed (``timestamp`` kept: the lease's expiry is its
        owner's); ``LeaseLostError`` when the lease moved since it was listed or another
        instance asked first."""
        seen_owner = lease.owner
        request = HandOver(self.instance_name, format_time(self.now()))

        def ask(server: Lease) -> Lease:
            if server.owner != seen_owner:
                raise LeaseLostError(lease.lease_token, f"taken over by owner '{server.owner}'")
            other = _handover.live(server, self.now(), self.expiration)
            if other is not None and other.to != self.instance_name:
                raise LeaseLostError(lease.lease_token, f"already asked for by '{other.to}'")
            return server.evolve(hand_over=request)

        return (yield from self._update(lease, ask, stamp=False))

    def delete(self, lease: Lease) -> Flow:
        """``DeleteAsync``: unconditional; a lease already gone is deleted."""
        yield Delete(lease.id, self._pk(lease))

    def _update(
        self, lease: Lease, mutate: Callable[[Lease], Lease], *, stamp: bool = True
    ) -> Flow:
        current = lease
        for _ in range(RETRIES_ON_CONFLICT + 1):
            updated = mutate(current)
            if stamp:
                updated = updated.evolve(timestamp=format_time(self.now()))
            if self.hands_over:
                updated = updated.evolve(hands_over=True)
            else:  # .NET's update: its own fields only
                updated = updated.evolve(hands_over=False, hand_over=None)
            try:
                doc = yield Replace(updated.to_document(), self._pk(updated), current.etag)
            except NotFoundError:
                raise LeaseLostError(lease.lease_token, "no longer exists", gone=True) from None
            except ConflictError:
                raise LeaseLostError(lease.lease_token, "conflict on update") from None
            except PreconditionFailedError:
                current = yield from self._reread(current)
                continue
            return Lease.from_document(doc)
        raise LeaseLostError(
            lease.lease_token, f"still changed by others after {RETRIES_ON_CONFLICT} retries"
        )

    def _reread(self, lease: Lease) -> Flow:
        doc = yield Read(lease.id, self._pk(lease))
        if doc is None:
            raise LeaseLostError(lease.lease_token, "no longer exists", gone=True)
        return Lease.from_document(doc)

    # -- creation -----------------------------------------------------------------------------

    def create_lease(
        self,
        child: ChildLease,
        continuation: str | None,
        properties: dict[str, str] | None = None,
    ) -> Flow:
        """``CreateLeaseIfNotExistAsync``: the new lease, or None when it exists."""
        if child.range_id is not None:
            token = child.range_id
            lease = new_range_lease(
                _names.lease_id(self.prefix, token),
                token,
                child.feed_range,
                continuation,
                mode=self.mode,
                partition_key=None,
            )
        else:
            lease = new_epk_lease(
                _names.lease_id(self.prefix, child.feed_range.token),
                child.feed_range,
                continuation,
                mode=self.mode,
                partition_key=None,
            )
        if self._by_partition_key:
            lease = lease.evolve(partition_key=lease.id)
        if properties:
            lease = lease.evolve(properties=dict(properties))
        doc = yield Create(lease.to_document(), self._pk(lease))
        return Lease.from_document(doc) if doc is not None else None

    def initialize(self, adopt: str | None = None) -> Flow:
        """``BootstrapperCore.InitializeAsync``: the store initialised (by this instance or
        another); returns the number of leases this instance created. ``adopt``: the prefix
        cosmos-changefeed 1.0 wrote the leases under (``_names.legacy_prefix``): an instance
        that initialises a store holding none of this prefix's copies those first (``adopted``:
        how many), so that they go on from their checkpoints."""
        created = 0
        info = _names.info_id(self.prefix)
        while (yield Read(info, info)) is None:
            lock = _names.lock_id(self.prefix)
            body = self._marker(lock) | {"ttl": INIT_LOCK_SECONDS}
            locked = yield Create(body, lock)
            if locked is None:
                waited = 0.0
                while waited < INIT_SLEEP_SECONDS and (yield Read(info, info)) is None:
                    yield Sleep(INIT_POLL_SECONDS)
                    waited += INIT_POLL_SECONDS
                continue
            self._lock_etag = locked.get("_etag")
            try:
                ranges = yield ReadRanges(force_refresh=False)
                leases = yield from self.all_leases()
                if adopt is not None and not leases:
                    self.adopted = yield from self._adopt(adopt)
                    if self.adopted:  # else the store is as listed: not listed again
                        leases = yield from self.all_leases()
                for missing in missing_ranges(ranges, leases):
                    child = ChildLease(missing.range, missing.id)
                    if (yield from self.create_lease(child, None)) is not None:
                        created += 1
                marked = yield Create(self._marker(info), info)
                if marked is None:
                    pass  # another instance marked it meanwhile (its lock had expired)
            except Exception as error:
                yield from self._unlock(lock, error)
                raise
            except BaseException:
                # Closed (GeneratorExit: its driver was cancelled or interrupted): a closed flow
                # yields nothing more, so the lock is left to expire (its ttl).
                self._lock_etag = None
                raise
            yield from self._unlock(lock)
            break
        return created

    def _adopt(self, old_prefix: str) -> Flow:
        """Copy the leases under ``old_prefix`` to this prefix (owner cleared, the rest kept);
        the number created. The old documents are left (an instance of 1.0 may still run)."""
        docs = yield ListDocuments(f"{old_prefix}{_names.LEASE_SEPARATOR}")
        count = 0
        for doc in docs:
            if not doc.get("LeaseToken") and not doc.get("PartitionId"):
                continue
            old = Lease.from_document(doc)
            lease = old.evolve(
                id=_names.lease_id(self.prefix, old.lease_token),
                owner=None,
                etag=None,
                ts=0,
                partition_key=None,
            )
            if self._by_partition_key:
                lease = lease.evolve(partition_key=lease.id)
            if (yield Create(lease.to_document(), self._pk(lease))) is not None:
                count += 1
        return count

    def _unlock(self, lock: str, error: Exception | None = None) -> Flow:
        """The initialisation lock deleted (``If-Match`` its etag). After ``error`` (the
        initialisation failed), a failed delete is a note on ``error``, which is raised as it
        was: the lock then expires after ``INIT_LOCK_SECONDS``."""
        etag, self._lock_etag = self._lock_etag, None
        try:
            yield Delete(lock, lock, etag)
        except Exception as refused:
            if error is None:
                raise
            error.add_note(
                f"{lock} was not deleted ({type(refused).__name__}: {refused}); it expires "
                f"after its ttl, {INIT_LOCK_SECONDS} s"
            )

    def _marker(self, item_id: str) -> dict[str, Any]:
        body: dict[str, Any] = {"id": item_id}
        if self._by_partition_key:
            body["partitionKey"] = item_id
        return body

    # -- a gone range -------------------------------------------------------------------------

    def handle_gone(self, lease: Lease, last_continuation: str | None) -> Flow:
        """Replace ``lease``, whose range split or merged, as ``HandlePartitionGoneAsync``:
        returns (the leases created here, the lease itself when it stays -- a redirect). The
        children start from ``last_continuation``. ``LeaseLostError`` when this instance does
        not own the lease any more (its owner replaces it)."""
        parent = yield from self.renew(lease)
        if lease.feed_range is None:
            raise LeaseLostError(lease.lease_token, "has no FeedRange to split", gone=True)
        ranges = yield ReadRanges(force_refresh=True)
        if not is_gone(parent, ranges):  # the range is live after all: nothing to replace
            return [], parent.evolve(continuation=last_continuation or parent.continuation)
        plan = plan_gone(parent, overlapping(ranges, lease.feed_range))
        created: list[Lease] = []
        for child in plan.children:
            new = yield from self.create_lease(child, last_continuation, dict(parent.properties))
            if new is not None:
                created.append(new)
        if not plan.delete_parent:
            return created, parent.evolve(continuation=last_continuation or parent.continuation)
        yield from self.delete(parent)
        return created, None

    # -- the lease container's partition key (RequestOptionsFactory) ------------------------

    def _pk(self, lease: Lease) -> str:
        if self._by_partition_key:
            return lease.partition_key or lease.id
        return lease.id


def range_of(lease: Lease) -> EpkRange:
    """The EPK range a lease reads (ValueError when it has none)."""
    if lease.feed_range is None:
        raise ValueError(f"lease {lease.lease_token} has no FeedRange")
    return lease.feed_range
