"""The lease store port, aio: the same operations as ``cosmos_changefeed.LeaseStore``, awaited,
and the in-memory store over the same documents (``InMemoryDocuments``, which a sync and an aio
store may share)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from cosmos_changefeed._store import ID_PATH, InMemoryDocuments, in_memory_documents


class LeaseStore(ABC):
    """Documents of a lease container (aio). See ``cosmos_changefeed.LeaseStore``."""

    @abstractmethod
    async def partition_key_path(self) -> str:
        """``/id`` or ``/partitionKey``."""

    @abstractmethod
    async def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        """Every document whose id starts with ``prefix``."""

    @abstractmethod
    async def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        """The document, or None (404)."""

    @abstractmethod
    async def create(
        self, document: Mapping[str, Any], partition_key: str
    ) -> dict[str, Any] | None:
        """Store a new document; None when one with its id exists (409)."""

    @abstractmethod
    async def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        """Replace while the etag is ``etag``: ``PreconditionFailedError``, ``NotFoundError``."""

    @abstractmethod
    async def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        """Delete (while the etag is ``etag``, when given); False when gone or changed."""

    async def expires_documents(self) -> bool | None:
        """Whether a document's ``ttl`` is honoured; None: not known. See
        ``cosmos_changefeed.LeaseStore.expires_documents``."""
        return None

    async def close(self) -> None:  # noqa: B027 - nothing to close by default
        """Release what the store holds."""


class InMemoryLeaseStore(LeaseStore):
    """Leases in memory (aio). See ``cosmos_changefeed.InMemoryLeaseStore``."""

    def __init__(
        self,
        partition_key_path: str = ID_PATH,
        *,
        documents: InMemoryDocuments | None = None,
        state_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.documents = in_memory_documents(partition_key_path, documents, state_file)

    async def partition_key_path(self) -> str:
        return self.documents.partition_key_path

    async def expires_documents(self) -> bool:
        return True

    async def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        return self.documents.list_documents(prefix)

    async def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        return self.documents.read(item_id, partition_key)

    async def create(
        self, document: Mapping[str, Any], partition_key: str
    ) -> dict[str, Any] | None:
        return self.documents.create(document, partition_key)

    async def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        return self.documents.replace(document, partition_key, etag)

    async def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        return self.documents.delete(item_id, partition_key, etag)
