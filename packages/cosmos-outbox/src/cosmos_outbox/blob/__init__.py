"""The claim check's payload store on Azure Blob Storage (azure-storage-blob): a private
container, reached with a connection string or a managed identity. Imported where the relay
runs or a subscriber meets its first `dataref`, never at indexing."""

from __future__ import annotations

from cosmos_outbox.blob._payloads import BlobPayloadStore, blob_payload_store

__all__ = ["BlobPayloadStore", "blob_payload_store"]
