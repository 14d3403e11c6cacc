"""An instance killed for real (SIGKILL of its process: no release, no last checkpoint): another
instance takes its leases once they expire, not before -- each taken at least the expiration
interval after the killed instance last wrote it (compared with the lease's own timestamp, not
with a stopwatch: how soon after that the heir comes depends on the machine's speed, and is
waited for under a named deadline) -- and reads on from their checkpoints, so every change is
delivered at least once."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import ContainerProxy
from deadlines import SHORT, wait_for

from cosmos_changefeed import ChangeFeedProcessor, Lease, LeaseContext

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]
EXPIRATION, ACQUIRE = 2.0, 0.3

INSTANCE = textwrap.dedent(
    """
    import os, sys, time
    from azure.cosmos import CosmosClient
    from azure.cosmos.documents import SSLConfiguration
    from cosmos_changefeed import ChangeFeedProcessor, CheckpointPolicy

    tls = SSLConfiguration()
    tls.SSLCaCerts = os.environ["CA"]  # funcstack's local authority: the endpoint verified
    client = CosmosClient(os.environ["ENDPOINT"], os.environ["KEY"], ssl_config=tls)
    database = client.get_database_client(os.environ["DATABASE"])
    out = open(os.environ["OUT"], "a", encoding="utf-8")

    def handler(context, changes):
        out.write("".join(doc["id"] + "\\n" for doc in changes) + "--\\n")
        out.flush()
        time.sleep(float(os.environ.get("HANDLER_SECONDS", "0")))

    processor = ChangeFeedProcessor(
        database.get_container_client(os.environ["MONITORED"]),
        database.get_container_client(os.environ["LEASES"]),
        processor_name="p", instance_name="doomed", handler=handler, poll_delay=0.1,
        max_items=int(os.environ.get("MAX_ITEMS", "100")),
        lease_acquire_interval=0.3, lease_renew_interval=0.5, lease_expiration_interval=2.0,
        start_from=os.environ.get("START", "now"),
        checkpoint=CheckpointPolicy(batches=int(os.environ.get("CHECKPOINT_BATCHES", "1"))),
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
        "CA": str(cosmos.client_options()["connection_verify"]),
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
        deadline = time.monotonic() + SHORT
        while not set(delivered_by(out)) >= first:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
    # the killed instance's last writes of its leases: none is taken before it expires
    last_written = {lease.lease_token: lease.last_updated for lease in stored(leases)}
    second = {f"b{i}" for i in range(30)}
    for doc_id in sorted(second):
        monitored.create_item({"id": doc_id, "pk": doc_id})
    delivered: set[str] = set()
    acquired: dict[str, dt.datetime] = {}

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
        on_lease_acquired=lambda token: acquired.setdefault(token, dt.datetime.now(dt.UTC)),
    ) as heir:
        wait_for(lambda: len(heir.owned_leases) == 3, "the heir takes the 3 expired leases")
        wait_for(lambda: delivered >= second, "the heir delivers what was written after the kill")
    assert {lease.owner for lease in stored(leases)} == {None}
    early = {
        token: f"{(acquired[token] - written).total_seconds():.1f}s"
        for token, written in last_written.items()
        if acquired[token] - written < dt.timedelta(seconds=EXPIRATION)
    }
    assert not early, (
        f"taken before the leases expired ({EXPIRATION:g} s after their last write): {early}"
    )
    assert delivered | set(delivered_by(out)) >= first | second


def stored(leases: ContainerProxy) -> list[Lease]:
    return [Lease.from_document(d) for d in leases.read_all_items() if "LeaseToken" in d]


def delivered_by(out: Path) -> list[str]:
    """The ids a process's handler was given (its batches end with "--")."""
    return [line for line in out.read_text().split() if line != "--"] if out.exists() else []


def batches_of(out: Path) -> list[list[str]]:
    batches: list[list[str]] = []
    batch: list[str] = []
    for line in out.read_text().split():
        if line == "--":
            batches.append(batch)
            batch = []
        else:
            batch.append(line)
    return batches


def one_key_backlog(
    cosmos: CosmosEndpoint, make_container: MakeContainer, out: Path, **settings: str
) -> tuple[ContainerProxy, ContainerProxy, list[str], subprocess.Popen[str]]:
    """40 changes of one partition key, and a process reading them from the beginning (its
    handler 0.3 s a batch) with ``settings`` (``MAX_ITEMS``, ``CHECKPOINT_BATCHES``): the
    monitored and lease containers, the changes, the process (listening)."""
    monitored, leases = make_container(1), make_container(path="/id")
    docs = [f"d{i:02d}" for i in range(40)]
    for doc_id in docs:
        monitored.create_item({"id": doc_id, "pk": "one-key"})
    environment = {
        **os.environ,
        "ENDPOINT": cosmos.endpoint,
        "KEY": cosmos.key,
        "CA": str(cosmos.client_options()["connection_verify"]),
        "DATABASE": monitored.container_link.split("/")[1],
        "MONITORED": monitored.id,
        "LEASES": leases.id,
        "OUT": str(out),
        "PYTHONWARNINGS": "ignore",
        "HANDLER_SECONDS": "0.3",
        "START": "beginning",
        **settings,
    }
    doomed = subprocess.Popen(
        [sys.executable, "-c", INSTANCE], env=environment, stdout=subprocess.PIPE, text=True
    )
    assert doomed.stdout is not None and doomed.stdout.readline().strip() == "listening"
    return monitored, leases, docs, doomed


def given_again(
    monitored: ContainerProxy, leases: ContainerProxy, docs: list[str], out: Path
) -> set[str]:
    """An heir reads the lease on until every change is delivered: what it was given that the
    killed process had been given."""
    delivered: list[str] = []

    def handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        delivered.extend(doc["id"] for doc in changes)

    with ChangeFeedProcessor(
        monitored,
        leases,
        processor_name="p",
        instance_name="heir",
        handler=handler,
        start_from="beginning",
        poll_delay=0.1,
        lease_acquire_interval=ACQUIRE,
        lease_renew_interval=0.5,
        lease_expiration_interval=EXPIRATION,
    ):
        deadline = time.monotonic() + SHORT
        while len(set(delivered) | set(delivered_by(out))) < len(docs):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    return set(delivered) & set(delivered_by(out))


def test_a_kill_in_a_handler_gives_the_next_owner_that_batch_again_and_no_other(
    cosmos: CosmosEndpoint, make_container: MakeContainer, tmp_path: Path
) -> None:
    """Checkpoint after the handler, at least once -- and no more than the batch in flight: a
    batch's checkpoint is written (while the next batch is read) before the next batch is handed
    over, so a kill in a handler leaves every earlier batch checkpointed."""
    out = tmp_path / "doomed.txt"
    monitored, leases, docs, doomed = one_key_backlog(cosmos, make_container, out, MAX_ITEMS="5")
    try:
        deadline = time.monotonic() + SHORT
        while len(batches_of(out)) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # the third batch's checkpoint, written after its handler, is slowed down (throttled
        # twice, 0.4 s each): the fourth batch is handed over only once it is written
        cosmos.inject_fault(429, count=2, retry_after_ms=400, methods=["PUT"])
        while len(batches_of(out)) < 4:  # the fourth batch is in its handler
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        cosmos.clear_faults()
    handed = batches_of(out)
    again = given_again(monitored, leases, docs, out)
    assert again <= set(handed[-1]), f"given again beyond the batch in flight: {sorted(again)}"


def test_a_kill_between_checkpoints_gives_the_next_owner_the_batches_since_the_last_one(
    cosmos: CosmosEndpoint, make_container: MakeContainer, tmp_path: Path
) -> None:
    """The resend bound of ``CheckpointPolicy(batches=5)``, against a real crash: a process
    SIGKILLed in a handler, between two checkpoints; its heir is given again the batches it
    handled since its last checkpoint (fewer than 5) and the one in flight -- and no other."""
    out = tmp_path / "doomed.txt"
    monitored, leases, docs, doomed = one_key_backlog(
        cosmos, make_container, out, MAX_ITEMS="2", CHECKPOINT_BATCHES="5"
    )
    try:
        deadline = time.monotonic() + SHORT
        while len(batches_of(out)) < 8:  # the 8th is in its handler: 3 past the checkpoint
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
    handed = batches_of(out)
    again = given_again(monitored, leases, docs, out)
    checkpointed = (len(handed) - 1) // 5 * 5  # the batches up to the last checkpoint
    since = [doc for batch in handed[checkpointed:] for doc in batch]
    assert 1 <= len(handed) - checkpointed <= 5
    assert sorted(again) == sorted(since)
