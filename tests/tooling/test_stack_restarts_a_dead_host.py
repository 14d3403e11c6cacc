"""`make run`'s stack restarts a dead host, as Azure restarts one, and a bulk operation the dead
host held is taken over once its lease ran out (docs/operating.md: "taken over by another (or by
itself restarted) a minute later, each item acted on once").

The stack is tools.stack's, with the restart `make run` gives it (`tools.stack.serve`: funcstack's
`host_restart`, `RestartPolicy()`). A re-drive of every event of 40 contacts (2,000 events) to
the all-events subscription is started as an operator starts it (`tools.admin redrive
--operation`, the operators' CLI on the app's stores); the contacts app's host works it (its
`outbox_operations` timer) and is SIGKILLed from outside once it holds the operation. The stack
starts the host again on its port; the restarted host's worker takes the operation over after the
dead one's lease (`LEASE_SECONDS`, a minute after its last write) and finishes it; each event
reaches the subscription once (the batch the dead host had begun is sent again under the same
MessageIds, which the topic drops).

Every wait is for what the store or the subscription shows, under a named deadline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, SHORT, wait_for
from funcstack.scaleout import RestartPolicy
from funcstack.servicebus import ServiceBusEndpoint
from tests.contacts.outbox.test_operating_the_outbox import plant_history
from tools.receive import Received, drain
from tools.stack import ROOT, Ports, Stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack("the app's host SIGKILLed and restarted by the stack"),
]
#: The events re-driven: 40 contacts' creations and 49 changes each.
CONTACTS, CHANGES = 40, 49
#: Where the operations' documents are (the outbox's container, their own partition).
OPERATIONS = "outbox-operations"


@pytest.fixture
def stack(
    tmp_path: Path, shared_cosmos: CosmosEndpoint, shared_servicebus: ServiceBusEndpoint
) -> Iterator[Stack]:
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        workdir=tmp_path / "stack",
        ports=Ports.free(),
        host_restart=RestartPolicy(),  # what `make run` gives its stack (tools.stack.serve)
        settings_overrides={
            "OUTBOX_OPERATIONS_SCHEDULE": "*/2 * * * * *",  # the app's default: 5 s
            "BACKLOG_ESTIMATE_SCHEDULE": "0 0 0 1 1 *",
        },
    ) as started:
        yield started


def redrive_operation(stack: Stack, since: datetime) -> str:
    """A re-drive of the events since `since` to all-events, as a bulk operation, started by
    the operators' command line on the app's stores; its id."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.admin",
            "--settings",
            str(stack.settings_file),
            "--json",
            "redrive",
            "--since",
            since.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "--subscription",
            "all-events",
            "--operation",
        ],
        capture_output=True,
        text=True,
        timeout=SHORT,  # a hang guard: the command line's own calls are bounded
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def operation(stack: Stack, operation_id: str) -> dict[str, Any]:
    """The operation's document as the store holds it."""
    return dict(stack.contacts_container().read_item(operation_id, partition_key=OPERATIONS))


def worker_of(host: int) -> int:
    """The pid of the host's language worker (its process group's other process): the app's
    code, the operations' worker with it, runs there."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == host and int(stat.parent.name) != host and fields[0] != "Z":
            found.append(int(stat.parent.name))
    [worker] = found
    return worker


def host_pid(stack: Stack) -> int | None:
    """The pid of the contacts app's host while it runs."""
    runner = stack.runner
    return runner.process.pid if runner is not None and runner.process.poll() is None else None


def said(began: float, what: str) -> None:
    """A phase of the walk, with the time since it began (printed: read with -s)."""
    print(f"{time.monotonic() - began:7.1f} s  {what}", flush=True)


@pytest.mark.timeout(3 * LONG)  # its waits are each under a named deadline: their sum
def test_a_bulk_operation_held_by_a_host_killed_is_taken_over_by_the_restarted_host_once(
    stack: Stack,
) -> None:
    began = time.monotonic()
    assert stack.runner is not None
    since = datetime.now(UTC) - timedelta(seconds=5)
    events = set()
    for i in range(CONTACTS):
        _, ids = plant_history(
            stack.contacts_container(), f"Restart{time.monotonic_ns()}{i}", CHANGES
        )
        events |= set(ids)
    said(began, f"{len(events)} changes planted")
    killed, port = stack.runner.process.pid, stack.runner.port
    dead_worker = worker_of(killed)

    started = redrive_operation(stack, since)
    # killed once it works a batch: the batch's keys written, some of it perhaps sent
    held = wait_for(
        lambda: (doc := operation(stack, started))["owner"] and doc["batch"] and doc,
        "the host working a batch of it",
        SHORT,
        every=0.02,
    )
    assert f"/{dead_worker}/" in held["owner"], held["owner"]  # the killed host's worker
    os.kill(killed, signal.SIGKILL)
    killed_at = time.time()
    wait_for(lambda: host_pid(stack) not in (None, killed), "the host started again", SHORT)
    at_kill = operation(stack, started)
    assert at_kill["owner"] == held["owner"] and at_kill["state"] != "done", at_kill
    said(began, f"host killed working a batch of it, at {at_kill['counts']}; restarted")
    assert stack.runner.port == port  # the banner's URL
    restarted_worker = worker_of(stack.runner.process.pid)
    taken = wait_for(
        lambda: (doc := operation(stack, started))["owner"] != held["owner"] and doc,
        "the operation taken over",
        LONG,
    )
    said(
        began,
        f"taken over {time.time() - killed_at:.1f} s after the kill, "
        f"{time.time() - at_kill['leaseUntil']:.1f} s after the dead host's lease ran out",
    )
    assert f"/{restarted_worker}/" in taken["owner"], taken["owner"]

    done = wait_for(
        lambda: (doc := operation(stack, started))["state"] == "done" and doc["finishedAt"] and doc,
        "the operation done by the restarted host",
        LONG,
    )
    said(began, f"done: {done['counts']}")
    # taken over by the restarted host's worker, once the dead one's lease had run out
    assert f"/{restarted_worker}/" in done["owner"], done["owner"]
    finished = datetime.fromisoformat(done["finishedAt"]).timestamp()
    assert finished >= at_kill["leaseUntil"], (done["finishedAt"], at_kill["leaseUntil"])
    items = done["counts"]["items"]
    assert (items, done["counts"]["done"], done["counts"]["failed"]) == (
        len(events),
        items,
        0,
    ), done["counts"]

    # each event reaches the subscription once: what the dead host had sent of its batch is sent
    # again under the same MessageIds, which the topic drops
    def redriven(received: list[Received]) -> Counter[str]:
        return Counter(
            str(r.properties.get("cloudEvents_id"))
            for r in received
            if r.properties.get("outboxRedrive") == started
        )

    received = drain(
        stack.servicebus.connection_string if stack.servicebus else "",
        topic=stack.settings()["SERVICEBUS_TOPIC"],
        until=lambda got: len(redriven(got)) >= items,
        timeout=LONG,
    )
    received += drain(
        stack.servicebus.connection_string if stack.servicebus else "",
        topic=stack.settings()["SERVICEBUS_TOPIC"],
        until=lambda _: False,  # anything more, for a moment
        timeout=deadlines.scaled(3.0),
    )
    counted = redriven(received)
    said(began, f"{sum(counted.values())} re-driven message(s) received, {len(counted)} events")
    assert set(counted) >= events, f"{len(events - set(counted))} event(s) never re-driven"
    twice = {event: n for event, n in counted.items() if n != 1}
    assert twice == {}, f"re-driven more than once: {twice}"
