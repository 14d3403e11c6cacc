"""Relay throughput and sends per invocation with many contacts, and commit-to-receive
latency at a steady write rate, through the whole local stack."""

from __future__ import annotations

import os
import re
import secrets
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.cosmos import ContainerProxy
from azure.servicebus import ServiceBusClient

from bench.stats import percentile
from cosmos_outbox import Outbox, Services
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.ports import MessagePublisher
from cosmos_outbox.subscriber import from_message
from domain.contact import Contact
from domain.values import Company, Name
from funcstack.config import StackConfig
from tools.httpclient import Client
from tools.provision import declared
from tools.receive import count_at_least, drain
from tools.stack import Ports, Stack

_LINE = re.compile(
    r"^(\S+ \S+) INFO application\.relay relay invocation ok: received=(\d+) "
    r"sent=(\d+) batches=(\d+)"
)


def _invocations(log: Path) -> list[tuple[datetime, int, int]]:
    rows = []
    for line in log.read_text().splitlines():
        m = _LINE.match(line)
        if m and int(m.group(3)):
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
            rows.append((at, int(m.group(3)), int(m.group(4))))
    return rows


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def _no_publisher() -> MessagePublisher:
    raise AssertionError("the benchmark writes the events; the stack's runner relays them")


def contacts_outbox(container: ContainerProxy) -> Outbox:
    """The Contacts outbox on the stack's container, to write contacts and their events
    straight to the store (no HTTP) as the app does."""
    services = Services(
        store=CosmosDocumentStore(container),
        publisher=_no_publisher,
        token_secret=secrets.token_hex(16),
        event_ttl_seconds=864000,
    )
    return Outbox((Contact,), services=lambda: services)


def with_contacts_partitions(partitions: int) -> StackConfig:
    """This app's declared resources with its contacts container in ``partitions`` physical
    partitions (``PhysicalPartitions``): the trigger gets a lease per partition, as in Azure."""
    config = declared()
    databases = tuple(
        replace(
            db,
            containers=tuple(
                replace(c, physical_partitions=partitions) if c.name == "contacts" else c
                for c in db.containers
            ),
        )
        for db in config.cosmos.databases
    )
    return replace(config, cosmos=replace(config.cosmos, databases=databases))


def throughput(
    workdir: Path, *, contacts: int = 200, changes: int = 9, leases: int = 1
) -> dict[str, Any]:
    """Events written while no relay runs, then one runner drains the backlog with `leases`
    leases (the contacts container in as many physical partitions, a lease each, each lease
    its own concurrent invocations, as the host does)."""
    with Stack(
        workdir=workdir,
        ports=Ports.free(),
        with_runner=False,
        config=with_contacts_partitions(leases),
        settings_overrides={"FEED_POLL_DELAY_MS": "100"},
    ) as stack:
        outbox = contacts_outbox(stack.contacts_container())
        for i in range(contacts):
            contact = Contact.create(
                name=Name(first_name=f"T{i}", last_name="Put"),
                email=f"t{i}@example.com",
                company=Company(company_name="C"),
            )
            for u in range(changes):
                contact.describe(f"change {u}")
            with outbox.unit_of_work() as uow:
                uow.repository(Contact).add(contact)
                uow.commit()
        total = contacts * (changes + 1)
        started = time.monotonic()
        runner = stack.start_runner()
        assert stack.servicebus is not None and stack.cosmos is not None
        parts = {
            "functions host + worker": runner.process.pid,
            "Service Bus endpoint": stack.servicebus.started().pid,
            "Cosmos DB endpoint": stack.cosmos.started().pid,
        }
        before = {name: _cpu_seconds(pid) for name, pid in parts.items()}
        # Until the relay's log says every event was sent; received (and checked) after, so
        # the receiving does not share the machine with the relay.
        deadline = time.monotonic() + 300
        while sum(r[1] for r in _invocations(workdir / "runner.log")) < total:
            assert time.monotonic() < deadline, "the relay did not send the backlog in time"
            time.sleep(0.05)
        relayed = time.monotonic() - started
        cpu = {name: _cpu_seconds(pid) - before[name] for name, pid in parts.items()}
        received = drain(
            stack.servicebus.connection_string, until=count_at_least(total), timeout=300
        )
        assert len({r.message_id for r in received}) == total, "events missing"
        stack.stop_runner()
        rows = _invocations(workdir / "runner.log")
    sent = sum(r[1] for r in rows)
    span = (rows[-1][0] - rows[0][0]).total_seconds() if len(rows) > 1 else float("nan")
    return {
        "leases": leases,
        "events": total,
        "contacts": contacts,
        "received": len({r.message_id for r in received}),
        "invocations": len(rows),
        "sent": sent,
        "sends_per_invocation": sum(r[2] for r in rows) / max(1, len(rows)),
        "events_per_invocation": sent / max(1, len(rows)),
        "relay_events_per_s": sent / span if span and span > 0 else float("nan"),
        # From the host's process start (worker start, indexing, leases) to the last send.
        "start_to_relayed_events_per_s": total / relayed,
        # CPU the stack's processes spent from the host's ready line to the last send, per
        # event: on 2 cores, what bounds events/s whatever the leases.
        "cpu_us_per_event": {name: seconds / total * 1e6 for name, seconds in cpu.items()},
    }


def latency(
    workdir: Path, *, poll_ms: int, rate: float = 20.0, seconds: float = 10.0, contacts: int = 5
) -> dict[str, Any]:
    """Updates at a steady rate; each subscriber thread holds one contact's session."""
    with Stack(
        workdir=workdir, ports=Ports.free(), settings_overrides={"FEED_POLL_DELAY_MS": str(poll_ms)}
    ) as stack:
        assert stack.servicebus is not None
        conn = stack.servicebus.connection_string
        client = Client(stack.api_url)
        ids = [
            client.request(
                "POST",
                "/contacts",
                json_body={
                    "firstName": f"L{i}",
                    "lastName": "Lat",
                    "email": f"l{i}@example.com",
                    "companyName": "C",
                },
            ).json()["id"]
            for i in range(contacts)
        ]
        drain(conn, until=count_at_least(contacts), timeout=30)
        samples: list[float] = []
        lock = threading.Lock()
        stop = time.monotonic() + seconds + 5

        def listen(session: str) -> None:
            with (
                ServiceBusClient.from_connection_string(conn) as sb,
                sb.get_subscription_receiver(
                    "contact-events",
                    "all-events",
                    session_id=session,
                    prefetch_count=50,
                    keep_alive=0,
                ) as receiver,
            ):
                while time.monotonic() < stop:
                    for message in receiver.receive_messages(
                        max_message_count=1, max_wait_time=0.5
                    ):
                        now = datetime.now(UTC)
                        created = from_message(
                            b"".join(message.body),
                            content_type=message.content_type,
                            application_properties=message.application_properties,
                        ).time
                        assert created is not None, "an outbox event carries its time"
                        with lock:
                            samples.append((now - created).total_seconds() * 1000)
                        receiver.complete_message(message)

        threads = [threading.Thread(target=listen, args=(cid,), daemon=True) for cid in ids]
        for t in threads:
            t.start()
        time.sleep(1)
        writes = 0
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            cid = ids[writes % contacts]
            client.request(
                "POST",
                f"/contacts/{cid}/update-description",
                json_body={"description": f"w{writes}"},
            )
            writes += 1
            time.sleep(max(0.0, start + writes / rate - time.monotonic()))
        for t in threads:
            t.join(seconds + 10)
        client.close()
    return {
        "poll_ms": poll_ms,
        "writes": writes,
        "received": len(samples),
        "p50_ms": percentile(samples, 50),
        "p99_ms": percentile(samples, 99),
    }


def lease_scaling(
    workdir: Path, leases: tuple[int, ...] = (1, 2, 4), rounds: int = 2
) -> dict[str, Any]:
    """The same backlog drained with 1, 2 and 4 leases, in alternating rounds; events/s of each
    (the best of its rounds: a drain lasts about a second, and one slow invocation on a loaded
    machine stretches it) and its ratio to one lease."""
    runs: dict[int, dict[str, Any]] = {}
    for r in range(rounds):
        for n in leases:
            run = throughput(workdir / f"leases-{n}-{r}", leases=n)
            if n not in runs or run["relay_events_per_s"] > runs[n]["relay_events_per_s"]:
                runs[n] = run
    one = runs[leases[0]]["relay_events_per_s"]
    return {
        "runs": runs,
        "rounds": rounds,
        "ratio_to_one_lease": {n: r["relay_events_per_s"] / one for n, r in runs.items()},
    }
