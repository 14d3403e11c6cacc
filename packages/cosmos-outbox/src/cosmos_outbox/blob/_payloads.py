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
from typing import Any
from urllib.parse import unquote, urlsplit

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient, ContentSettings, ExponentialRetry

from cosmos_outbox.errors import PayloadNotFoundError, PayloadReferenceError, PayloadStoreError
from cosmos_outbox.ports import PayloadStore
from cosmos_outbox.settings import PayloadConnection, PayloadSettings

logger = logging.getLogger(__name__)

#: Seconds to connect, and to wait for a read (a body of a few MB).
CONNECTION_TIMEOUT = 5
READ_TIMEOUT = 30


def _client_options() -> dict[str, Any]:
    return {
        "retry_policy": ExponentialRetry(initial_backoff=1, increment_base=2, retry_total=2,
                                         random_jitter_range=0),
        "connection_timeout": CONNECTION_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
    }


class BlobPayloadStore(PayloadStore):
    """Bodies as block blobs of one container (`container`: the SDK's client of it)."""

    def __init__(self, container: ContainerClient) -> None:
        self._container = container
        #: every reference of this store starts with it
        self._prefix = container.url.rstrip("/") + "/"

    @classmethod
    def connect(cls, connection: PayloadConnection) -> BlobPayloadStore:
        """From a connection string, or a blob service URI with `DefaultAzureCredential` (the
        app's managed identity: AZURE_CLIENT_ID names a user-assigned one)."""
        if connection.connection_string is not None:
            service = BlobServiceClient.from_connection_string(
                connection.connection_string.get_secret_value(), **_client_options())
        else:
            from azure.identity import DefaultAzureCredential

            assert connection.service_uri is not None
            service = BlobServiceClient(connection.service_uri,
                                        credential=DefaultAzureCredential(), **_client_options())
        return cls(service.get_container_client(connection.container))

    def reference(self, name: str) -> str:
        return self._container.get_blob_client(name).url

    def put(self, name: str, body: bytes, *, content_type: str) -> None:
        try:
            self._container.upload_blob(
                name, body, overwrite=True, length=len(body),
                content_settings=ContentSettings(content_type=content_type))
        except ResourceNotFoundError as exc:  # the container does not exist
            raise PayloadStoreError(
                f"payload container {self._container.container_name} not found: "
                f"{_code(exc)}") from exc
        except AzureError as exc:
            raise PayloadStoreError(f"storing payload {name} failed: {_code(exc)}") from exc

    def get(self, reference: str) -> bytes:
        name = self._name(reference)
        try:
            return self._container.download_blob(name).readall()
        except ResourceNotFoundError:
            raise PayloadNotFoundError(_shown(reference)) from None
        except AzureError as exc:
            raise PayloadStoreError(
                f"reading payload {_shown(reference)} failed: {_code(exc)}") from exc

    def _name(self, reference: str) -> str:
        """The blob name of a reference of this container; refused otherwise."""
        if not reference.startswith(self._prefix):
            raise PayloadReferenceError(_shown(reference),
                                        "not in this store's container")
        parts = urlsplit(reference)
        if parts.query or parts.fragment:
            raise PayloadReferenceError(_shown(reference), "a query or fragment")
        name = unquote(reference[len(self._prefix):])
        if not name or any(part in ("", ".", "..") for part in name.split("/")):
            raise PayloadReferenceError(_shown(reference), "not a payload name")
        return name


def _shown(reference: str) -> str:
    """A reference as logged and raised: without a query (which might hold a SAS token)."""
    return reference.split("?", 1)[0].split("#", 1)[0]


def _code(exc: AzureError) -> str:
    code = getattr(exc, "error_code", None)
    return f"{type(exc).__name__}" + (f" ({code})" if code else "")


def blob_payload_store(settings: PayloadSettings) -> BlobPayloadStore | None:
    """The payload store the settings name (OutboxPayloadStorage, else AzureWebJobsStorage);
    None when there is none. No I/O here: the first request connects."""
    connection = settings.payload_storage()
    if connection is None:
        return None
    logger.info("claim check: payloads in container %s (from %s)", connection.container,
                connection.setting, extra={"outbox.payload_container": connection.container,
                                           "outbox.payload_setting": connection.setting})
    return BlobPayloadStore.connect(connection)
