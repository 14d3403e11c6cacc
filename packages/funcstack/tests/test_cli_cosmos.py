"""``funcstack cosmos`` as a user meets it: the Cosmos DB endpoint alone from a folder, its
certificate verified by the unmodified azure-cosmos SDK (sync and aio) given the authority the
ready line names, with no warning; refused by a client that trusts other authorities only; its
state kept across a stop and a start; found by ``funcstack partitions`` from the same folder; a
second one from that folder refused in one line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import certifi
import pytest
from azure.core.exceptions import ServiceRequestError
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from azure.cosmos.documents import SSLConfiguration
from azure.cosmos.exceptions import CosmosHttpResponseError

from funcstack.deadlines import LOOPBACK, SHORT, wait_for

pytestmark = pytest.mark.integration


@contextmanager
def endpoint(folder: Path) -> Iterator[dict[str, Any]]:
    """``funcstack cosmos --port 0 --json`` running in ``folder``: its ready line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "funcstack", "cosmos", "--port", "0", "--json"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        process_group=0,
    )
    lines: list[str] = []
    assert process.stdout is not None
    stdout = process.stdout
    reader = threading.Thread(target=lambda: lines.extend(stdout), daemon=True)
    reader.start()

    def started() -> bool:
        assert process.poll() is None, f"funcstack cosmos ended ({process.returncode})"
        return bool(lines)

    try:
        wait_for(started, "funcstack cosmos's ready line")
        ready = json.loads(lines[0])
        assert ready["ready"] is True
        yield ready
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(SHORT)
        reader.join(LOOPBACK)
        if not reader.is_alive():  # its pipe closed here, not by a collection in a later test
            stdout.close()


def funcstack(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "funcstack", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=False,
    )


def tls(ready: dict[str, Any], ca: str | None = None) -> SSLConfiguration:
    config = SSLConfiguration()
    config.SSLCaCerts = ca or ready["caFile"]
    config.SSLCertFile, config.SSLKeyFile = ready["clientCertFile"], ready["clientKeyFile"]
    return config


def test_the_endpoint_alone_is_verified_and_keeps_its_state(tmp_path: Path) -> None:
    with endpoint(tmp_path) as ready, warnings.catch_warnings():
        warnings.simplefilter("error")  # an unverified request would warn: an error here
        key = ready["connectionString"].split("AccountKey=")[1].rstrip(";")
        client = CosmosClient(ready["endpoint"], key, ssl_config=tls(ready))
        orders = client.create_database("shop").create_container(
            "orders", PartitionKey("/pk"), headers={"x-funcstack-physical-partitions": "2"}
        )
        orders.create_item({"id": "1", "pk": "a"})

        async def read() -> dict[str, Any]:
            async with AsyncCosmosClient(ready["endpoint"], key, ssl_config=tls(ready)) as aio:
                container = aio.get_database_client("shop").get_container_client("orders")
                return await container.read_item("1", "a")

        assert asyncio.run(read())["id"] == "1"
        # a client trusting only the public authorities refuses the endpoint
        with pytest.raises(ServiceRequestError, match="CERTIFICATE_VERIFY_FAILED"):
            CosmosClient(
                ready["endpoint"], key, ssl_config=tls(ready, certifi.where()), retry_total=0
            )
        listed = funcstack(tmp_path, "partitions", "shop", "orders")
        assert listed.stdout.splitlines()[0] == "shop/orders: 2 physical partition(s)"
        again = funcstack(tmp_path, "cosmos", "--port", "0")
        assert again.returncode == 1 and "already running from this folder" in again.stderr
    with endpoint(tmp_path) as ready:
        key = ready["connectionString"].split("AccountKey=")[1].rstrip(";")
        client = CosmosClient(ready["endpoint"], key, ssl_config=tls(ready))
        orders = client.get_database_client("shop").get_container_client("orders")
        assert orders.read_item("1", "a")["pk"] == "a"
        with pytest.raises(CosmosHttpResponseError):
            orders.read_item("2", "a")
