"""Blob Storage, async: the same names as `cosmos_outbox.blob`, on the SDK's `aio` client (as
`azure.storage.blob.aio` mirrors `azure.storage.blob`): the claim check's payload store
(`BlobPayloadStore`)."""

from __future__ import annotations

from cosmos_outbox.blob._payloads import AsyncBlobPayloadStore as BlobPayloadStore

__all__ = ["BlobPayloadStore"]
