"""Whether this process trusts the certificate of the Cosmos DB endpoint the settings name (the
emulator's is self-signed): a command that failed because it does not is one line naming the
variables to set, never a traceback. Asked only after a failure (one TLS handshake, no request)."""

from __future__ import annotations

import os
import socket
import ssl
from urllib.parse import urlsplit

__all__ = ["TRUST_HINT", "untrusted_endpoint"]

#: What to do about it: the variables Python's ssl (aiohttp) and requests read.
TRUST_HINT = (
    "set SSL_CERT_FILE and REQUESTS_CA_BUNDLE to a file of the authorities to trust, this one's "
    "among them (the local stack's local.settings.json names funcstack's in both: give it with "
    "--settings, or export them)"
)
#: The app settings naming the account (a connection string; its endpoint, with an identity).
CONNECTION, ACCOUNT_ENDPOINT = "CosmosDBConnection", "CosmosDBConnection__accountEndpoint"
#: How long the handshake may take.
HANDSHAKE_SECONDS = 5.0


def _endpoint() -> str | None:
    """The account endpoint the settings name (the environment's, a --settings file's in it)."""
    endpoint = os.environ.get(ACCOUNT_ENDPOINT)
    connection = os.environ.get(CONNECTION) or ""
    for part in connection.split(";"):
        name, _, value = part.partition("=")
        if name.strip().lower() == "accountendpoint":
            endpoint = value.strip()
    return endpoint or None


def untrusted_endpoint() -> str | None:
    """The Cosmos DB endpoint the settings name, when its certificate fails this process's
    verification (its trust store, SSL_CERT_FILE); None when it passes, cannot be reached, or
    is not verified (COSMOS_VERIFY_TLS=false)."""
    endpoint = _endpoint()
    if endpoint is None or os.environ.get("COSMOS_VERIFY_TLS", "").lower() == "false":
        return None
    url = urlsplit(endpoint)
    if url.scheme != "https" or url.hostname is None:
        return None
    try:
        with (
            socket.create_connection((url.hostname, url.port or 443), HANDSHAKE_SECONDS) as raw,
            ssl.create_default_context().wrap_socket(raw, server_hostname=url.hostname),
        ):
            return None
    except ssl.SSLCertVerificationError:
        return endpoint
    except OSError:
        return None
