"""An instance killed for real (SIGKILL of its process: no release, no last checkpoint): another
instance takes its leases once they expire -- within the expiration interval plus an acquire
interval -- and reads on from their checkpoints, so every change is delivered at least once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import ContainerProxy

from cosmos_changefeed import ChangeFeedProcessor, Lease, LeaseContext
from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]
EXPIRATION, ACQUIRE = 2.0, 0.3

INSTANCE = textwrap.dedent(
    """
    import os, sys, time
    from azure.cosmos import CosmosClient
    from cosmos_changefeed import ChangeFeedProcessor

    client = CosmosClient(os.environ["ENDPOINT"], os.environ["KEY"], connection_verify=False)
    database = client.get_database_client(os.environ["DATABASE"])
    out = open(os.environ["OUT"], "a", encoding="utf-8")

    def handler(context, changes):
        out.write("".join(doc["id"] + "\\n" for doc in changes))
        out.flush()

    processor = ChangeFeedProcessor(
        database.get_container_client(os.environ["MONITORED"]),
        database.get_container_client(os.environ["LEASES"]),
        processor_name="p", instance_name="doomed", handler=handler, poll_delay=0.1,
        lease_acquire_interval=0.3, lease_renew_interval=0.5, lease_expiration_interval=2.0,
    )
    processor.start()
    processor.wait_until_listening(30)
    print("listening", flush=True)
    while True:
        time.sleep(1)
    """
)


def test_a_killed_instances_leases_are_taken_after_expiry_and_nothing_is_lost(
    cosmos: CosmosEndpoint, make_container: MakeContainer, tmp_path: Path
) -> None:
    monitored, leases = make_container(3), make_container(path="/id")
    out = tmp_path / "doomed.txt"
    environment = {
        **os.environ,
        "ENDPOINT": cosmos.endpoint,
        "KEY": cosmos.key,
        "DATABASE": monitored.container_link.split("/")[1],
        "MONITORED": monitored.id,
        "LEASES": leases.id,
        "OUT": str(out),
        "PYTHONWARNINGS": "ignore",
    }
    doomed = subprocess.Popen(
        [sys.executable, "-c", INSTANCE], env=environment, stdout=subprocess.PIPE, text=True
    )
    try:
        assert doomed.stdout is not None and doomed.stdout.readline().strip() == "listening"
        first = {f"a{i}" for i in range(30)}
        for doc_id in sorted(first):
            monitored.create_item({"id": doc_id, "pk": doc_id})
        deadline = time.monotonic() + 15
        while not set(out.read_text().split()) >= first if out.exists() else True:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
    killed = time.monotonic()
    second = {f"b{i}" for i in range(30)}
    for doc_id in sorted(second):
        monitored.create_item({"id": doc_id, "pk": doc_id})
    delivered: set[str] = set()

    def handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        delivered.update(doc["id"] for doc in changes)

    with ChangeFeedProcessor(
        monitored,
        leases,
        processor_name="p",
        instance_name="heir",
        handler=handler,
        poll_delay=0.1,
        lease_acquire_interval=ACQUIRE,
        lease_renew_interval=0.5,
        lease_expiration_interval=EXPIRATION,
    ) as heir:
        deadline = time.monotonic() + 20
        while len(heir.owned_leases) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        taken = time.monotonic() - killed
        while not delivered >= second:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    stored = [Lease.from_document(d) for d in leases.read_all_items() if "LeaseToken" in d]
    assert {lease.owner for lease in stored} == {None}
    assert taken < EXPIRATION + ACQUIRE + 2.0, f"taken over after {taken:.1f}s"
    assert taken > EXPIRATION - 1.0, f"taken over after {taken:.1f}s: before the leases expired"
    assert delivered | set(out.read_text().split()) >= first | second
