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

import copy
import json
import os
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cosmos_changefeed import _clock

#: ``DocumentServiceLeaseStoreManagerBuilder``: the partition key paths a lease container may have.
ID_PATH = "/id"
PARTITION_KEY_PATH = "/partitionKey"


class LeaseStoreError(Exception):
    """A lease store operation the service refused."""


class NotFoundError(LeaseStoreError):
    """404: no such document."""


class PreconditionFailedError(LeaseStoreError):
    """412: the document changed since the etag the write was conditioned on."""


class ConflictError(LeaseStoreError):
    """409: a document with that id exists."""


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


class InMemoryDocuments:
    """The documents of an in-memory lease container, shared by the sync and the aio store
    (and by every processor given the same one); thread-safe.

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
        self._lock = threading.Lock()
        self._docs: dict[tuple[str, str], dict[str, Any]] = {}
        #: The documents with a ``ttl``: when each expires (``_expire`` looks at these only).
        self._expiring: dict[tuple[str, str], float] = {}
        self.state_file = Path(state_file) if state_file is not None else None
        if self.state_file is not None and self.state_file.exists():
            self.restore(json.loads(self.state_file.read_text(encoding="utf-8")))

    def export(self) -> list[dict[str, Any]]:
        """Every document but the transient ones (a ``ttl``: the initialisation lock), without
        the store's own fields, in id order."""
        with self._lock:
            self._expire()
            return self._exported()

    def restore(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Add ``documents`` (as ``export`` gives them); ``ConflictError`` if one exists."""
        with self._lock:
            for document in documents:
                field = "id" if self.partition_key_path == ID_PATH else "partitionKey"
                key = self._key(document, str(document.get(field)))
                if key in self._docs:
                    raise ConflictError(f"document {key[1]!r} exists")
                self._write(key, exported(document))

    def _exported(self) -> list[dict[str, Any]]:
        return sorted(
            (exported(doc) for doc in self._docs.values() if "ttl" not in doc),
            key=lambda doc: str(doc["id"]),
        )

    def _save(self) -> None:
        if self.state_file is None:
            return
        temporary = self.state_file.with_name(f".{self.state_file.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(self._exported(), indent=1), encoding="utf-8")
        temporary.replace(self.state_file)

    def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        with self._lock:
            self._expire()
            return [_copy(doc) for doc in self._docs.values() if str(doc["id"]).startswith(prefix)]

    def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        with self._lock:
            self._expire()
            found = self._docs.get((partition_key, item_id))
            return _copy(found) if found is not None else None

    def create(self, document: Mapping[str, Any], partition_key: str) -> dict[str, Any] | None:
        key = self._key(document, partition_key)
        with self._lock:
            self._expire()
            if key in self._docs:
                return None
            written = self._write(key, document)
            self._save()
            return written

    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        key = self._key(document, partition_key)
        with self._lock:
            self._expire()
            current = self._docs.get(key)
            if current is None:
                raise NotFoundError(f"no document {key[1]!r}")
            if etag is not None and current["_etag"] != etag:
                raise PreconditionFailedError(f"document {key[1]!r} changed since {etag}")
            written = self._write(key, document)
            self._save()
            return written

    def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        with self._lock:
            self._expire()
            current = self._docs.get((partition_key, item_id))
            if current is None or (etag is not None and current["_etag"] != etag):
                return False
            del self._docs[(partition_key, item_id)]
            self._save()
            return True

    def _key(self, document: Mapping[str, Any], partition_key: str) -> tuple[str, str]:
        item_id = str(document["id"])
        field = "id" if self.partition_key_path == ID_PATH else "partitionKey"
        if str(document.get(field)) != partition_key:
            raise LeaseStoreError(
                f"document {item_id!r}: partition key {partition_key!r} is not its "
                f"{self.partition_key_path} ({document.get(field)!r})"
            )
        return partition_key, item_id

    def _write(self, key: tuple[str, str], document: Mapping[str, Any]) -> dict[str, Any]:
        stored = {k: json_copy(v) for k, v in document.items() if not k.startswith("_")}
        stored["_etag"] = f'"{uuid.uuid4()}"'
        stored["_ts"] = int(_clock.now().timestamp())
        ttl = stored.get("ttl")
        expires = _clock.monotonic() + float(ttl) if isinstance(ttl, int | float) else None
        stored["_expires"] = expires
        self._docs[key] = stored
        if expires is not None:
            self._expiring[key] = expires
        else:
            self._expiring.pop(key, None)
        return _copy(stored)

    def _expire(self) -> None:
        """Documents past their ``ttl`` deleted (only those with one are looked at)."""
        if not self._expiring:
            return
        now = _clock.monotonic()
        gone = [key for key, at in self._expiring.items() if at <= now]
        for key in gone:
            del self._expiring[key]
            if self._docs.get(key, {}).get("_expires") is not None:
                del self._docs[key]


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


def _copy(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored document as a reader sees it (without the store's own expiry)."""
    return {
        k: v if type(v) in _SCALARS else json_copy(v) for k, v in stored.items() if k != "_expires"
    }


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists and scalars; anything else deep-copied):
    ``copy.deepcopy``'s result, several times faster on documents."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {
            key: item if type(item) in _SCALARS else json_copy(item) for key, item in value.items()
        }
    if kind is list:
        return [item if type(item) in _SCALARS else json_copy(item) for item in value]
    return copy.deepcopy(value)


#: What ``json_copy`` returns as it is (immutable).
_SCALARS = frozenset({str, int, float, bool, type(None)})
