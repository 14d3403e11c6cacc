"""The ids of a processor's documents in the lease container. Pure.

Follows Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/``:

* ``Utils/CosmosContainerExtensions.GetLeasePrefix``: ``{processorName}{Endpoint.Host}_{database
  rid}_{container rid}`` -- the processor's name, the monitored account's host (no scheme, no
  port) and the monitored container's resource ids (``GetMonitoredDatabaseAndContainerRidAsync``:
  the database's rid is ``ResourceId.DatabaseId`` of the container's, its first four bytes).
* ``LeaseManagement/DocumentServiceLeaseStoreManagerOptions.GetPartitionLeasePrefix``: that
  prefix and ``..``; a lease's id adds its token (``GetDocumentId``).
* ``LeaseManagement/DocumentServiceLeaseStoreCosmos``: ``<prefix>.info`` marks the store
  initialised, ``<prefix>.lock`` (with a ``ttl``) is held by the instance initialising it.
* KEDA's ``azure-cosmosdb`` scaler finds the leases with ``STARTSWITH(c.id, processorName +
  <the account's short name> + ".")`` and keeps the documents that have a ``LeaseToken``.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

#: ``DocumentServiceLeaseStoreManagerOptions.PartitionLeasePrefixSeparator``.
LEASE_SEPARATOR = ".."


def account_host(endpoint: str) -> str:
    """``Uri.Host`` of an account endpoint (``https://acct.documents.azure.com:443/`` ->
    ``acct.documents.azure.com``); a bare host is returned as it is."""
    return urlsplit(endpoint).hostname or endpoint


def database_rid(container_rid: str) -> str:
    """``ResourceId.Parse(containerRid).DatabaseId``: the first four bytes of the container's
    resource id, in the service's base64 (``/`` written ``-``)."""
    raw = base64.b64decode(container_rid.replace("-", "/"))
    return base64.b64encode(raw[:4]).decode("ascii").replace("/", "-")


def store_prefix(processor_name: str, endpoint: str, container_rid: str) -> str:
    """``GetLeasePrefix``: what every document of one processor's store starts with."""
    return f"{processor_name}{account_host(endpoint)}_{database_rid(container_rid)}_{container_rid}"


def keda_prefix(processor_name: str, endpoint: str) -> str | None:
    """What KEDA's ``azure-cosmosdb`` scaler finds a processor's leases by: its name, the
    account's host up to its first dot, and a dot (``cosmosDBAccountShortName``). None when the
    host has no dot (``localhost``): the scaler's prefix then ends in a dot that the leases'
    ids do not have there, and it finds no lease."""
    host = account_host(endpoint)
    if "." not in host:
        return None
    return f"{processor_name}{host.split('.', 1)[0]}."


def lease_id(prefix: str, lease_token: str) -> str:
    return f"{prefix}{LEASE_SEPARATOR}{lease_token}"


def info_id(prefix: str) -> str:
    return f"{prefix}.info"


def lock_id(prefix: str) -> str:
    return f"{prefix}.lock"
