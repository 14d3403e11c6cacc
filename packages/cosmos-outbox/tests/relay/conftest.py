"""The relay modules' fixtures: the `cosmos-outbox relay` subprocesses a test starts (killed at
its end if still running), and a container of the outbox's shape on 4 physical partitions."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from deadlines import LOOPBACK


@pytest.fixture
def relay_command() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(LOOPBACK)


@pytest.fixture
def four_partitions(admin_database: Any) -> Iterator[str]:
    """A container of the outbox's shape on 4 physical partitions (4 leases)."""
    from azure.cosmos import PartitionKey

    from funcstack.provision import PARTITIONS_HEADER

    name = f"outbox-{uuid.uuid4().hex[:12]}"
    admin_database.create_container(
        id=name,
        partition_key=PartitionKey(path="/partitionKey"),
        default_ttl=-1,
        headers={PARTITIONS_HEADER: "4"},
    )
    try:
        yield name
    finally:
        admin_database.delete_container(name)
