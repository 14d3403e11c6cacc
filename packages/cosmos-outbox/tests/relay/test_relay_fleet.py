"""The relay in a mixed fleet: a Functions trigger instance (funcstack's host, relay_app,
balancing as the Azure host's .NET processor does: `FUNCTIONS_HOST_COSMOS_BALANCING=dotnet`) and
`cosmos-outbox relay` processes on one lease container, 4 physical partitions, writers running;
an even spread between the two kinds;
hand-over from the trigger to the processes and back, a process SIGKILLed: every event received
once, in order per aggregate (issue 64's hand-over and mixed-fleet chaos, kept short: a module
of its own, so `--dist loadfile` runs it beside test_relay_process.py)."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason="funcstack in this interpreter (Python 3.13+) runs these tests: its services",
)

from azure_stack import DATABASE, received
from deadlines import LONG, SHORT

from funcstack import LocalStack
from relay.fleet import RELAY_APP, Writers, app_settings, fast_trigger, owners, takeover, until
from relay.test_relay_process import start_command

pytestmark = pytest.mark.integration


def even(owned: dict[str, str | None], instances: int) -> bool:
    """Every lease owned, by ``instances`` instances holding within one lease of each other."""
    counts = Counter(owned.values())
    if None in counts or len(counts) != instances:
        return False
    return max(counts.values()) - min(counts.values()) <= 1


def differences(got: list[int], n: int) -> str:
    """How an aggregate's steps as received differ from 0..n-1 in order (for the failure)."""
    counts = Counter(got)
    lost = [step for step in range(n) if step not in counts]
    twice = sorted(step for step, seen in counts.items() if seen > 1)
    disorder = [(a, b) for a, b in itertools.pairwise(got) if b < a]
    return f"(of {n}): lost {lost}, twice {twice}, out of order {disorder}"


def test_a_mixed_fleet_hands_over_and_survives_a_kill_nothing_lost_twice_or_out_of_order(
    funcstack_services: LocalStack,
    funcstack_app: Any,
    four_partitions: str,
    leases: str,
    tmp_path: Path,
    relay_command: list[subprocess.Popen[str]],
) -> None:
    """Under writers on 4 partitions: the relay on a Functions trigger instance (.NET's
    balancing, as in Azure) and two `cosmos-outbox relay` processes sharing its leases (a
    mixed fleet), the leases spread evenly between the three (2/1/1); the trigger
    stopped, the processes hold them all (hand-over to processes); a partition split live (5
    leases, the processes hold them all); one process paused past its leases' expiry (the other
    takes them) and resumed; one process SIGKILLed, the
    other takes its leases (each takeover waited for under expiry + acquire + SHORT, the
    seconds it took printed); a trigger instance started again and the last process SIGTERMed
    (hand-over back). Every event reaches the subscription once, in order per aggregate."""
    stack, container = funcstack_services, four_partitions
    values = app_settings(stack, container, leases)
    settings_file = tmp_path / "local.settings.json"
    settings_file.write_text(json.dumps({"IsEncrypted": False, "Values": values}), "utf-8")
    host_settings = {
        "COSMOS_CONTAINER": container,
        "COSMOS_LEASE_CONTAINER": leases,
        # the trigger as Azure's host runs it: .NET's processor, which never gives a lease
        # back nor hands one over (the processes take from it what they miss)
        "FUNCTIONS_HOST_COSMOS_BALANCING": "dotnet",
        **fast_trigger(),
    }
    t0 = time.monotonic()
    marks: list[tuple[str, float]] = []

    def mark(what: str) -> None:
        marks.append((what, round(time.monotonic() - t0, 1)))

    with Writers(stack, container, 6) as writers:
        procs = [  # started beside the trigger's host: each takes a share of the leases
            start_command(
                settings_file,
                tmp_path / f"p{i}.log",
                relay_command,
                "--instance-name",
                f"p{i}",
                wait=False,
            )[0]
            for i in (1, 2)
        ]
        first = funcstack_app(RELAY_APP, settings=host_settings, name="fleet-trigger-1")
        spread = until(
            lambda: even(owners(stack, leases), 3),
            "an even spread of the 4 leases between the trigger and the 2 processes",
            takeover(),
        )
        mark(f"even: {sorted(Counter(owners(stack, leases).values()).values())}")
        mark("stack.stop_part(firs")
        stack.stop_part(first.name)  # graceful: the trigger releases its leases
        took = until(
            lambda: set(owners(stack, leases).values()) <= {"p1", "p2"},
            "the processes holding every lease after the trigger stopped",
            takeover(),
        )
        mark("split")
        stack.split(DATABASE, container)  # a live split, as Azure does on its own: 5 leases
        until(
            lambda: (
                len(owners(stack, leases)) == 5
                and set(owners(stack, leases).values()) <= {"p1", "p2"}
            ),
            "the processes holding the split's 5 leases",
            takeover(),
        )
        mark("pause")
        procs[1].send_signal(signal.SIGSTOP)  # paused past its leases' expiry: p1 takes them
        took_after_pause = until(
            lambda: set(owners(stack, leases).values()) == {"p1"},
            "p1 holding p2's leases while p2 is paused",
            takeover(),
        )
        procs[1].send_signal(signal.SIGCONT)  # back: its renewals refused, it takes its share
        until(
            lambda: {"p1", "p2"} <= set(owners(stack, leases).values()),
            "p2 taking its share again after its pause",
            takeover(),
        )
        mark("procs[0].kill()")
        procs[0].kill()  # SIGKILL: its leases expire
        procs[0].wait(SHORT)
        took_after_kill = until(
            lambda: set(owners(stack, leases).values()) == {"p2"},
            "p2 holding p1's leases after p1's SIGKILL",
            takeover(),
        )
        mark("funcstack_app(RELAY_")
        funcstack_app(RELAY_APP, settings=host_settings, name="fleet-trigger-2")
        mark("procs[1].send_signal")
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(SHORT) == 0
        until(
            lambda: (
                "p2" not in owners(stack, leases).values() and all(owners(stack, leases).values())
            ),
            "the trigger holding every lease after p2's SIGTERM",
            takeover(),
        )
        mark("time.sleep(1)  #")
        time.sleep(1)  # the trigger relays while the writers still write (a load, not a verdict)
    total = sum(writers.committed.values())
    mark("writers stopped")
    messages = received(stack, set(writers.committed), total, wait=LONG)
    mark("received")
    steps: dict[str, list[int]] = {}
    for message in messages:
        steps.setdefault(str(message.session_id), []).append(
            json.loads(b"".join(message.body))["n"]
        )
    expected = {key: list(range(n)) for key, n in writers.committed.items()}
    assert steps == expected, (
        "lost, twice or out of order: "
        + "; ".join(
            f"{key} {differences(steps.get(key, []), len(want))}"
            for key, want in expected.items()
            if steps.get(key) != want
        )
        + f"; the run: {marks}"
    )
    print(
        f"fleet: {total} events; even spread (trigger .NET's, 2 processes) after {spread:.1f} s; "
        f"takeover after the trigger's stop {took:.1f} s, "
        f"after a pause {took_after_pause:.1f} s, after a SIGKILL {took_after_kill:.1f} s; {marks}"
    )
