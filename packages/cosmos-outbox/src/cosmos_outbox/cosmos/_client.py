"""Cosmos DB clients, sync and `aio`: connection string (key) or managed identity, with
bounded timeouts."""

from __future__ import annotations

import os
from pathlib import Path
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


def cosmos_client(
    *,
    connection_string: str | None = None,
    endpoint: str | None = None,
    verify_tls: bool = True,
    **sdk_options: Any,
) -> CosmosClient:
    """One client per process (it pools connections): from a connection string (a key), else
    the account `endpoint` with `DefaultAzureCredential` (the app's managed identity). Building
    it reads the account: a store that is down or hangs fails here, as StoreUnavailableError.
    The certificate is verified with the process's trust store (`verify_tls=False`: not at all,
    for an emulator whose certificate cannot be trusted); `sdk_options` go to the SDK's client
    over the library's (an `ssl_config` naming another authority, say)."""
    options = _options(verify_tls) | sdk_options
    if not environment_settings(requests=True):
        from azure.core.pipeline.transport import RequestsTransport

        options.setdefault("transport", RequestsTransport(use_env_settings=False))
    with cosmos_errors():
        if connection_string is not None:
            return CosmosClient.from_connection_string(connection_string, **options)
        from azure.identity import DefaultAzureCredential

        assert endpoint is not None, "a connection string or an account endpoint"
        return CosmosClient(endpoint, credential=DefaultAzureCredential(), **options)


def async_cosmos_client(
    *,
    connection_string: str | None = None,
    endpoint: str | None = None,
    verify_tls: bool = True,
    **sdk_options: Any,
) -> AsyncCosmosClient:
    """`cosmos_client` on the SDK's `aio` client: one per process and event loop (it reads the
    account on its first request)."""
    require_aiohttp()
    options = _options(verify_tls) | sdk_options
    if not environment_settings(requests=False):
        from azure.core.pipeline.transport import AioHttpTransport

        options.setdefault("transport", AioHttpTransport(use_env_settings=False))
    if connection_string is not None:
        return AsyncCosmosClient.from_connection_string(connection_string, **options)
    from azure.identity.aio import DefaultAzureCredential

    assert endpoint is not None, "a connection string or an account endpoint"
    return AsyncCosmosClient(endpoint, credential=DefaultAzureCredential(), **options)


def require_aiohttp() -> None:
    """The SDKs' `aio` clients send with aiohttp, which the `aio` extra brings: without it, an
    ImportError that names the extra (the SDK's own says only that aiohttp is missing, at the
    first request)."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise ImportError(
            "cosmos-outbox's async API (cosmos_outbox.aio) sends with aiohttp, which is not "
            'installed: pip install "cosmos-outbox[aio]"',
            name="aiohttp",
        ) from None


def _options(verify_tls: bool) -> dict[str, Any]:
    options = client_options()
    if not verify_tls:
        # Only for an emulator whose certificate cannot be trusted (Microsoft's, self-signed):
        # urllib3 then warns at each unverified request, as it should.
        options["connection_verify"] = False
    return options


#: What the SDKs' HTTP transports read from the environment when they may (`use_env_settings`,
#: their default), besides proxies (any `*_proxy` variable) and a `.netrc`: requests' CA bundles
#: (the sync transport's).
_REQUESTS_ENVIRONMENT = frozenset({"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"})


def environment_settings(*, requests: bool) -> bool:
    """Whether this process has settings for the SDKs' transport (`requests`: the sync one, on
    requests; else the `aio` one, on aiohttp) to read from the environment. Without any, the
    clients are built with `use_env_settings=False`: the same requests, without looking for
    them again on every request (the `aio` transport looks on two threads of the event loop's
    executor per request: two thread hops)."""
    names = {name.upper() for name in os.environ}
    return (
        any(name.endswith("_PROXY") for name in names)
        or "NETRC" in names
        or (requests and bool(names & _REQUESTS_ENVIRONMENT))
        or (Path.home() / ".netrc").exists()
        or (Path.home() / "_netrc").exists()
    )
