"""Cosmos clients built from settings: connection string (key) or managed identity."""

from __future__ import annotations

import warnings
from typing import Any

from azure.cosmos import ContainerProxy, CosmosClient

from cosmos_outbox.cosmos._errors import cosmos_errors
from cosmos_outbox.settings import OutboxSettings

#: Bounded waits: a store that hangs costs a request at most about TIMEOUT_SECONDS, then the
#: API answers 503 with Retry-After. The SDK's own retries (throttling included) run inside it.
TIMEOUT_SECONDS = 5
CONNECT_TIMEOUT_SECONDS = 2
READ_TIMEOUT_SECONDS = 3
#: Throttled requests are retried by the SDK for at most this long, then surface as 429.
THROTTLE_RETRY_SECONDS = 2


def client_options() -> dict[str, Any]:
    return {
        "timeout": TIMEOUT_SECONDS,
        "connection_timeout": CONNECT_TIMEOUT_SECONDS,
        "read_timeout": READ_TIMEOUT_SECONDS,
        "retry_throttle_backoff_max": THROTTLE_RETRY_SECONDS,
        "retry_connect": 1,
        "retry_read": 1,
    }


def cosmos_client(settings: OutboxSettings) -> CosmosClient:
    """One client per process (it pools connections); identity when no key is configured."""
    options = client_options()
    if not settings.cosmos_verify_tls:
        # Only for local emulators with self-signed certificates.
        options["connection_verify"] = False
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    # Building the client reads the account: a store that is down or hangs fails here too, as
    # StoreUnavailableError (503) rather than an SDK error.
    with cosmos_errors():
        if settings.cosmos_connection is not None:
            return CosmosClient.from_connection_string(
                settings.cosmos_connection.get_secret_value(), **options
            )
        from azure.identity import DefaultAzureCredential

        assert settings.cosmos_account_endpoint is not None
        return CosmosClient(
            settings.cosmos_account_endpoint, credential=DefaultAzureCredential(), **options
        )


def outbox_container(client: CosmosClient, settings: OutboxSettings) -> ContainerProxy:
    """The container the aggregates and their events are written to (COSMOS_CONTAINER)."""
    return client.get_database_client(settings.cosmos_database).get_container_client(
        settings.cosmos_container
    )


def lease_container(client: CosmosClient, settings: OutboxSettings) -> ContainerProxy:
    """The change-feed trigger's lease container (read by the backlog estimate)."""
    return client.get_database_client(settings.cosmos_database).get_container_client(
        settings.cosmos_lease_container
    )
