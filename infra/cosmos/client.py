"""Cosmos clients built from settings: connection string (key) or managed identity."""

from __future__ import annotations

import warnings
from typing import Any

from azure.cosmos import ContainerProxy, CosmosClient

from infra.settings import Settings


def cosmos_client(settings: Settings) -> CosmosClient:
    """One client per process (it pools connections); identity when no key is configured."""
    options: dict[str, Any] = {}
    if not settings.cosmos_verify_tls:
        # Only for local emulators with self-signed certificates.
        options["connection_verify"] = False
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    if settings.cosmos_connection is not None:
        return CosmosClient.from_connection_string(
            settings.cosmos_connection.get_secret_value(), **options
        )
    from azure.identity import DefaultAzureCredential

    assert settings.cosmos_account_endpoint is not None
    return CosmosClient(
        settings.cosmos_account_endpoint, credential=DefaultAzureCredential(), **options
    )


def contacts_container(client: CosmosClient, settings: Settings) -> ContainerProxy:
    return client.get_database_client(settings.cosmos_database).get_container_client(
        settings.cosmos_container
    )
