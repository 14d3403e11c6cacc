"""A partition key's order past a change set aside (``still_set_aside``), decided once for both
processors. Pure.

Without ``still_set_aside`` (the default), a change set aside leaves its partition key's later
changes to be handled as they come, while it waits in the application's store: the key's order
is broken there (the README says so). With it, a lease **holds** the key: its later changes are
set aside too, behind it (``FailedBatch.behind`` names the change they wait behind, and their
``error`` is a ``HeldBehindError``), until ``still_set_aside(change)`` says the change is no
longer in the application's store (replayed or dropped): the key's next change is then handled,
in order after it.

What a lease holds is kept in the lease itself (its ``properties``: ``HELD``, a JSON list), so it
is written with the checkpoint that moves past the change set aside, and a lease that moves to
another instance (or a restart) holds the same keys. A held change read again from an older
checkpoint (the lease's holder died before it checkpointed past it) is in the store already:
it is skipped, not set aside twice. ``still_set_aside`` is asked once per held key in a batch
that has changes of that key, before the batch is handed over.

A change's partition key is read at the monitored container's partition key paths (the feed
source says them, ``FeedSource.partition_key_paths``): a document's value there (a list of
them for a hierarchical key); in the all-versions-and-deletes mode its ``current`` document's,
or a delete's ``metadata.partitionKey``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cosmos_changefeed._leases import Lease

#: The lease property holding the keys a lease holds (a JSON list of ``SetAsideChange``'s).
HELD = "setAsideHeld"
#: No value at a path (the document does not have it): Cosmos DB's "undefined" key.
_UNDEFINED: dict[str, Any] = {}


@dataclass(frozen=True)
class SetAsideChange:
    """A change set aside whose partition key a lease holds: what ``still_set_aside`` is
    asked about, and what a change held behind it names (``FailedBatch.behind``)."""

    lease_token: str
    #: The change's partition key value (a list of them for a hierarchical key).
    partition_key: Any
    #: The change's ``id`` and ``_lsn`` (None when the change has none: a delete's ``_lsn`` is
    #: its ``metadata.lsn``).
    id: str | None
    lsn: int | None


class HeldBehindError(Exception):
    """The error of a change set aside because an earlier change of its partition key is
    (``behind``): it did not fail; it waits, in order, behind that one."""

    def __init__(self, behind: SetAsideChange) -> None:
        super().__init__(
            f"held behind change {behind.id!r} (lsn {behind.lsn}) of partition key "
            f"{json.dumps(behind.partition_key)}, set aside on lease {behind.lease_token}"
        )
        self.behind = behind


def key_of(change: dict[str, Any], paths: Sequence[str]) -> str:
    """The partition key of ``change`` at ``paths``, as JSON text (what two changes compare)."""
    document = change.get("current") if _all_versions(change) else change
    if isinstance(document, dict):
        values = [_at(document, path) for path in paths]
    else:  # a delete: its metadata names its key
        named = change.get("metadata", {}).get("partitionKey") or {}
        values = [named.get(path.strip("/").split("/")[-1], _UNDEFINED) for path in paths]
    return json.dumps(values[0] if len(values) == 1 else values, sort_keys=True)


def identity(change: dict[str, Any]) -> tuple[str | None, int | None]:
    """A change's ``id`` and LSN (what tells a held change read again)."""
    if _all_versions(change):
        metadata = change.get("metadata", {})
        current = change.get("current") or {}
        item_id = current.get("id", metadata.get("id"))
        lsn = metadata.get("lsn")
    else:
        item_id, lsn = change.get("id"), change.get("_lsn")
    return (str(item_id) if item_id is not None else None), (
        int(lsn) if isinstance(lsn, int) else None
    )


def set_aside_change(lease_token: str, change: dict[str, Any], key: str) -> SetAsideChange:
    """``change`` (of partition key ``key``, as ``key_of`` gives it) as a lease holds it."""
    item_id, lsn = identity(change)
    return SetAsideChange(lease_token, json.loads(key), item_id, lsn)


def held(lease: Lease) -> dict[str, SetAsideChange]:
    """The keys ``lease`` holds, each with the change set aside it holds it for."""
    text = lease.properties.get(HELD)
    if not text:
        return {}
    found: dict[str, SetAsideChange] = {}
    for entry in json.loads(text):
        change = SetAsideChange(lease.lease_token, entry["key"], entry["id"], entry["lsn"])
        found[json.dumps(entry["key"], sort_keys=True)] = change
    return found


def holding(lease: Lease, keys: dict[str, SetAsideChange]) -> Lease:
    """``lease`` holding ``keys`` (and no other)."""
    properties = {k: v for k, v in lease.properties.items() if k != HELD}
    if keys:
        entries = [{"key": c.partition_key, "id": c.id, "lsn": c.lsn} for c in keys.values()]
        properties[HELD] = json.dumps(entries, sort_keys=True)
    if properties == dict(lease.properties):
        return lease
    return lease.evolve(properties=properties)


@dataclass(frozen=True)
class SortedOut:
    """A batch of a lease that holds keys, sorted out: the changes to hand over, those to set
    aside behind the change their key is held for, and how many were skipped (a held change
    itself, read again)."""

    handle: list[dict[str, Any]]
    behind: list[tuple[dict[str, Any], SetAsideChange]]
    skipped: int


def sort_out(
    changes: list[dict[str, Any]], keys: dict[str, SetAsideChange], paths: Sequence[str]
) -> SortedOut:
    """``changes`` against the ``keys`` still held (those released taken out before)."""
    handle: list[dict[str, Any]] = []
    behind: list[tuple[dict[str, Any], SetAsideChange]] = []
    skipped = 0
    for change in changes:
        holder = keys.get(key_of(change, paths))
        if holder is None:
            handle.append(change)
        elif identity(change) == (holder.id, holder.lsn):
            skipped += 1
        else:
            behind.append((change, holder))
    return SortedOut(handle, behind, skipped)


def without(
    changes: list[dict[str, Any]], handled: tuple[str | None, int | None] | None
) -> list[dict[str, Any]]:
    """``changes`` without the one of identity ``handled`` (a probe handled already)."""
    if handled is None:
        return changes
    return [change for change in changes if identity(change) != handled]


def present(
    changes: list[dict[str, Any]], keys: dict[str, SetAsideChange], paths: Sequence[str]
) -> list[str]:
    """The held keys ``changes`` have changes of, in the order they first appear."""
    found: list[str] = []
    for change in changes:
        key = key_of(change, paths)
        if key in keys and key not in found:
            found.append(key)
    return found


def _all_versions(change: dict[str, Any]) -> bool:
    """Whether ``change`` is the all-versions-and-deletes mode's ``{"current", "metadata"}``."""
    metadata = change.get("metadata")
    return (
        isinstance(metadata, dict)
        and "operationType" in metadata
        and set(change) <= {"current", "metadata", "previous"}
    )


def _at(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.strip("/").split("/"):
        if not isinstance(value, dict) or part not in value:
            return _UNDEFINED
        value = value[part]
    return value
