"""The subscriber's catch-up: contacts/s drained from a backlog already on its subscription.

A backlog of `contacts` contacts with `events` events each (created, then described), mapped
by the relay's own message mapping (`to_message`, `to_servicebus_message`), is sent to the
topic while the subscriber app is stopped; then its host is started, and the clock runs until
every projection is at its contact's last version. Figures: contacts/s and events/s from the
host's start (its start included) and from its first projection (the drain alone).

`python -m bench.subscriber_catchup [contacts] [events]` runs this one alone.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from azure.cosmos import ContainerProxy
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from cosmos_outbox.documents import event_documents, read_feed
from cosmos_outbox.relay import OutboxRecord, to_message
from cosmos_outbox.servicebus import to_servicebus_message
from domain.contact import Contact
from domain.values import Company, Name
from tools.stack import SUBSCRIBER_DIR, Ports, Stack

_CAUGHT_UP = (
    "SELECT VALUE COUNT(1) FROM c WHERE c.type = 'contactProjection' AND c.version >= @version"
)


def backlog(contacts: int, events: int) -> list[ServiceBusMessage]:
    """`contacts` contacts with `events` events each, as the relay would send them, each
    contact's in version order (contacts interleaved, as a relay of many writers sends them)."""
    per_contact: list[list[ServiceBusMessage]] = []
    for i in range(contacts):
        contact = Contact.create(
            name=Name(first_name=f"C{i}", last_name="Catch-up"),
            email=f"c{i}@example.com",
            company=Company(company_name="Up"),
        )
        for n in range(events - 1):
            contact.describe(f"change {n}")
        records = [
            r
            for r in read_feed(event_documents(contact, ttl_seconds=864000))
            if isinstance(r, OutboxRecord)
        ]
        per_contact.append([to_servicebus_message(to_message(r)) for r in records])
    return [contact[v] for v in range(events) for contact in per_contact]


def send(connection_string: str, topic: str, messages: list[ServiceBusMessage]) -> None:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_topic_sender(topic) as sender,
    ):
        batch = sender.create_message_batch()
        for message in messages:
            try:
                batch.add_message(message)
            except ValueError:  # full (MessageSizeExceededError is a ValueError)
                sender.send_messages(batch)
                batch = sender.create_message_batch()
                batch.add_message(message)
        if len(batch):
            sender.send_messages(batch)


def _at_version(container: ContainerProxy, version: int) -> int:
    """How many projections are at `version` (one small query: the clock's own load stays
    off the figures)."""
    counts: Iterable[Any] = container.query_items(
        _CAUGHT_UP,
        parameters=[{"name": "@version", "value": version}],
        enable_cross_partition_query=True,
    )
    return sum(int(n) for n in counts)


def catch_up(
    workdir: Path,
    *,
    contacts: int = 1000,
    events: int = 3,
    timeout: float = 900.0,
    **subscriber_overrides: str,
) -> dict[str, Any]:
    """Time the subscriber draining `contacts` x `events` messages from its subscription."""
    with Stack(
        workdir=workdir,
        ports=Ports.free(),
        with_runner=False,
        with_subscriber=True,
        subscriber_overrides=dict(subscriber_overrides),
    ) as stack:
        stack.stop_subscriber()
        assert stack.servicebus is not None
        values = stack.subscriber_settings()
        send(
            stack.servicebus.connection_string,
            values["SERVICEBUS_TOPIC"],
            backlog(contacts, events),
        )
        container = stack.projections_container()
        started = time.monotonic()
        stack.start_subscriber()
        ready = time.monotonic()
        first: float | None = None
        done = 0
        deadline = started + timeout
        while time.monotonic() < deadline:
            done = _at_version(container, events)
            if done and first is None:
                first = time.monotonic()
            if done >= contacts:
                break
            time.sleep(0.5)
        finished = time.monotonic()
    total = finished - started
    drain = finished - (first if first is not None else ready)
    options = json.loads((SUBSCRIBER_DIR / "host.json").read_text())["extensions"]["serviceBus"]
    return {
        "maxConcurrentSessions": options.get("maxConcurrentSessions"),
        "sessionIdleTimeout": options.get("sessionIdleTimeout"),
        "contacts": contacts,
        "events_per_contact": events,
        "caught_up": done,
        "host_start_s": round(ready - started, 2),
        "total_s": round(total, 2),
        "contacts_per_s": round(done / total, 1) if total else None,
        "events_per_s": round(done * events / total, 1) if total else None,
        "drain_contacts_per_s": round(done / drain, 1) if drain > 0 else None,
    }


def report(workdir: Path, *, contacts: int = 1000, events: int = 3) -> dict[str, Any]:
    """`catch_up`, with its heading and figures printed (`make bench`)."""
    print(
        f"\nSubscriber catch-up (backlog of {contacts} contacts x {events} events on its "
        "subscription) ...",
        flush=True,
    )
    result = catch_up(workdir, contacts=contacts, events=events)
    print(
        f"  {result['contacts_per_s']} contacts/s ({result['events_per_s']} events/s) in "
        f"{result['total_s']} s from the host's start ({result['host_start_s']} s of it); "
        f"maxConcurrentSessions {result['maxConcurrentSessions']}, sessionIdleTimeout "
        f"{result['sessionIdleTimeout']}"
    )
    return result


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    contacts = int(args[0]) if args else 1000
    events = int(args[1]) if len(args) > 1 else 3
    with tempfile.TemporaryDirectory() as tmp:
        print(
            json.dumps(catch_up(Path(tmp) / "catchup", contacts=contacts, events=events), indent=2)
        )


if __name__ == "__main__":
    main()
