"""The clients of a binding's ``connection``, resolved from the app settings as the host does.

One owner for every trigger and binding (the triggers' listeners and ``_bindings``): a
connection name is looked up as the Functions host's ``IConfiguration`` extension
``GetWebJobsConnectionStringSection`` does (azure-webjobs-sdk, ``ConfigurationExtensions``):
the setting ``<name>``, else ``AzureWebJobs<name>``; a value is a connection string, a section
(``<name>__<key>`` settings) an identity-based connection, as the "Azure Functions
identity-based connections" docs (learn.microsoft.com, azure-functions/functions-reference,
"Configure an identity-based connection") list them:

* Cosmos DB: ``AccountEndpoint=...;AccountKey=...``, or ``<name>__accountEndpoint``;
* Service Bus: ``Endpoint=sb://...``, or ``<name>__fullyQualifiedNamespace``;
* Storage (blobs): a storage connection string, or ``<name>__blobServiceUri`` (alias
  ``<name>__serviceUri``), or ``<name>__accountName`` (``https://<account>.blob.core.windows.net``);
* Storage (queues): a storage connection string, or ``<name>__queueServiceUri``, or
  ``<name>__accountName``.

An identity-based connection authenticates with azure-identity as the host does
(``DefaultAzureComponentFactory``): ``<name>__credential=managedidentity`` (with
``<name>__clientId``) is a managed identity; ``<name>__tenantId`` + ``__clientId`` +
``__clientSecret`` a service principal; otherwise ``DefaultAzureCredential``
(``__clientId`` as its managed identity's client id). A connection with neither form is a
``SettingError`` naming the settings looked for.

The host verifies Cosmos DB's certificate as the host in Azure does, with its process's trust
store: funcstack's local endpoint's too, since funcstack gives every host its local authority
in that store (``cosmos/_tls.py``). The local-only app setting
``FUNCTIONS_HOST_COSMOS_VERIFY_TLS=false`` turns verification off, for an endpoint whose
certificate cannot be trusted (Microsoft's emulator's, self-signed).
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import TYPE_CHECKING, Any, cast

import certifi

from funcstack.functions_host._config import SettingError, parse_connection_string

if TYPE_CHECKING:
    from azure.cosmos.aio import CosmosClient
    from azure.servicebus.aio import ServiceBusClient
    from azure.storage.blob.aio import BlobServiceClient
    from azure.storage.queue.aio import QueueServiceClient

__all__ = [
    "VERIFY_TLS_SETTING",
    "blob_service_for",
    "connection_problem",
    "cosmos_client_for",
    "queue_service_for",
    "servicebus_client_for",
]

#: Local-only app setting: "false" accepts an endpoint's certificate unverified (an emulator's).
VERIFY_TLS_SETTING = "FUNCTIONS_HOST_COSMOS_VERIFY_TLS"


def _value(name: str) -> str | None:
    """The connection string of connection ``name`` (``<name>``, else ``AzureWebJobs<name>``)."""
    for key in (name, f"AzureWebJobs{name}"):
        value = os.environ.get(key)
        if value:
            return value
    return None


def _section(name: str, *keys: str) -> tuple[str, str] | None:
    """The first ``<prefix>__<key>`` setting set, with its prefix (``<name>``, else
    ``AzureWebJobs<name>``): (prefix, value)."""
    for prefix in (name, f"AzureWebJobs{name}"):
        for key in keys:
            value = os.environ.get(f"{prefix}__{key}")
            if value:
                return prefix, value
    return None


#: The identity-based settings of each kind of connection, the first one named in errors.
_IDENTITY_KEYS = {
    "cosmos": ("accountEndpoint",),
    "servicebus": ("fullyQualifiedNamespace",),
    "queues": ("queueServiceUri", "accountName"),
    "blobs": ("blobServiceUri", "serviceUri", "accountName"),
}


def connection_problem(kind: str, connection: str) -> str | None:
    """Why the connection ``connection`` of ``kind`` (cosmos, servicebus, queues, blobs) cannot
    be made, or None: the host refuses a binding whose connection has no setting when it
    indexes the function."""
    keys = _IDENTITY_KEYS[kind]
    if _value(connection) or _section(connection, *keys):
        return None
    return f"app setting {connection} (or {connection}__{keys[0]}) is not set"


def credential_for(prefix: str) -> Any:
    """The async credential of the identity-based connection ``prefix`` (the settings under
    ``<prefix>__``), as ``DefaultAzureComponentFactory`` builds it."""
    from azure.identity import aio as identity

    def setting(key: str) -> str | None:
        return os.environ.get(f"{prefix}__{key}") or None

    client_id = setting("clientId")
    if (setting("credential") or "").strip().lower() == "managedidentity":
        return identity.ManagedIdentityCredential(client_id=client_id)
    tenant, secret = setting("tenantId"), setting("clientSecret")
    if tenant and client_id and secret:
        return identity.ClientSecretCredential(tenant, client_id, secret)
    return identity.DefaultAzureCredential(managed_identity_client_id=client_id)


# -- Cosmos DB -------------------------------------------------------------------------------


def cosmos_client_for(setting: str) -> CosmosClient:
    """A client for the connection ``setting``: a connection string, or
    ``<setting>__accountEndpoint`` with its identity."""
    from azure.cosmos.aio import CosmosClient

    verify = os.environ.get(VERIFY_TLS_SETTING, "true").strip().lower() not in {"false", "0", "no"}
    value = _value(setting)
    if value:
        parts = parse_connection_string(value)
        endpoint, key = parts.get("accountendpoint"), parts.get("accountkey")
        if not endpoint or not key:
            raise SettingError(f"app setting {setting} lacks AccountEndpoint or AccountKey")
        return CosmosClient(endpoint, credential=key, connection_verify=verify)
    found = _section(setting, "accountEndpoint")
    if found:
        prefix, endpoint = found
        return CosmosClient(endpoint, credential=credential_for(prefix), connection_verify=verify)
    raise SettingError(f"app setting {setting} (or {setting}__accountEndpoint) is not set")


# -- Service Bus -----------------------------------------------------------------------------


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every Service Bus connection of this process, trusting what the SDK
    trusts by default (certifi's bundle). Without it the SDK builds a context for each new
    connection, loading the bundle each time (~30 ms of CPU, on the event loop), and every
    session a trigger accepts is a new connection."""
    return ssl.create_default_context(cafile=certifi.where())


def servicebus_client_for(setting: str) -> ServiceBusClient:
    """A client for the connection ``setting``: a connection string, or
    ``<setting>__fullyQualifiedNamespace`` with its identity."""
    from azure.servicebus.aio import ServiceBusClient

    value = _value(setting)
    if value:
        return ServiceBusClient.from_connection_string(value, ssl_context=tls_context())
    found = _section(setting, "fullyQualifiedNamespace")
    if found:
        prefix, namespace = found
        return ServiceBusClient(
            namespace, credential=credential_for(prefix), ssl_context=tls_context()
        )
    raise SettingError(f"app setting {setting} (or {setting}__fullyQualifiedNamespace) is not set")


# -- Storage ---------------------------------------------------------------------------------


def queue_service_for(connection: str) -> QueueServiceClient:
    """The queue service of the connection ``connection``: a connection string, or
    ``<connection>__queueServiceUri`` / ``__accountName`` with its identity."""
    from azure.storage.queue.aio import QueueServiceClient

    service = _storage_service(QueueServiceClient, "queue", connection, ("queueServiceUri",))
    return cast("QueueServiceClient", service)


def blob_service_for(connection: str) -> BlobServiceClient:
    """The blob service of the connection ``connection``: a connection string, or
    ``<connection>__blobServiceUri`` (``__serviceUri``) / ``__accountName`` with its identity."""
    from azure.storage.blob.aio import BlobServiceClient

    keys = ("blobServiceUri", "serviceUri")
    return cast("BlobServiceClient", _storage_service(BlobServiceClient, "blob", connection, keys))


def _storage_service(client: Any, service: str, connection: str, uri_keys: tuple[str, ...]) -> Any:
    """A storage service client (``client``: its class) for ``connection``, as the Storage
    extensions read it: the setting as a connection string, else the first ``uri_keys``
    setting with the connection's identity, else ``__accountName`` (``https://<account>
    .<service>.core.windows.net``)."""
    value = _value(connection)
    if value:
        return client.from_connection_string(value)
    found = _section(connection, *uri_keys)
    if found:
        return client(found[1], credential=credential_for(found[0]))
    account = _section(connection, "accountName")
    if account:
        uri = f"https://{account[1]}.{service}.core.windows.net"
        return client(uri, credential=credential_for(account[0]))
    names = ", ".join(f"{connection}__{key}" for key in uri_keys)
    raise SettingError(f"app setting {connection} (or {names}) is not set")
