"""The lease store port: the few document operations the processor needs of a lease container,
with the service's concurrency rules, and an in-memory implementation.

Shaped as azure-eventhub's ``CheckpointStore`` (a small interface the processor drives, an
in-memory one beside it); what the processor does with the documents -- acquire, renew,
checkpoint, release, split, with .NET's retry on a conflict -- is written once over this port
(``_protocol``), so a store only has to keep documents as Cosmos DB keeps them: ``create`` refused
for an existing id (409), ``replace`` only while the etag matches (412 otherwise), each write a
new ``_etag`` and ``_ts``, a document with a ``ttl`` gone that many seconds after its last write,
and ids listed by prefix. ``cosmos_changefeed.testing`` holds both stores to one contract suite;
``CosmosLeaseStore`` is the real one (a Cosmos DB container, partitioned on ``/id`` or
``/partitionKey``).
"""

from __future__ import annotations

import json
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cosmos_changefeed import _clock

# The refusals are the container model's (``_documents``), named here as the port's.
from cosmos_changefeed._documents import ConflictError as ConflictError
from cosmos_changefeed._documents import LeaseStoreError as LeaseStoreError
from cosmos_changefeed._documents import NotFoundError as NotFoundError
from cosmos_changefeed._documents import PreconditionFailedError as PreconditionFailedError
from cosmos_changefeed._documents import json_copy
from cosmos_changefeed._memory_feed import InMemoryFeed

#: ``DocumentServiceLeaseStoreManagerBuilder``: the partition key paths a lease container may have.
ID_PATH = "/id"
PARTITION_KEY_PATH = "/partitionKey"


def check_partition_key_path(path: str) -> str:
    """``path`` if a lease container may be partitioned on it, else the .NET builder's refusal."""
    if path not in {ID_PATH, PARTITION_KEY_PATH}:
        raise ValueError(
            f"The lease container, if partitioned, must have partition key equal to "
            f"{ID_PATH} or {PARTITION_KEY_PATH}."
        )
    return path


class LeaseStore(ABC):
    """Documents of a lease container (sync). Documents are JSON objects with an ``id``; what
    is read back carries ``_etag`` and ``_ts`` as the service sets them."""

    @abstractmethod
    def partition_key_path(self) -> str:
        """``/id`` or ``/partitionKey``."""

    @abstractmethod
    def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        """Every document whose id starts with ``prefix``."""

    @abstractmethod
    def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        """The document, or None (404)."""

    @abstractmethod
    def create(self, document: Mapping[str, Any], partition_key: str) -> dict[str, Any] | None:
        """Store a new document; None when one with its id exists (409)."""

    @abstractmethod
    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        """Replace the document of ``document["id"]`` if its etag is still ``etag`` (any,
        when None). ``PreconditionFailedError`` (412), ``NotFoundError`` (404)."""

    @abstractmethod
    def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        """Delete the document (only while its etag is ``etag``, when given); False when it
        is gone or changed."""

    def expires_documents(self) -> bool | None:
        """Whether a document's ``ttl`` is honoured (a Cosmos DB container with TTL on); None:
        not known. A processor warns when it is False: a ``.lock`` left by an instance that
        died initialising the store would then stay, and every instance would wait for it."""
        return None

    def close(self) -> None:  # noqa: B027 - nothing to close by default
        """Release what the store holds (a client it made)."""


def lease_container(partition_key_path: str = ID_PATH, partitions: int = 1) -> InMemoryFeed:
    """The in-memory model of a lease container that ``InMemoryDocuments`` keeps its documents
    in: the package's one model of a Cosmos DB container (``InMemoryFeed``: etags, ``_ts``,
    409/404/412, time to live as Cosmos DB's) with TTL on and no default (``default_ttl=-1``, as
    a lease container should be: a ``ttl`` of -1 never expires, a positive one does), each
    document's latest version only (a lease written again and again does not grow it), on the
    processor's clock (``_clock``: virtual under ``VirtualClock``)."""
    return InMemoryFeed(
        partitions,
        partition_key_path=check_partition_key_path(partition_key_path),
        clock=_clock.now,
        default_ttl=-1,
        all_versions=False,
    )


class InMemoryDocuments:
    """The documents of an in-memory lease container, shared by the sync and the aio store
    (and by every processor given the same one); thread-safe. They are kept in ``feed``, an
    ``InMemoryFeed`` (``lease_container``): the same model of a container as the in-memory
    monitored feed and the outbox's test kit, so a document's etag, ``_ts`` and ``ttl`` behave
    alike in all three.

    ``state_file``: the documents are read from it when it exists, and written to it (whole,
    atomically: a temporary file renamed over it) after every change -- .NET's in-memory
    leases persisted to a stream, kept at each checkpoint rather than at the stop, so a
    process that dies restarts where its last checkpoint was. ``export`` / ``restore`` are the
    same state in memory (a JSON-ready list)."""

    def __init__(
        self,
        partition_key_path: str = ID_PATH,
        *,
        state_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.partition_key_path = check_partition_key_path(partition_key_path)
        #: The container the documents are kept in.
        self.feed = lease_container(self.partition_key_path)
        #: Held by every write: a write and its ``state_file`` saved together.
        self._lock = threading.Lock()
        self.state_file = Path(state_file) if state_file is not None else None
        if self.state_file is not None and self.state_file.exists():
            self.restore(json.loads(self.state_file.read_text(encoding="utf-8")))

    def export(self) -> list[dict[str, Any]]:
        """Every document but the transient ones (a ``ttl`` that expires: the initialisation
        lock), without the store's own fields, in id order."""
        self.feed.expire()
        return self._exported()

    def restore(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Add ``documents`` (as ``export`` gives them); ``ConflictError`` if one exists (and
        then none is added)."""
        documents = list(documents)
        with self._lock:
            self.feed.expire()
            keyed = [(self._key(d, str(d.get(self._field))), d) for d in documents]
            for (partition_key, item_id), _ in keyed:
                if self.feed.document(item_id, partition_key) is not None:
                    raise ConflictError(f"document {item_id!r} exists")
            for _, document in keyed:
                self.feed.batch([("create", exported(document), None)])

    def _exported(self) -> list[dict[str, Any]]:
        return sorted(
            (exported(doc) for doc in self.feed.documents() if not _expires(doc)),
            key=lambda doc: str(doc["id"]),
        )

    def _save(self) -> None:
        if self.state_file is None:
            return
        temporary = self.state_file.with_name(f".{self.state_file.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(self._exported(), indent=1), encoding="utf-8")
        temporary.replace(self.state_file)

    def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        self.feed.expire()
        return self.feed.documents(prefix)

    def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        self.feed.expire()
        return self.feed.document(item_id, partition_key)

    def create(self, document: Mapping[str, Any], partition_key: str) -> dict[str, Any] | None:
        self._key(document, partition_key)
        with self._lock:
            self.feed.expire()
            try:
                [written] = self.feed.batch([("create", document, None)])
            except ConflictError:
                return None
            self._save()
            return written

    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        self._key(document, partition_key)
        with self._lock:
            self.feed.expire()
            [written] = self.feed.batch([("replace", document, etag)])
            self._save()
        assert written is not None
        return written

    def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        key = {"id": item_id, self._field: partition_key}
        with self._lock:
            self.feed.expire()
            try:
                self.feed.batch([("delete", key, etag)])
            except (NotFoundError, PreconditionFailedError):
                return False
            self._save()
            return True

    @property
    def _field(self) -> str:
        return "id" if self.partition_key_path == ID_PATH else "partitionKey"

    def _key(self, document: Mapping[str, Any], partition_key: str) -> tuple[str, str]:
        item_id = str(document["id"])
        if str(document.get(self._field)) != partition_key:
            raise LeaseStoreError(
                f"document {item_id!r}: partition key {partition_key!r} is not its "
                f"{self.partition_key_path} ({document.get(self._field)!r})"
            )
        return partition_key, item_id


class InMemoryLeaseStore(LeaseStore):
    """Leases in memory: one process's instances share them (tests, a single process). Not
    shared between processes; kept across restarts in ``state_file`` when one is given
    (``InMemoryDocuments``)."""

    def __init__(
        self,
        partition_key_path: str = ID_PATH,
        *,
        documents: InMemoryDocuments | None = None,
        state_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.documents = in_memory_documents(partition_key_path, documents, state_file)

    def partition_key_path(self) -> str:
        return self.documents.partition_key_path

    def expires_documents(self) -> bool:
        return True

    def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        return self.documents.list_documents(prefix)

    def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        return self.documents.read(item_id, partition_key)

    def create(self, document: Mapping[str, Any], partition_key: str) -> dict[str, Any] | None:
        return self.documents.create(document, partition_key)

    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        return self.documents.replace(document, partition_key, etag)

    def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        return self.documents.delete(item_id, partition_key, etag)


def in_memory_documents(
    partition_key_path: str,
    documents: InMemoryDocuments | None,
    state_file: str | os.PathLike[str] | None,
) -> InMemoryDocuments:
    """An in-memory store's documents: those given, or new ones (kept in ``state_file``)."""
    if documents is None:
        return InMemoryDocuments(partition_key_path, state_file=state_file)
    if state_file is not None:
        raise ValueError("state_file: give it to the InMemoryDocuments shared, not to the store")
    return documents


def exported(document: Mapping[str, Any]) -> dict[str, Any]:
    """A stored document without the store's ``_`` fields (``_etag``, ``_ts``, ``_rid``...)."""
    return {key: json_copy(value) for key, value in document.items() if not key.startswith("_")}


def _expires(document: Mapping[str, Any]) -> bool:
    """Whether a stored document asked to expire (a ``ttl`` of some seconds: transient)."""
    ttl = document.get("ttl")
    return type(ttl) is int and ttl > 0
