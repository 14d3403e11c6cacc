"""The bindings' SDK clients, one per connection for the host's life, as the extensions cache
theirs (``CosmosDBExtensionConfigProvider.ClientCache``, the Service Bus extension's
``MessagingProvider``, the Storage extensions' ``StorageClientProvider``): each binding says
which it will use when the app is indexed (``want``), and they are made when the host starts
(``open``: the SDKs imported in a thread meanwhile), so that no invocation pays for it -- the
first blob write of a new host took 0.3-1.6 s, most of it importing ``azure.storage.blob.aio``
(1.5 s of a cold import here), past the 1 s some of Microsoft's end-to-end checks wait; closed
when the host stops. A client that cannot be made at start (a setting missing) is made, and its
error said, by the binding that needs it."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from typing import TYPE_CHECKING, Any

from funcstack.functions_host import _connections

if TYPE_CHECKING:
    from azure.cosmos.aio import CosmosClient
    from azure.servicebus.aio import ServiceBusClient
    from azure.storage.blob.aio import BlobServiceClient
    from azure.storage.queue.aio import QueueServiceClient

__all__ = ["Clients"]

logger = logging.getLogger("funcstack.functions_host.bindings")

#: The SDK module each kind of client comes from.
_MODULES = {
    "cosmos": "azure.cosmos.aio",
    "servicebus": "azure.servicebus.aio",
    "queues": "azure.storage.queue.aio",
    "blobs": "azure.storage.blob.aio",
}


def _import(modules: list[str]) -> None:
    for module in modules:
        importlib.import_module(module)


class Clients:
    """The host's clients, by service and connection name."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], Any] = {}
        self._wanted: set[tuple[str, str]] = set()

    def want(self, kind: str, connection: str) -> None:
        """A binding will use the client of ``kind`` (``cosmos``, ``servicebus``, ``queues``,
        ``blobs``) for ``connection``: ``open`` makes it."""
        self._wanted.add((kind, connection))

    async def open(self) -> None:
        """Import the SDKs the bindings use (in a thread) and make their clients."""
        wanted = sorted(self._wanted)
        await asyncio.to_thread(_import, sorted({_MODULES[kind] for kind, _ in wanted}))
        for kind, connection in wanted:
            try:
                getattr(self, kind)(connection)
            except Exception as exc:  # the binding that needs it says so, failing its invocation
                logger.debug("binding client %s %s not made at start: %s", kind, connection, exc)

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
