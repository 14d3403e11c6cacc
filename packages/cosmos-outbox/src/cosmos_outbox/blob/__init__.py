"""Blob Storage: the claim check's payload store on azure-storage-blob (`BlobPayloadStore`; on
its `aio` client: `cosmos_outbox.blob.aio`): one private block blob per offloaded body; a
reference is the blob's URL, and a URL outside the container is refused without a request."""

from __future__ import annotations

from typing import Any

from cosmos_outbox._renamed import renamed
from cosmos_outbox.blob._payloads import BlobPayloadStore

__all__ = [
    "BlobPayloadStore",
]

#: Renamed in 0.3 (`cosmos_outbox.aio`-style namespaces): kept for a release, deprecated.
_RENAMED = {
    "AsyncBlobPayloadStore": "cosmos_outbox.blob.aio.BlobPayloadStore",
}


def __getattr__(name: str) -> Any:
    return renamed(__name__, name, _RENAMED)
