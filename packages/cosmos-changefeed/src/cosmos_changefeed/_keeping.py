"""How an instance keeps a lease it owns, decided once for both processors: when it renews it,
when it may hand a batch over, and how it waits after a failed write. Pure.

* **Renewals** (``until_renewal``): a lease is renewed ``lease_renew_interval`` after this
  instance last wrote it -- a renewal, or a checkpoint, which stamps its ``timestamp`` too: a
  lease checkpointed more often than that is never renewed (.NET renews every interval
  whatever). A renewal that failed (not lost: the lease container refused or throttled it) is
  tried again after a quarter of the interval, not a whole one: three failures in a row would
  otherwise let it expire.
* **The expiry bound** (``fresh``): another instance may take a lease not written for
  ``lease_expiration_interval``. An instance hands a batch of a lease over only while its own
  last write of it is younger than that; past it, it first writes the lease again (a renewal,
  conditioned on its etag: refused if another instance took it meanwhile) and hands nothing
  until that succeeds. So two instances never process one lease past the expiry bound -- the
  batch in flight excepted (a handler is not interrupted). .NET goes on processing a lease
  whose renewals fail until a checkpoint is refused.
* **A failed checkpoint** (not lost: refused or throttled) is written again, after
  ``write_retry_delay``, before the next batch is handed over, until it is written or the lease
  is lost: a handled batch is never given again because its checkpoint met a 429. (0.1 and 1.0
  ended the lease's processing there and left the lease to expire: given again, 60 s later.)
"""

from __future__ import annotations

import datetime as dt

from cosmos_changefeed._leases import Lease

#: A failed renewal is tried again after this part of the renew interval.
RENEWAL_RETRY_PART = 0.25


def age(lease: Lease, now: dt.datetime) -> float:
    """Seconds since ``lease`` was last written (its ``timestamp``, else ``_ts``)."""
    return (now - lease.last_updated).total_seconds()


def until_renewal(lease: Lease, now: dt.datetime, interval: float, failures: int = 0) -> float:
    """Seconds to wait before renewing ``lease`` (0: now); ``failures``: renewals that failed
    in a row since its last write."""
    if failures:
        return interval * RENEWAL_RETRY_PART
    return max(interval - age(lease, now), 0.0)


def fresh(lease: Lease, now: dt.datetime, expiration: float) -> bool:
    """Whether no other instance may have taken ``lease`` (as this instance last wrote it)."""
    return age(lease, now) < expiration


def write_retry_delay(failures: int, first: float, most: float) -> float:
    """The wait before a failed lease write is tried again: ``first``, doubled at each failure
    in a row, at most ``most``."""
    return min(most, max(first, 0.05) * 2.0 ** min(max(failures - 1, 0), 16))
