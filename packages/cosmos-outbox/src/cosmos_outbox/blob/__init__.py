"""Blob Storage: the claim check's payload store on azure-storage-blob (`BlobPayloadStore`; on
its `aio` client: `cosmos_outbox.blob.aio`): one private block blob per offloaded body; a
reference is the blob's URL, and a URL outside the container is refused without a request."""

from __future__ import annotations

from cosmos_outbox.blob._payloads import BlobPayloadStore

__all__ = [
    "BlobPayloadStore",
]
