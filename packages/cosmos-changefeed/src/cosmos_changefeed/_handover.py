"""A lease moved by balancing is handed over, never taken from under its owner. Pure; decided
once for both processors.

An instance under its fair share that finds no lease available asks for one of an instance
over its share: it writes a request into the lease (``handOver``: ``{"to": <itself>,
"requested": <time>}``, ``_leases.HandOver``), a replace conditioned on the lease's etag that
leaves every .NET field as it was -- ``Owner`` and ``timestamp`` too, so the request neither
takes the lease nor delays its expiry. The owner sees the request at its next write of the
lease (a renewal or a checkpoint: the request changed the etag, so the write is refused, the
lease read again and the write made on it, request and all). It then ends the lease's
processing as a stop does -- the batch in flight handled and checkpointed -- and releases the
lease **to the instance that asked** (``Owner`` = that instance, the request cleared), which
takes it at its next balancing round and reads on from that checkpoint. So no change is given
twice by a move, and two instances are never inside one lease's handler at once.

A request is live for the expiration interval after it was made (``live``); a lease with a live
request counts its requester as an instance (``_balancing``: the others' fair shares make room
for it) and is not asked for again by another. Only an expiry -- a crash, a pause past the
bound -- lets an instance take a lease without its owner's hand-over.

**Beside .NET.** .NET's processor drops ``handOver`` when it writes a lease (it writes only its
own fields), never hands over and never gives a lease back. A lease written last by .NET (or by a
processor that does not hand over) has no ``handOver`` member (``Lease.hands_over`` False): an
instance under its fair share takes what it misses of such leases from an owner over its share,
as .NET's balancing steals (``_balancing``) -- and as with .NET, the batch that owner has in
flight may be given again.
"""

from __future__ import annotations

import datetime as dt

from cosmos_changefeed._leases import HandOver, Lease


def live(lease: Lease, now: dt.datetime, expiration: float) -> HandOver | None:
    """The lease's request, if it was made within the expiration interval."""
    request = lease.hand_over
    if request is None or (now - request.at).total_seconds() > expiration:
        return None
    return request


def asked_by(lease: Lease, instance_name: str, now: dt.datetime, expiration: float) -> str | None:
    """The instance that asked ``instance_name`` (the owner) for ``lease``, if one did."""
    request = live(lease, now, expiration)
    if request is None or request.to.lower() == instance_name.lower():
        return None
    return request.to
