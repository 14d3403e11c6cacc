"""CPU per relayed event: the relay as a process (`cosmos-outbox relay`, on cosmos-changefeed's
change feed processor) beside its floor, the same relay on the Functions trigger (the Contacts
app in funcstack's host: host + worker), in one run on one stack, in alternating rounds.

Each round: the side's processes started and ready (the host's ready line; the process's
/ready: listening), their CPU read (user + system, the process and its descendants, /proc),
then `contacts` contacts with `changes` changes each written to the store (by this process:
its CPU is not counted), until every event is on the topic, their CPU read again; then the
side stopped (its leases released: the other side's next round resumes from the checkpoints).
The ratio is process ÷ trigger of the best rounds (other load only ever adds to a round).

`python -m bench.relay_anywhere` runs it alone; `make bench` runs it with the rest."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bench.relay_flow import _cpu_seconds, contacts_outbox
from domain.contact import Contact
from domain.values import Company, Name
from tools.receive import count_at_least, drain
from tools.stack import Ports, Stack

#: The relay process's lease intervals: acquire soon after the trigger released them.
INTERVALS = ("--lease-acquire-interval", "1", "--lease-renew-interval", "2")


def _write(stack: Stack, contacts: int, changes: int, round_: int) -> int:
    outbox = contacts_outbox(stack.contacts_container())
    for i in range(contacts):
        contact = Contact.create(
            name=Name(first_name=f"R{round_}x{i}", last_name="Put"),
            email=f"r{round_}x{i}@example.com",
            company=Company(company_name="C"),
        )
        for u in range(changes):
            contact.describe(f"change {u}")
        with outbox.unit_of_work() as uow:
            uow.repository(Contact).add(contact)
            uow.commit()
    return contacts * (changes + 1)


def _start_process(stack: Stack, log: Path) -> subprocess.Popen[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COSMOS", "Cosmos", "SERVICEBUS", "ServiceBus"))
    }
    env.update(stack.settings())
    process = subprocess.Popen(  # the package's own command
        [sys.executable, "-m", "cosmos_outbox", "relay", "--port", "0", *INTERVALS],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        env=env,
    )
    deadline = time.monotonic() + 120
    url = None
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        found = url or re.search(r"probes on (http://\S+) ", log.read_text())
        if found is not None:
            url = found
            try:
                with urllib.request.urlopen(f"{url.group(1)}/ready", timeout=5) as response:  # noqa: S310 - local probes
                    if response.status == 200:
                        return process
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.2)
    process.kill()
    raise AssertionError(f"the relay process did not get ready: {log.read_text()[-2000:]}")


def measure(
    workdir: Path, *, contacts: int = 100, changes: int = 9, rounds: int = 3
) -> dict[str, Any]:
    us: dict[str, list[float]] = {"trigger": [], "process": []}
    with Stack(
        workdir=workdir,
        ports=Ports.free(),
        with_runner=False,
        settings_overrides={"FEED_POLL_DELAY_MS": "100"},
    ) as stack:
        assert stack.servicebus is not None
        for r in range(rounds):
            for side in ("trigger", "process"):
                if side == "trigger":
                    pid = stack.start_runner().process.pid
                    process = None
                else:
                    process = _start_process(stack, workdir / f"relay-{r}.log")
                    pid = process.pid
                try:
                    before = _cpu_seconds(pid)
                    total = _write(stack, contacts, changes, r * 2 + (side == "process"))
                    drain(
                        stack.servicebus.connection_string,
                        until=count_at_least(total),
                        timeout=300,
                    )
                    us[side].append((_cpu_seconds(pid) - before) / total * 1e6)
                    if process is None:
                        stack.stop_runner()
                    else:
                        process.terminate()
                        assert process.wait(60) == 0
                finally:  # a failed round leaves no relay process running
                    if process is not None and process.poll() is None:
                        process.kill()
                        process.wait()
    best = {side: min(values) for side, values in us.items()}
    return {
        "events_per_round": contacts * (changes + 1),
        "rounds_us_per_event": us,
        "best_us_per_event": best,
        "process_over_trigger": best["process"] / best["trigger"],
    }


def report(result: dict[str, Any]) -> str:
    best = result["best_us_per_event"]
    rounds = {k: [round(v) for v in vs] for k, vs in result["rounds_us_per_event"].items()}
    return (
        "| figure | measured | floor | ratio |\n|---|---|---|---|\n"
        f"| CPU per relayed event, `cosmos-outbox relay` (the process) | {best['process']:.0f} µs "
        f"| the Functions trigger (host + worker): {best['trigger']:.0f} µs "
        f"| **{result['process_over_trigger']:.2f}x** |\n"
        f"(best of {len(result['rounds_us_per_event']['trigger'])} alternated rounds of "
        f"{result['events_per_round']:,} events; rounds: "
        f"{json.dumps(rounds)})"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(report(measure(Path(tmp))))
