"""An app trusts the local endpoint as it trusts Azure: given the environment funcstack gives
the hosts and processes it starts (``trusting_environment``: ``SSL_CERT_FILE`` and
``REQUESTS_CA_BUNDLE`` naming the bundle of what the environment trusted and funcstack's
authority), a plain azure-cosmos client, sync and aio, with no TLS option at all, verifies every
request and prints no warning; without it, the same client refuses the endpoint (so the SDK does
verify it: azure-cosmos turns verification off for 127.0.0.1 and localhost, not for the address
the endpoint is named by). The bundle keeps what the environment trusted (an app on funcstack
also talks to Azure), and a process that trusts the authority already is its own bundle."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import certifi
import pytest

from funcstack.cosmos._launcher import _named
from funcstack.cosmos._tls import ADDRESS, local_tls, trusting_environment
from funcstack.deadlines import SHORT
from funcstack.services import free_port

from .conftest import Target

pytestmark = pytest.mark.integration

#: An app's code: the SDK's clients as in Azure, every warning an error (urllib3's
#: InsecureRequestWarning is what an unverified request prints).
APP = """
import asyncio, os, warnings
warnings.simplefilter("error")
from azure.cosmos import CosmosClient
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

connection = os.environ["COSMOS"]
print(len(list(CosmosClient.from_connection_string(connection).list_databases())))

async def aio() -> int:
    async with AsyncCosmosClient.from_connection_string(connection) as client:
        return len([d async for d in client.list_databases()])

print(asyncio.run(aio()))
"""


def app(environment: dict[str, str], connection: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", APP],
        env={**environment, "COSMOS": connection},
        capture_output=True,
        text=True,
        timeout=SHORT,  # an app's few requests
        check=False,
    )


def test_an_app_in_funcstacks_environment_verifies_the_endpoint_unchanged(
    cosmos: Target,
) -> None:
    if cosmos.local is None:
        pytest.skip("funcstack's endpoint only")
    assert urlsplit(cosmos.endpoint).hostname == ADDRESS  # not a host the SDK skips
    connection = cosmos.local.connection_string
    trusting = app(trusting_environment(dict(os.environ)), connection)
    assert trusting.returncode == 0, trusting.stderr
    assert "Warning" not in trusting.stderr
    public_only = {**os.environ, "SSL_CERT_FILE": certifi.where()}
    public_only["REQUESTS_CA_BUNDLE"] = certifi.where()
    refused = app(public_only, connection)
    assert refused.returncode != 0
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr


def test_the_bundle_keeps_what_the_environment_trusted(tmp_path: Path) -> None:
    theirs = tmp_path / "corporate.pem"  # a trust store of the environment's own
    theirs.write_text(Path(certifi.where()).read_text(encoding="utf-8"), encoding="utf-8")
    made = local_tls(folder=tmp_path / "tls", environment={"SSL_CERT_FILE": str(theirs)})
    held = made.bundle_file.read_text(encoding="utf-8")
    assert made.bundle_file != theirs
    assert held.startswith(theirs.read_text(encoding="utf-8").rstrip("\n"))
    assert held.endswith(made.ca_file.read_text(encoding="ascii"))
    assert made.environment() == {"SSL_CERT_FILE": str(made.bundle_file)} | {
        "REQUESTS_CA_BUNDLE": str(made.bundle_file)
    }
    # a process funcstack started trusts the authority already: its bundle is its own
    given = trusting_environment({"SSL_CERT_FILE": certifi.where()})
    assert trusting_environment(given) == given


def test_where_the_address_cannot_be_reached_the_endpoint_keeps_its_own_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No IPv6 in the kernel (here: nothing listening there): the endpoint is named by the
    address it listens on, and the log says azure-cosmos will not verify it."""
    port = free_port()  # nothing listens there
    listening = f"https://127.0.0.1:{port}/"
    with caplog.at_level(logging.WARNING, logger="funcstack.cosmos._launcher"):
        assert _named(listening, "127.0.0.1", port) == listening
    assert "azure-cosmos turns TLS verification off" in caplog.text
    lan = f"https://10.1.2.3:{port}/"  # a host the SDK verifies: named as it listens
    assert _named(lan, "10.1.2.3", port) == lan
