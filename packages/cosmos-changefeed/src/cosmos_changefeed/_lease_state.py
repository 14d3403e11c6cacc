"""A processor's lease state, exported and restored (.NET 3.59's in-memory leases persisted to a
stream, ``WithInMemoryLeaseContainer(MemoryStream)``, for any store): written once as flows of
``_protocol`` operations that both processors drive (``export_leases`` / ``restore_leases``).

The state is a JSON array of the processor's documents as they are stored -- its leases (the
.NET schema: ``_leases``) and ``.info`` -- without the service's own fields (``_etag``, ``_ts``,
``_rid``, ...: the store that takes them sets its own) and without ``.lock`` (an initialisation
in flight is not state). What it is for: troubleshooting (where each lease is, who holds it),
a backup, moving a processor's leases to another lease container or store (an in-memory one
and back), and restarting a one-process tool where it stopped.

A restore is refused unless every document is this processor's on this monitored container
(its id starts with the processor's prefix: the processor's name, the account's host, the
database's and the container's resource ids), so a state is never read as positions in another
container's feed; and refused while the store already holds this processor's leases (restore
into an empty store, or delete them first): a restore never overwrites a lease in use.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from cosmos_changefeed import _names
from cosmos_changefeed._protocol import Create, ListDocuments, Op, ReadContainerRid, StoreFacts
from cosmos_changefeed._store import PARTITION_KEY_PATH, exported

#: What a lease state is: the processor's documents, JSON-ready.
LeaseState = list[dict[str, Any]]


def is_state(document: Mapping[str, Any], prefix: str) -> bool:
    """Whether a document under ``prefix`` is state (a lease or ``.info``, not ``.lock``)."""
    return str(document.get("id")) != _names.lock_id(prefix)


def prefix_of(processor_name: str, endpoint: str) -> Generator[Op, Any, str]:
    rid = yield ReadContainerRid()
    return _names.store_prefix(processor_name, endpoint, rid)


def export_flow(processor_name: str, endpoint: str) -> Generator[Op, Any, LeaseState]:
    """The processor's lease state (see the module)."""
    prefix = yield from prefix_of(processor_name, endpoint)
    yield StoreFacts()
    documents = yield ListDocuments(prefix)
    return sorted(
        (exported(doc) for doc in documents if is_state(doc, prefix)), key=lambda d: str(d["id"])
    )


def restore_flow(
    processor_name: str, endpoint: str, state: Sequence[Mapping[str, Any]]
) -> Generator[Op, Any, int]:
    """Create the documents of ``state`` in an empty store; the number created."""
    prefix = yield from prefix_of(processor_name, endpoint)
    path, _ = yield StoreFacts()
    foreign = [str(doc.get("id")) for doc in state if not str(doc.get("id")).startswith(prefix)]
    if foreign:
        raise ValueError(
            f"restore_leases: {len(foreign)} document(s) are not this processor's on this "
            f"container (their ids do not start with '{prefix}': {', '.join(foreign[:3])}); a "
            "lease's position is a position in its own container's feed only"
        )
    present = [doc for doc in (yield ListDocuments(prefix)) if is_state(doc, prefix)]
    if present:
        raise ValueError(
            f"restore_leases: the lease store already holds {len(present)} document(s) of "
            f"processor '{processor_name}' on this container: restore into an empty store, or "
            "delete them first (a restore never overwrites a lease in use)"
        )
    created = 0
    for doc in state:
        body = exported(doc)
        if path == PARTITION_KEY_PATH:
            body.setdefault("partitionKey", body["id"])
        key = str(body["partitionKey"] if path == PARTITION_KEY_PATH else body["id"])
        if (yield Create(body, key)) is not None:
            created += 1
    return created
