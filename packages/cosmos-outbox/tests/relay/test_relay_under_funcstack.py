"""`cosmos-outbox relay` as instances of a local stack (`funcstack run --process`), as
docs/relay-anywhere.md (Locally, beside the app) shows it: two relay processes beside the
relay app (its trigger and timer disabled), with the app's settings from funcstack, ready once
their /ready answers; they share the leases under their instance names; Ctrl-C ends each with
its leases released (the processes stop before Cosmos DB does). The relay's claim check is off
and the stack declares no storage: no Azurite starts (the claim check's start is held by
test_hosted_relay.py and the Contacts' claim check). Killing, pausing and adding
instances is funcstack's part, tested there with a tiny script (test_cli_processes.py).

Each relay instance runs in a process group of its own, which a kill of funcstack's group does
not reach: whatever the test's end, the instances it started are ended (`relay_instances`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason="funcstack in this interpreter (Python 3.13+) runs these tests: its services",
)

from azure.cosmos import CosmosClient
from deadlines import LONG, LOOPBACK, SHORT
from deadlines import wait_for as wait_for_deadline

from funcstack.cosmos import local_tls
from funcstack.services import OwnProcess

pytestmark = pytest.mark.integration

TESTS = Path(__file__).parents[1]
RELAY = (
    f"{sys.executable} -m cosmos_outbox relay --port {{port}} --lease-acquire-interval 0.5 "
    "--lease-renew-interval 0.5 --lease-expiration-interval 3"
)


def wait_for(condition: Callable[[], bool], what: str, deadline: float = SHORT) -> None:
    """`deadlines.wait_for`, polling every 0.2 s (each poll reads the leases)."""
    wait_for_deadline(condition, what, deadline, every=0.2)


def relays_started_by(parent: int) -> list[int]:
    """The pids of the `cosmos-outbox relay` processes `parent` started that still run (from
    /proc: ready or not, restarted or not)."""
    found: list[int] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # the command name (field 2) is in parentheses and may hold spaces: split after it
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        if ppid == parent and b"cosmos_outbox" in cmdline and b"relay" in cmdline:
            found.append(int(stat.parent.name))
    return found


@pytest.fixture
def relay_instances() -> Iterator[dict[int, OwnProcess]]:
    """The relay instances a test's funcstack started (by pid, as they were when the test named
    them: a reused pid is never one of them), SIGKILLed, each with its process group, at the
    test's end if still running: a failure that kills funcstack leaves none running."""
    started: dict[int, OwnProcess] = {}
    yield started
    for process in started.values():
        if process.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    wait_for(
        lambda: not any(p.alive() for p in started.values()), "the relay instances ended", LOOPBACK
    )


def name_relays(started: dict[int, OwnProcess], pids: list[int]) -> None:
    """Add the running processes of `pids` to `started` (`relay_instances`)."""
    for pid in pids:
        if pid not in started and (process := OwnProcess.of("relay", pid)) is not None:
            started[pid] = process


# what an instance's log says of a lease: taken, lost to another, released or handed over
LEASE_EVENT = re.compile(r"processor 'outbox\.': lease (\S+) (acquired|lost|released|handed over)")


def test_relay_processes_in_a_local_stack_share_the_leases_and_release_them_at_the_stop(
    tmp_path: Path, relay_instances: dict[int, OwnProcess]
) -> None:
    app = tmp_path / "orders"
    app.mkdir()
    for name in ("function_app.py", "host.json"):
        (app / name).write_text((TESTS / "relay_app" / name).read_text())
    sample = json.loads((TESTS / "relay_app" / "local.settings.sample.json").read_text())
    sample["Values"].update(  # the relay runs in the processes only
        {
            "AzureWebJobs.relay_events.Disabled": "true",
            "AzureWebJobs.outbox_backlog.Disabled": "true",
            # no claim check: the relay would check its payload container before it first
            # relays, and that first connection would start an Azurite, which nothing here holds
            "OUTBOX_PAYLOAD_MAX_BYTES": "0",
        }
    )
    (app / "local.settings.sample.json").write_text(json.dumps(sample))
    config = json.loads((TESTS / "fixtures" / "funcstack.json").read_text())
    [outbox] = [c for c in config["Cosmos"]["Databases"][0]["Containers"] if c["Name"] == "outbox"]
    outbox["PhysicalPartitions"] = 2  # two leases: one each
    del config["Storage"]  # none declared: none provisioned, so no Azurite started
    (tmp_path / "funcstack.json").write_text(json.dumps(config))
    # the settings are the app's, from funcstack: none of this machine's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "Cosmos"))}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "funcstack",
            "run",
            "--app",
            "orders",
            "--free-ports",
            "--json",
            "--process",
            f"relay={RELAY}",
            "--process-instances",
            "relay=2",
            "--process-ready",
            "relay=http://127.0.0.1:{port}/ready",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        process_group=0,
    )
    lines: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_for(lambda: bool(lines) or process.poll() is not None, "the ready line", LONG)
        ready: dict[str, Any] = json.loads(lines[0])
        assert ready["ready"] is True, ready
        name_relays(relay_instances, [i["pid"] for i in ready["instances"]["relay"]])
        assert [i["name"] for i in ready["instances"]["relay"]] == ["relay-1", "relay-2"]
        client = CosmosClient.from_connection_string(  # verifying the endpoint's certificate
            ready["cosmos"], **local_tls().client_options()
        )
        leases = client.get_database_client("outbox-tests").get_container_client("leases")

        def owners() -> Counter[str]:
            return Counter(
                str(doc.get("Owner") or "-")
                for doc in leases.query_items("SELECT * FROM c", enable_cross_partition_query=True)
                if "LeaseToken" in doc
            )

        # the owners are the instances' names (CONTAINER_APP_REPLICA_NAME)
        wait_for(lambda: owners() == Counter({"relay-1": 1, "relay-2": 1}), "a lease each")

        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
        assert process.wait(SHORT) == 0
    finally:
        if process.poll() is None:
            # its instances too, even those it started before a ready line that never came
            name_relays(relay_instances, relays_started_by(process.pid))
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(SHORT)
    # every lease an instance held at the stop released by it (on a busy machine a lease may
    # have moved, or expired unheld, after the check above: what counts is who held it then)
    held_then: set[str] = set()
    for name in ("relay-1", "relay-2"):
        log = (tmp_path / ".funcstack" / f"{name}.log").read_text("utf-8", "replace")
        stop = log.rindex("SIGTERM received")  # the last run's stop
        held: set[str] = set()
        for token, what in LEASE_EVENT.findall(log[:stop]):
            (held.add if what == "acquired" else held.discard)(token)
        let_go = {token for token, what in LEASE_EVENT.findall(log[stop:]) if what != "acquired"}
        assert held <= let_go, (name, held, let_go, log[stop:])
        assert "not released" not in log[stop:], log[stop:]
        held_then |= held
    assert held_then, "no lease held at the stop: nothing was proven"
