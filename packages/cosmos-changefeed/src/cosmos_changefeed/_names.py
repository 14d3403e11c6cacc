"""The ids of a processor's documents in the lease container. Pure.

Follows Azure/azure-cosmos-dotnet-v3, ``src/ChangeFeedProcessor/``:

* ``Utils/CosmosContainerExtensions.GetLeasePrefix``: ``{processorName}{Endpoint.Host}_{database
  rid}_{container rid}`` -- the processor's name, the monitored account's host (``Uri.Host``: no
  scheme, no port, lower case; an IPv6 literal in brackets, in the canonical form of
  dotnet/runtime's ``IPv6AddressHelper.ParseCanonicalName``: RFC 5952's compression, lower case,
  the last 32 bits of an IPv4-mapped address dotted -- ``[::ffff:127.0.0.1]``) and the monitored
  container's resource ids (``GetMonitoredDatabaseAndContainerRidAsync``:
  the database's rid is ``ResourceId.DatabaseId`` of the container's, its first four bytes).
* ``LeaseManagement/DocumentServiceLeaseStoreManagerOptions.GetPartitionLeasePrefix``: that
  prefix and ``..``; a lease's id adds its token (``GetDocumentId``).
* ``LeaseManagement/DocumentServiceLeaseStoreCosmos``: ``<prefix>.info`` marks the store
  initialised, ``<prefix>.lock`` (with a ``ttl``) is held by the instance initialising it.
* KEDA's ``azure-cosmosdb`` scaler finds the leases with ``STARTSWITH(c.id, processorName +
  <the account's short name> + ".")`` and keeps the documents that have a ``LeaseToken``; the
  short name is Go's ``url.Hostname()`` (an IPv6 literal without its brackets) up to its first
  dot (kedacore/keda, ``pkg/scalers/azure_cosmosdb_scaler.go``, ``cosmosDBAccountShortName``).

cosmos-changefeed 1.0 took the host from ``urlsplit().hostname``, which drops an IPv6 literal's
brackets (and keeps it as written): its leases on such an endpoint (funcstack's,
``https://[::ffff:127.0.0.1]:<port>/``) have another prefix (``legacy_prefix``), which a start
adopts (``_protocol.LeaseManager.initialize``).
"""

from __future__ import annotations

import base64
import ipaddress
from urllib.parse import unquote, urlsplit

#: ``DocumentServiceLeaseStoreManagerOptions.PartitionLeasePrefixSeparator``.
LEASE_SEPARATOR = ".."


def account_host(endpoint: str) -> str:
    """``Uri.Host`` of an account endpoint (``https://acct.documents.azure.com:443/`` ->
    ``acct.documents.azure.com``, ``https://[::FFFF:7f00:1]:8081/`` -> ``[::ffff:127.0.0.1]``);
    a bare host is returned as it is."""
    host = urlsplit(endpoint).hostname
    if host is None:
        return endpoint
    if ":" in host:  # an IPv6 literal (a host name or an IPv4 address has no colon)
        address, _, scope = unquote(host).partition("%")
        return f"[{dotnet_ipv6(address)}{'%' + scope if scope else ''}]"
    return host


def dotnet_ipv6(text: str) -> str:
    """An IPv6 address as .NET's ``Uri`` writes it (``IPv6AddressHelper.ParseCanonicalName``):
    the longest run of two or more zero groups (the first of equals) written ``::``, groups in
    lower-case hex without leading zeros, and the last two groups dotted when the address embeds
    an IPv4 one (``::a.b.c.d``, ``::ffff:a.b.c.d``, ``::ffff:0:a.b.c.d``, ISATAP)."""
    packed = ipaddress.IPv6Address(text).packed
    numbers = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2)]
    start, end = _zeros(numbers)
    out = ""
    for i, number in enumerate(numbers):
        if _embeds_ipv4(numbers) and i == 6:
            dotted = ".".join(str(b) for b in packed[12:])
            return f"{out}:{dotted}"
        if i == start:
            out += ":"
        if start <= i and end == 8:
            return out + ":"
        if start <= i < end:
            continue
        out += f"{':' if i else ''}{number:x}"
    return out


def _zeros(numbers: list[int]) -> tuple[int, int]:
    """``FindCompressionRange``: (start, end) of the first longest run of 2+ zeros; (-1, 0)."""
    best, best_start, run = 0, -1, 0
    for i, number in enumerate(numbers):
        run = run + 1 if number == 0 else 0
        if run > best:
            best, best_start = run, i - run + 1
    return (best_start, best_start + best) if best > 1 else (-1, 0)


def _embeds_ipv4(n: list[int]) -> bool:
    """``ShouldHaveIpv4Embedded``."""
    if n[0] == n[1] == n[2] == n[3] == 0 and n[6] != 0:
        if n[4] == 0 and n[5] in (0, 0xFFFF):
            return True
        if n[4] == 0xFFFF and n[5] == 0:
            return True
    return n[4] == 0 and n[5] == 0x5EFE


def legacy_prefix(processor_name: str, endpoint: str, container_rid: str) -> str | None:
    """The prefix cosmos-changefeed 1.0 wrote this processor's documents under, when it is not
    ``store_prefix`` (an IPv6 literal's host: ``urlsplit().hostname``, without brackets)."""
    host = urlsplit(endpoint).hostname or endpoint
    old = f"{processor_name}{host}_{database_rid(container_rid)}_{container_rid}"
    return None if old == store_prefix(processor_name, endpoint, container_rid) else old


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
    account's host up to its first dot, and a dot (``cosmosDBAccountShortName``). None when it
    finds none: the host has no dot (``localhost``: the scaler's prefix ends in a dot that the
    leases' ids do not have there), or is an IPv6 literal (the scaler's host has no brackets,
    the leases' ids have them, as .NET's)."""
    host = account_host(endpoint)
    if "." not in host or host.startswith("["):
        return None
    return f"{processor_name}{host.split('.', 1)[0]}."


def is_loopback(endpoint: str) -> bool:
    """Whether the account's host is this machine (``localhost``, ``127.0.0.0/8``, ``::1``, an
    IPv4-mapped loopback such as funcstack's ``[::ffff:127.0.0.1]``): a developer's own
    emulator, which no KEDA rule of a deployment reads."""
    host = urlsplit(endpoint).hostname or endpoint
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(unquote(host).partition("%")[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def lease_id(prefix: str, lease_token: str) -> str:
    return f"{prefix}{LEASE_SEPARATOR}{lease_token}"


def info_id(prefix: str) -> str:
    return f"{prefix}.info"


def lock_id(prefix: str) -> str:
    return f"{prefix}.lock"
