"""Cosmos DB clients, sync and `aio`: connection string (key) or managed identity, with
bounded timeouts."""

from __future__ import annotations

import warnings
from typing import Any

from azure.cosmos import CosmosClient
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from cosmos_outbox.cosmos._errors import cosmos_errors

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


def cosmos_client(*, connection_string: str | None = None, endpoint: str | None = None,
                  verify_tls: bool = True) -> CosmosClient:
    """One client per process (it pools connections): from a connection string (a key), else
    the account `endpoint` with `DefaultAzureCredential` (the app's managed identity). Building
    it reads the account: a store that is down or hangs fails here, as StoreUnavailableError."""
    options = _options(verify_tls)
    with cosmos_errors():
        if connection_string is not None:
            return CosmosClient.from_connection_string(connection_string, **options)
        from azure.identity import DefaultAzureCredential

        assert endpoint is not None, "a connection string or an account endpoint"
        return CosmosClient(endpoint, credential=DefaultAzureCredential(), **options)


def async_cosmos_client(*, connection_string: str | None = None, endpoint: str | None = None,
                        verify_tls: bool = True) -> AsyncCosmosClient:
    """`cosmos_client` on the SDK's `aio` client: one per process and event loop (it reads the
    account on its first request)."""
    options = _options(verify_tls)
    if connection_string is not None:
        return AsyncCosmosClient.from_connection_string(connection_string, **options)
    from azure.identity.aio import DefaultAzureCredential

    assert endpoint is not None, "a connection string or an account endpoint"
    return AsyncCosmosClient(endpoint, credential=DefaultAzureCredential(), **options)


def _options(verify_tls: bool) -> dict[str, Any]:
    options = client_options()
    if not verify_tls:
        # Only for local emulators with self-signed certificates.
        options["connection_verify"] = False
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    return options
