"""How an adapter of this package is made from the settings, written once for all of them: from a
connection string, or from the namespace with `DefaultAzureCredential` (the app's managed
identity). A sync adapter is given a `connect` that makes the SDK's sync client when it needs one
(once per thread, or once); an `aio` adapter is given the SDK's `aio` client. Either is given the
entity (its topic or queue) and its own options after it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

from azure.servicebus import ServiceBusClient
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient


class ConnectedAdapter:
    """An adapter over the SDK's sync client, made by `connect` on first use."""

    if TYPE_CHECKING:  # each adapter's own, with its options after the entity

        def __init__(
            self, connect: Callable[[], ServiceBusClient], entity: str, /, **options: Any
        ) -> None: ...

    @classmethod
    def from_connection_string(cls, connection_string: str, entity: str, /, **options: Any) -> Self:
        return cls(
            lambda: ServiceBusClient.from_connection_string(connection_string), entity, **options
        )

    @classmethod
    def from_namespace(cls, fully_qualified_namespace: str, entity: str, /, **options: Any) -> Self:
        """With `DefaultAzureCredential` (the app's managed identity)."""
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential()
        return cls(
            lambda: ServiceBusClient(fully_qualified_namespace, credential=credential),
            entity,
            **options,
        )


class AsyncClientAdapter:
    """An adapter over the SDK's `aio` client."""

    if TYPE_CHECKING:  # each adapter's own, with its options after the entity

        def __init__(
            self, client: AsyncServiceBusClient, entity: str, /, **options: Any
        ) -> None: ...

    @classmethod
    def from_connection_string(cls, connection_string: str, entity: str, /, **options: Any) -> Self:
        return cls(
            AsyncServiceBusClient.from_connection_string(connection_string), entity, **options
        )

    @classmethod
    def from_namespace(cls, fully_qualified_namespace: str, entity: str, /, **options: Any) -> Self:
        """With `DefaultAzureCredential` (the app's managed identity)."""
        from azure.identity.aio import DefaultAzureCredential

        return cls(
            AsyncServiceBusClient(fully_qualified_namespace, credential=DefaultAzureCredential()),
            entity,
            **options,
        )
