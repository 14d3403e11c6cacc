"""How an instance keeps a lease it owns, decided once for both processors: when it renews it,
when it may hand a batch over, and how it waits after a failed write. Pure.

* **Renewals** (``until_renewal``): a lease is renewed ``lease_renew_interval`` after this
  instance last wrote it -- a renewal, or a checkpoint, which stamps its ``timestamp`` too: a
  lease checkpointed more often than that is never renewed (.NET renews every interval
  whatever). A renewal that failed (not lost: the lease container refused or throttled it) is
  tried again after a quarter of the interval (at most 5 s), not a whole one: three failures in
  a row would otherwise let it expire.
* **While the lease container refuses requests** (a write or a listing failed within the last
  ``PRESSED_FOR`` expiration intervals: throttled, most often), an instance asks less of it:

  - it renews a lease at the **last safe moment** (``pressed_interval``): late enough that a
    renewal that takes as long as the slowest of the last expiration interval -- azure-cosmos
    retrying its 429s, up to 30 s by default -- and fails, then one more that takes as long,
    both end before the lease expires, with ``CLOCK_SKEW`` to spare for the clocks of two
    instances; a failed renewal is tried again after ``PRESSED_RETRY``, not a quarter of the
    renew interval. Where the renewals take 1-5 s, that is 48.5-56.5 s after the last write at
    the default 60 s expiry (two thirds of it, 40 s, while no renewal's time is known yet;
    never sooner than the renew interval);
  - it lists the leases once per expiration interval (once per two after a round that had
    nothing to do; an instance that holds no lease tries a refused listing again each
    acquire interval: a refusal costs no request units, and it has no renewal to leave room
    for);
  - while the refusals are 429s, it writes a handled batch's checkpoint with the lease's next
    renewal rather than at once (one write per lease per renewal, whatever its traffic: a
    crash then gives again what its owner handled since that write; a stop, a hand-over or a
    release write it, in the release's own write);
  - a release refused is tried again until the lease would expire, not four times: a lease
    given back or handed over and left to expire goes unprocessed for the expiration
    interval.

  At .NET's defaults (renew 17 s, acquire 13 s, expiry 60 s) renewals ask about a third of the
  requests they ask unthrottled, listings 11-22 %, checkpoints nothing of their own. At a
  quarter of the request units a fleet needs, renewals alone then ask about 85 % of what it
  is given (a lease must be written once per expiration interval whatever): the rest is the
  balancing's.
* **The expiry bound** (``fresh``): another instance may take a lease not written for
  ``lease_expiration_interval``. An instance hands a batch of a lease over only while its own
  last write of it is younger than two thirds of that (a third is left for the batch and its
  checkpoint); past it, it first writes the lease again (a renewal, conditioned on its etag:
  refused if another instance took it meanwhile) and hands nothing until that succeeds. So two
  instances never process one lease past the expiry bound -- a handler still running a third
  of the expiration interval after it was given its batch excepted (a handler is not
  interrupted). .NET goes on processing a lease whose renewals fail until a checkpoint is
  refused.
* **A lease's start, kept** (``_start_to_keep`` in the workers): a lease without a checkpoint
  starts where this instance's ``start_from`` puts it -- "now" being this instance's start.
  Once a read of it finds nothing, its position there (the read's etag) is written in the
  lease, as a checkpoint: an instance that takes the lease later (a steal, a scale-out) starts
  there, not at its own, later "now", which would skip what was written in between. .NET
  writes nothing until a batch is handled (the same gap; a lease whose first read has changes
  is checkpointed after that batch, here as there).
* **A failed checkpoint** (not lost: refused or throttled) is written again, after
  ``write_retry_delay``, before the next batch is handed over, until it is written or the lease
  is lost: a handled batch is given again for a 429 only when the lease container refused its
  owner's checkpoint and renewals for the whole expiration interval and another instance took
  the lease meanwhile (``tests/test_fleets.py``). (0.1 and 1.0 ended the lease's processing
  there and left the lease to expire: given again, 60 s later.)
"""

from __future__ import annotations

import datetime as dt

from cosmos_changefeed._leases import Lease

#: A failed renewal is tried again after this part of the renew interval, at most this long
#: (a renewal at the last safe moment has little time left).
RENEWAL_RETRY_PART, RENEWAL_RETRY_MOST = 0.25, 5.0
#: A batch is handed over while the lease's last write is younger than this part of the
#: expiration interval.
FRESH_PART = 2 / 3
#: While the lease container refuses requests and no renewal's time is known yet, a lease is
#: renewed after this part of the expiration interval: the last moment it may hand a batch
#: over (``FRESH_PART``; ``pressed_interval``).
PRESSED_PART = FRESH_PART
#: An instance asks less of the lease container for this many expiration intervals after it
#: last refused a request (past azure-cosmos's retries): a fleet short of request units
#: refuses an instance's requests now and then, not all the time.
PRESSED_FOR = 3.0
#: The clocks of two instances may differ by this much (seconds): a lease's timestamp is its
#: writer's clock, its expiry another instance's.
CLOCK_SKEW = 1.0
#: While the lease container refuses requests, a failed renewal is tried again after this long
#: (a renewal at the last safe moment has time for two attempts, not for a wait between them).
PRESSED_RETRY = 0.5


def age(lease: Lease, now: dt.datetime) -> float:
    """Seconds since ``lease`` was last written (its ``timestamp``, else ``_ts``)."""
    return (now - lease.last_updated).total_seconds()


def until_renewal(
    lease: Lease, now: dt.datetime, interval: float, failures: int = 0, *, pressed: bool = False
) -> float:
    """Seconds to wait before renewing ``lease`` (0: now); ``failures``: renewals that failed
    in a row since its last write; ``pressed``: the lease container refuses requests (a failed
    renewal is tried again after ``PRESSED_RETRY``)."""
    if failures:
        if pressed:
            return PRESSED_RETRY
        return min(interval * RENEWAL_RETRY_PART, RENEWAL_RETRY_MOST)
    return max(interval - age(lease, now), 0.0)


def pressed_interval(
    interval: float, expiration: float, renewal_time: float | None = None
) -> float:
    """The renew interval while the lease container refuses requests: the last safe moment.
    ``renewal_time``: the longest a renewal took lately, azure-cosmos's 429 retries included
    (None: not known). A lease is renewed so that a renewal that takes that long and fails,
    then one more that takes as long, both end before the lease expires, with the clocks'
    skew to spare: ``expiration - (2 * renewal_time + PRESSED_RETRY + CLOCK_SKEW)``, at least
    the renew interval. While the renewals' time is not known, two thirds of the expiration
    interval (``PRESSED_PART``: the expiry bound past which a lease hands no batch over)."""
    if renewal_time is None:
        return max(interval, expiration * PRESSED_PART)
    margin = 2 * renewal_time + PRESSED_RETRY + CLOCK_SKEW
    return max(interval, expiration - margin)


def fresh(lease: Lease, now: dt.datetime, expiration: float) -> bool:
    """Whether a batch of ``lease`` may be handed over: this instance's last write of it is
    younger than two thirds of the expiration interval (no other instance may take it for a
    third of it more: time for the batch and its checkpoint)."""
    return age(lease, now) < expiration * FRESH_PART


def write_retry_delay(failures: int, first: float, most: float) -> float:
    """The wait before a failed lease write is tried again: ``first``, doubled at each failure
    in a row, at most ``most``."""
    return min(most, max(first, 0.05) * 2.0 ** min(max(failures - 1, 0), 16))
