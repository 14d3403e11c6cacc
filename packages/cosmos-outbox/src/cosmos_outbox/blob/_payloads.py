"""`PayloadStore` on Azure Blob Storage: one block blob per offloaded body, in a private
container, named by `cosmos_outbox._records.payload_name`; the reference is the blob's
URL. The SDK's errors are translated here, once: `PayloadNotFoundError`, `PayloadStoreError`,
and `PayloadReferenceError` for a URL outside this container (refused without a request: a
message never makes a subscriber send its credentials elsewhere).

Retries are short (2, from 1 s): the relay's trigger and the subscriber's redelivery are
the retry policies that matter, and an SDK that retried for a minute (its default backs off
from 15 s) would hold an invocation for it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient, ContentSettings, ExponentialRetry
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.blob.aio import ContainerClient as AsyncContainerClient
from azure.storage.blob.aio import ExponentialRetry as AsyncExponentialRetry

from cosmos_outbox.errors import PayloadNotFoundError, PayloadReferenceError, PayloadStoreError
from cosmos_outbox.ports import AsyncPayloadStore, PayloadStore

logger = logging.getLogger("cosmos_outbox.blob")

#: Seconds to connect, and to wait for a read (a body of a few MB).
CONNECTION_TIMEOUT = 5
READ_TIMEOUT = 30


def _client_options(*, asynchronous: bool = False) -> dict[str, Any]:
    # an aio client needs the aio retry policy: the sync one cannot await the pipeline
    retry = AsyncExponentialRetry if asynchronous else ExponentialRetry
    return {
        "retry_policy": retry(
            initial_backoff=1, increment_base=2, retry_total=2, random_jitter_range=0
        ),
        "connection_timeout": CONNECTION_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
    }


class _Container:
    """What both stores know of their container: its references, and how a reference is
    checked and named (no I/O)."""

    def __init__(self, container: ContainerClient | AsyncContainerClient) -> None:
        self.name = container.container_name
        self._client = container
        #: every reference of this store starts with it
        self._prefix = container.url.rstrip("/") + "/"

    def reference(self, name: str) -> str:
        return str(self._client.get_blob_client(name).url)

    def blob_name(self, reference: str) -> str:
        """The blob name of a reference of this container; refused otherwise."""
        if not reference.startswith(self._prefix):
            raise PayloadReferenceError(_shown(reference), "not in this store's container")
        parts = urlsplit(reference)
        if parts.query or parts.fragment:
            raise PayloadReferenceError(_shown(reference), "a query or fragment")
        name = unquote(reference[len(self._prefix) :])
        if not name or any(part in ("", ".", "..") for part in name.split("/")):
            raise PayloadReferenceError(_shown(reference), "not a payload name")
        return name

    @contextmanager
    def storing(self, name: str) -> Iterator[None]:
        try:
            yield
        except ResourceNotFoundError as exc:  # the container does not exist
            raise PayloadStoreError(
                f"payload container {self.name} not found: {_code(exc)}"
            ) from exc
        except AzureError as exc:
            raise PayloadStoreError(f"storing payload {name} failed: {_code(exc)}") from exc

    @contextmanager
    def checking(self) -> Iterator[None]:
        try:
            yield
        except AzureError as exc:
            raise PayloadStoreError(
                f"the claim check's payload container {self.name} could not be checked: "
                f"{_code(exc)}"
            ) from exc

    def found(self, exists: bool) -> None:
        """PayloadStoreError naming the container and the fix when it does not exist."""
        if not exists:
            raise PayloadStoreError(
                f"the claim check's payload container {self.name} does not exist in "
                f"{self._prefix.rsplit('/', 2)[0]}: create it (a private blob container; the "
                f"deploy templates and funcstack.json's Storage.BlobContainers declare it), or "
                f"name another in OUTBOX_PAYLOAD_CONTAINER, or set OUTBOX_PAYLOAD_MAX_BYTES=0 "
                f"for no claim check (events too large for a message are then quarantined)"
            )

    @contextmanager
    def reading(self, reference: str) -> Iterator[None]:
        try:
            yield
        except ResourceNotFoundError:
            raise PayloadNotFoundError(_shown(reference)) from None
        except AzureError as exc:
            raise PayloadStoreError(
                f"reading payload {_shown(reference)} failed: {_code(exc)}"
            ) from exc


class BlobPayloadStore(PayloadStore):
    """Bodies as block blobs of one container (`container`: the SDK's sync client of it)."""

    def __init__(self, container: ContainerClient) -> None:
        self._client = container
        self._container = _Container(container)

    @classmethod
    def from_connection_string(cls, connection_string: str, container: str) -> BlobPayloadStore:
        service = BlobServiceClient.from_connection_string(connection_string, **_client_options())
        return cls(service.get_container_client(container))

    @classmethod
    def from_service_uri(cls, service_uri: str, container: str) -> BlobPayloadStore:
        """With `DefaultAzureCredential` (the app's managed identity: AZURE_CLIENT_ID names a
        user-assigned one)."""
        from azure.identity import DefaultAzureCredential

        service = BlobServiceClient(
            service_uri, credential=DefaultAzureCredential(), **_client_options()
        )
        return cls(service.get_container_client(container))

    def reference(self, name: str) -> str:
        return self._container.reference(name)

    def put(self, name: str, body: bytes, *, content_type: str) -> None:
        with self._container.storing(name):
            self._client.upload_blob(
                name,
                body,
                overwrite=True,
                length=len(body),
                content_settings=ContentSettings(content_type=content_type),
            )

    def get(self, reference: str) -> bytes:
        name = self._container.blob_name(reference)
        with self._container.reading(reference):
            return self._client.download_blob(name).readall()

    def check(self) -> None:
        with self._container.checking():
            found = self._client.exists()
        self._container.found(found)


class AsyncBlobPayloadStore(AsyncPayloadStore):
    """`BlobPayloadStore` on the SDK's `aio` container client."""

    def __init__(
        self, container: AsyncContainerClient, *, service: AsyncBlobServiceClient | None = None
    ) -> None:
        self._client = container
        self._container = _Container(container)
        #: the service client whose connections the container client shares (closed by `close`)
        self._service = service

    @classmethod
    def from_connection_string(
        cls, connection_string: str, container: str
    ) -> AsyncBlobPayloadStore:
        service = AsyncBlobServiceClient.from_connection_string(
            connection_string, **_client_options(asynchronous=True)
        )
        return cls(service.get_container_client(container), service=service)

    @classmethod
    def from_service_uri(cls, service_uri: str, container: str) -> AsyncBlobPayloadStore:
        from azure.identity.aio import DefaultAzureCredential

        service = AsyncBlobServiceClient(
            service_uri, credential=DefaultAzureCredential(), **_client_options(asynchronous=True)
        )
        return cls(service.get_container_client(container), service=service)

    def reference(self, name: str) -> str:
        return self._container.reference(name)

    async def put(self, name: str, body: bytes, *, content_type: str) -> None:
        with self._container.storing(name):
            await self._client.upload_blob(
                name,
                body,
                overwrite=True,
                length=len(body),
                content_settings=ContentSettings(content_type=content_type),
            )

    async def get(self, reference: str) -> bytes:
        name = self._container.blob_name(reference)
        with self._container.reading(reference):
            downloaded = await self._client.download_blob(name)
            return await downloaded.readall()

    async def check(self) -> None:
        with self._container.checking():
            found = await self._client.exists()
        self._container.found(found)

    async def close(self) -> None:
        """Close its client's connections (a process that ends: `cosmos-outbox relay`)."""
        await self._client.close()
        if self._service is not None:
            await self._service.close()


def _shown(reference: str) -> str:
    """A reference as logged and raised: without a query (which might hold a SAS token)."""
    return reference.split("?", 1)[0].split("#", 1)[0]


def _code(exc: AzureError) -> str:
    code = getattr(exc, "error_code", None)
    return f"{type(exc).__name__}" + (f" ({code})" if code else "")
