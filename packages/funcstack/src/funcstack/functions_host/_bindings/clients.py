"""The bindings' SDK clients, one per connection for the host's life, as the extensions cache
theirs (``CosmosDBExtensionConfigProvider.ClientCache``, the Service Bus extension's
``MessagingProvider``, the Storage extensions' ``StorageClientProvider``): made when a binding
first needs one (``_connections`` reads the settings), closed when the host stops."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from funcstack.functions_host import _connections

if TYPE_CHECKING:
    from azure.cosmos.aio import CosmosClient
    from azure.servicebus.aio import ServiceBusClient
    from azure.storage.blob.aio import BlobServiceClient
    from azure.storage.queue.aio import QueueServiceClient

__all__ = ["Clients"]


class Clients:
    """The host's clients, by service and connection name."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], Any] = {}

    def _get(self, kind: str, connection: str, make: Any) -> Any:
        key = (kind, connection)
        client = self._made.get(key)
        if client is None:
            client = self._made[key] = make(connection)
        return client

    def cosmos(self, connection: str) -> CosmosClient:
        return self._get("cosmos", connection, _connections.cosmos_client_for)  # type: ignore[no-any-return]

    def servicebus(self, connection: str) -> ServiceBusClient:
        return self._get("servicebus", connection, _connections.servicebus_client_for)  # type: ignore[no-any-return]

    def queues(self, connection: str) -> QueueServiceClient:
        return self._get("queues", connection, _connections.queue_service_for)  # type: ignore[no-any-return]

    def blobs(self, connection: str) -> BlobServiceClient:
        return self._get("blobs", connection, _connections.blob_service_for)  # type: ignore[no-any-return]

    async def close(self) -> None:
        made, self._made = self._made, {}
        for client in made.values():
            with contextlib.suppress(Exception):
                await client.close()
