"""HTTP -> Cosmos -> change feed -> relay -> topic -> session receiver, with faults injected for
real: nothing lost, duplicates dropped, order per contact kept. The tests without faults follow
their own contacts only (the stored events of those partitions, the messages of those
sessions), so that they run unchanged against a deployed app (`--deployed`: `relay_target`).

The tests without faults share the module's stack on the run's endpoints (`shared_cosmos`,
`shared_servicebus`: a database and a topic of its own). The relay killed mid-send, the whole stack
restarted on its state and Service Bus stopped while writes go on share a stack whose endpoints
are its own (the first two kill the relay while Service Bus answers 1.5 s late, the second
restarts Cosmos DB and Service Bus, the third stops Service Bus) and keep their state across a
stop, as an account and a namespace do: the kill first, on the store as it wrote it, then the
restart, which sets aside what the kill wrote, then the outage, which follows its own
contacts."""

from __future__ import annotations

import json
import random
import re
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cosmos_outbox.relay import QUARANTINE_NOTICE_SUBJECT, notice_id
from cosmos_outbox_testing import event_fields
from domain.contact import Contact
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, LOOPBACK, SHORT, scaled
from funcstack.servicebus import ServiceBusEndpoint
from tools.httpclient import Client
from tools.receive import Received, connect, count_at_least, drain, received_from
from tools.stack import Ports, Stack
from tools.target import Target, receive

pytestmark = pytest.mark.e2e
REPORT = Path(__file__).resolve().parents[3] / ".stack" / "e2e-report.json"


EVENTS = "SELECT * FROM c WHERE c.type = 'domainEvent'"
#: How long a test listens, after the messages it waited for came, for those that must not come
#: (a resend the topic should have dropped, a duplicate): a check of a non-event, longer on a
#: slower machine (TEST_DEADLINE_SCALE); it never waits for a message the test expects.
NOTHING_MORE = scaled(3.0)


def stored_events(
    store: Stack | Target, contacts: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """The stored events: of every contact, or of `contacts` (a query per partition)."""
    container = store.contacts_container()
    if contacts is None:
        return list(container.query_items(EVENTS, enable_cross_partition_query=True))
    return [e for c in contacts for e in container.query_items(EVENTS, partition_key=c)]


def unique(tag: str) -> str:
    """A tag no earlier run used (a deployed app keeps every run's contacts)."""
    return f"{tag}{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def shared_stack(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
) -> Iterator[Stack]:
    """One stack for the module's tests that need no settings of their own: each writes
    contacts of its own and counts only their events and messages."""
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        workdir=tmp_path_factory.mktemp("stack"),
        ports=Ports.free(),
        # The app's own feed poll delay (1 s): these tests do not time the relay (those that kill
        # it mid-send have stacks of their own, RELAY_SETTINGS); idle, a stack polling every 100 ms
        # took 4.8 % of a core, every 1 s 1.3 % (measured once; history in git).
    ) as stack:
        yield stack


@pytest.fixture
def stack(shared_stack: Stack) -> Iterator[Stack]:
    """The module's stack; a test that stopped the app's host leaves it started again (on its
    port) for the next."""
    yield shared_stack
    if shared_stack.runner is None or shared_stack.runner.process.poll() is not None:
        shared_stack.start_runner()


def topic(stack: Stack) -> str:
    """The stack's topic (its own on the shared Service Bus endpoint)."""
    return stack.settings()["SERVICEBUS_TOPIC"]


def of(received: list[Received], contacts: Collection[str]) -> list[Received]:
    """The messages of ``contacts``' sessions."""
    return [r for r in received if r.session_id in contacts]


def write_history(
    client: Client, contacts: int, updates: int, tag: str, existing: list[str] | None = None
) -> list[str]:
    """New contacts, then `updates` description changes of them and of `existing`; returns the
    new contacts' ids."""
    ids = []
    for i in range(contacts):
        reply = client.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": f"{tag}{i}",
                "lastName": "E2E",
                "email": f"{tag}{i}@example.com",
                "companyName": "Outbox",
            },
        )
        assert reply.status == 201, reply.body
        ids.append(reply.json()["id"])
    for u in range(updates):
        for cid in ids + (existing or []):
            reply = client.request(
                "POST",
                f"/contacts/{cid}/update-description",
                json_body={"description": f"{tag} update {u}"},
            )
            assert reply.status == 204, reply.body
    return ids


def assert_exactly_once_in_order(received: list[Received], events: list[dict[str, Any]]) -> None:
    ids = Counter(r.message_id for r in received)
    duplicates = {k: n for k, n in ids.items() if n > 1}
    assert duplicates == {}, f"{len(duplicates)} duplicated messages"
    expected = {f.event_id: f for f in map(event_fields, events)}
    assert set(ids) == set(expected), (
        f"missing {len(set(expected) - set(ids))}, unexpected {len(set(ids) - set(expected))}"
    )
    per_session: dict[str, list[int]] = defaultdict(list)
    for r in received:
        stored = expected[r.message_id]
        assert r.session_id == stored.aggregate_id
        assert r.subject == stored.action
        assert r.body == stored.data  # what the app published, nothing added
        assert (r.properties["contactId"], r.version) == (stored.aggregate_id, stored.version)
        per_session[r.session_id].append(r.version)
    for session, versions in per_session.items():
        assert versions == sorted(versions), f"out of order in {session}: {versions}"
        assert versions == list(range(1, len(versions) + 1))


def record(name: str, figures: dict[str, Any]) -> None:
    REPORT.parent.mkdir(exist_ok=True)
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    data[name] = figures
    REPORT.write_text(json.dumps(data, indent=2))
    print(name, figures)


def test_every_committed_change_is_one_message_in_version_order(relay_target: Target) -> None:
    client = relay_target.client()
    try:
        contacts = write_history(client, contacts=8, updates=3, tag=unique("order"))
        patched = client.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": "P",
                "lastName": "Q",
                "email": "pq@example.com",
                "companyName": "C",
            },
        )
        cid = patched.json()["id"]
        contacts.append(cid)
        client.request(
            "PATCH",
            f"/contacts/{cid}",
            json_body={
                "name": {"firstName": "R", "lastName": "S"},
                "email": "rs@example.com",
                "description": "three events in one batch",
            },
        )
        client.request("DELETE", f"/contacts/{cid}")
    finally:
        client.close()
    events = stored_events(relay_target, contacts)
    assert len(events) == 8 * 4 + 5
    received = receive(
        relay_target, until=count_at_least(len(events)), timeout=SHORT, sessions=contacts
    )
    assert_exactly_once_in_order(received, events)
    traced = [r for r in received if r.properties.get("traceparent")]
    assert len(traced) == len(received)
    actions = {r.subject for r in received}
    assert actions == {
        "ContactCreatedEvent",
        "ContactDescriptionUpdatedEvent",
        "ContactNameUpdatedEvent",
        "ContactEmailUpdatedEvent",
        "ContactDeletedEvent",
    }


def write_large_history(stack: Stack) -> int:
    """600 events of ~0.6 KB written straight to the store (no relay runs): one invocation of
    up to 1000 documents needs 2+ sends."""
    from cosmos_outbox.cosmos import CosmosDocumentStore
    from domain.values import Company, Name
    from tests.contacts.outboxes import outbox_on

    outbox = outbox_on(CosmosDocumentStore(stack.contacts_container()), event_ttl_seconds=864000)
    total = 0
    for i in range(60):
        contact = Contact.create(
            name=Name(first_name=f"K{i}", last_name="Kill"),
            email=f"k{i}@example.com",
            company=Company(company_name="C"),
        )
        for u in range(9):
            contact.describe(f"{u}:" + "x" * 480)
        with outbox.unit_of_work() as uow:
            uow.repository(Contact).add(contact)
            uow.commit()
        total += 10
    return total


def dropped_as_duplicates(log: str, message_ids: Collection[str]) -> int:
    """How many of `message_ids` a Service Bus endpoint's log names as dropped duplicates (on
    an endpoint shared by several stacks, the lines of this test's own messages)."""
    ids = set(message_ids)
    return sum(m[1] in ids for m in re.finditer(r"duplicate message id (\S+) dropped", log))


def kill_relay_mid_batch(stack: Stack, total: int) -> list[Received]:
    """Start the relay, let its first send land, kill it while it waits for that send's ack
    (the endpoint acknowledges 1.5 s late): its later sends never happen, its lease never
    moves. Returns what was received before and just after the kill."""
    assert stack.servicebus is not None
    runner = stack.start_runner()
    conn, topic = stack.servicebus.connection_string, stack.settings()["SERVICEBUS_TOPIC"]
    before = drain(conn, topic=topic, until=lambda r: len(r) > 0, timeout=SHORT)  # the first send
    runner.kill()
    before += drain(conn, topic=topic, until=lambda r: False, timeout=NOTHING_MORE)  # its rest
    assert 0 < len(before) < total, "the kill did not land mid-invocation"
    return before


#: The killed relay's lease is taken over by the relay started after it once it expires (60 s by
#: the change feed processor's defaults); funcstack's local-only lease intervals make that 5 s.
FAST_TAKEOVER = {
    "FUNCTIONS_HOST_COSMOS_LEASE_ACQUIRE_INTERVAL": "1000",
    "FUNCTIONS_HOST_COSMOS_LEASE_RENEW_INTERVAL": "1000",
    "FUNCTIONS_HOST_COSMOS_LEASE_EXPIRATION_INTERVAL": "5000",
}
RELAY_SETTINGS = {"FEED_POLL_DELAY_MS": "100", "MAX_ITEMS_PER_INVOCATION": "1000", **FAST_TAKEOVER}


@pytest.mark.local_stack(
    "a 300 KB event is poison only without a claim check store (no Azurite); "
    "a deployed app offloads it"
)
def test_a_poison_event_is_quarantined_and_does_not_block_later_events(
    stack: Stack,
) -> None:
    assert stack.servicebus is not None
    container = stack.contacts_container()
    client = Client(stack.api_url)
    try:
        [cid] = write_history(client, contacts=1, updates=0, tag="poison")
        poison = {
            "id": "poison-event-1",
            "partitionKey": cid,
            "type": "domainEvent",
            "ttl": 600,
            "data": {
                "id": "poison-event-1",
                "contactId": cid,
                "version": 99,
                "action": "ContactDescriptionUpdatedEvent",
                "createdAt": "2026-01-01T00:00:00Z",
                "description": "x" * 300_000,
            },
        }
        container.create_item(poison)
        later = write_history(client, contacts=2, updates=1, tag="after")
        client.request(
            "POST",
            f"/contacts/{cid}/update-email",
            json_body={"email": "still-flowing@example.com"},
        )
    finally:
        client.close()
    mine = [cid, *later]
    good = [e for e in stored_events(stack, mine) if e["id"] != "poison-event-1"]
    received = of(
        drain(
            stack.servicebus.connection_string,
            until=count_at_least(len(good) + 1, mine),
            timeout=SHORT,
            topic=topic(stack),
        ),
        mine,
    )
    assert "poison-event-1" not in {r.message_id for r in received}
    # Subscribers are told: a notice in the contact's session, with the event's version.
    [notice] = [r for r in received if r.subject == QUARANTINE_NOTICE_SUBJECT]
    assert (notice.message_id, notice.session_id, notice.version) == (
        notice_id("poison-event-1"),
        cid,
        99,
    )
    assert_exactly_once_in_order([r for r in received if r is not notice], good)
    assert len(later) == 2
    kept = container.read_item("quarantine-poison-event-1", partition_key=cid)
    assert kept["type"] == "quarantinedEvent"
    assert "larger than" in kept["reason"]
    assert kept["data"]["id"] == "poison-event-1"


def test_load_twenty_concurrent_clients_nothing_lost_no_duplicates_order_kept(
    relay_target: Target,
) -> None:
    clients, seconds = 20, 8.0  # how long the clients write: a load, not a verdict
    stop_at = time.monotonic() + seconds
    writes = Counter[str]()
    errors = Counter[int]()
    lock = threading.Lock()
    contacts: list[str] = []
    tag = unique("L")

    def worker(n: int) -> None:
        rng = random.Random(n)
        client = relay_target.client()
        mine: list[str] = []
        try:
            while time.monotonic() < stop_at:
                if not mine or (len(mine) < 5 and rng.random() < 0.3):
                    reply = client.request(
                        "POST",
                        "/contacts",
                        json_body={
                            "firstName": f"{tag}{n}",
                            "lastName": str(len(mine)),
                            "email": f"{tag.lower()}{n}.{len(mine)}@example.com",
                            "companyName": "Load",
                        },
                    )
                    if reply.status == 201:
                        mine.append(reply.json()["id"])
                        with lock:
                            contacts.append(mine[-1])
                else:
                    reply = client.request(
                        "PATCH",
                        f"/contacts/{rng.choice(mine)}",
                        json_body={"description": f"{n}-{rng.random()}"},
                    )
                with lock:
                    if reply.status < 300:
                        writes["ok"] += 1
                    else:
                        errors[reply.status] += 1
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(SHORT)
        assert not t.is_alive(), f"a client still writing {SHORT:g} s after its {seconds:g} s"
    elapsed = time.monotonic() - started
    events = stored_events(relay_target, contacts)
    received = receive(
        relay_target, until=count_at_least(len(events)), timeout=LONG, sessions=contacts
    )
    assert_exactly_once_in_order(received, events)
    record(
        "load",
        {
            "clients": clients,
            "seconds": round(elapsed, 1),
            "successful_writes": writes["ok"],
            "failed_writes": dict(errors),
            "events_in_cosmos": len(events),
            "messages_received": len(received),
            "duplicates_received": 0,
            "contacts": len({e["partitionKey"] for e in events}),
        },
    )


# -- the late stack: its Service Bus endpoint its own, acknowledging 1.5 s late ---------------


@dataclass
class Late:
    """The late stack (`late_stack`): its folder, its kept state, and the stack now running on
    them (the whole stack restarted replaces it)."""

    workdir: Path
    state: Path
    stack: Stack | None = None

    def start(self, *, with_runner: bool) -> Stack:
        self.stack = Stack(
            workdir=self.workdir,
            ports=Ports.free(),
            with_runner=with_runner,
            state_dir=self.state,
            servicebus_settle_delay_ms=1500,
            settings_overrides=RELAY_SETTINGS,
        ).start()
        return self.stack


@pytest.fixture(scope="module")
def late(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Late]:
    """A stack whose endpoints are its own and keep their state (a state folder), its Service
    Bus endpoint acknowledging 1.5 s late, the relay not started: the relay killed mid-send's
    test, then the whole stack restarted on its state, then Service Bus stopped while writes go
    on. Its Cosmos DB endpoint is its own: the whole stack's restart starts it again.

    Service Bus keeps its state: stopped and started again, it still holds what it accepted and
    its duplicate-detection history, as a namespace does across an outage. An endpoint in
    memory starts empty, and a message on the topic whose acknowledgement was still pending at
    the stop is accepted a second time when the relay sends it again."""
    workdir = tmp_path_factory.mktemp("late")
    late = Late(workdir / "stack", workdir / "state")
    try:
        late.start(with_runner=False)
        yield late
    finally:
        if late.stack is not None:
            late.stack.stop()


@pytest.fixture
def late_stack(late: Late) -> Stack:
    assert late.stack is not None
    return late.stack


@pytest.mark.local_stack("the relay's host killed mid-batch; the endpoint's log read")
def test_relay_killed_mid_batch_resends_and_the_topic_drops_duplicates(late_stack: Stack) -> None:
    """First on the late stack: its store and topic hold only what this test writes."""
    stack = late_stack
    assert stack.servicebus is not None and stack.runner is None
    total = write_large_history(stack)
    before = kill_relay_mid_batch(stack, total)
    stack.start_runner()
    rest = drain(
        stack.servicebus.connection_string,
        until=count_at_least(total - len(before)),
        timeout=LONG,
    )
    events = stored_events(stack)
    assert len(events) == total
    assert_exactly_once_in_order(before + rest, events)
    dropped = stack.log_path("servicebus").read_text().count("duplicate message id")
    assert dropped >= len(before)  # the whole first send came again, and was dropped
    record(
        "relay_killed_mid_batch",
        {
            "events": total,
            "accepted_before_kill": dropped,
            "received_before_kill": len(before),
            "received_after_restart": len(rest),
            "resends_dropped_as_duplicates": dropped,
            "duplicates_received": 0,
        },
    )


@pytest.mark.local_stack("the relay killed, the whole stack restarted from its kept state")
def test_a_resend_after_the_whole_stack_restarted_is_still_dropped(late: Late) -> None:
    """`make run`'s state across a restart: the relay is killed mid-batch, the whole local
    stack stops and starts again from .stack/state. The relay resumes from its stored lease,
    resends what the topic already accepted, and the topic's restored duplicate-detection
    history drops it: every event once, in order. On the late stack after the relay killed
    mid-send (its relay stopped first; what that test wrote is set aside by id, and the topic
    holds none of it)."""
    stack = late.stack
    assert stack is not None and stack.servicebus is not None
    if stack.runner is not None:
        stack.stop_runner()  # its leases released, its checkpoints at that test's last event
    earlier = {e["id"] for e in stored_events(stack)}
    total = write_large_history(stack)
    before = kill_relay_mid_batch(stack, total)
    stack.stop()
    stack = late.start(with_runner=True)
    assert stack.servicebus is not None
    rest = drain(
        stack.servicebus.connection_string,
        until=count_at_least(total - len(before)),
        timeout=LONG,
    )
    rest += drain(stack.servicebus.connection_string, until=lambda r: False, timeout=NOTHING_MORE)
    events = [e for e in stored_events(stack) if e["id"] not in earlier]
    assert len(events) == total  # the store kept them
    assert_exactly_once_in_order(before + rest, events)
    log = stack.log_path("servicebus").read_text()
    dropped = dropped_as_duplicates(log, {r.message_id for r in before})
    assert dropped >= len(before)  # each message accepted before the kill came again, dropped
    record(
        "resend_after_stack_restart",
        {
            "events": total,
            "received_before_restart": len(before),
            "received_after_restart": len(rest),
            "resends_dropped_as_duplicates": dropped,
            "duplicates_received": 0,
        },
    )


@pytest.mark.local_stack("Service Bus stopped and started again")
def test_service_bus_down_while_writes_continue_loses_nothing(late_stack: Stack) -> None:
    """On the late stack, after the whole stack restarted on its state (its relay started
    again): the outage's writes go through the API and are counted by their own contacts.
    Service Bus stops while a message is on the topic and its acknowledgement still pending (the
    endpoint answers 1.5 s late): the relay sends it again after the restart, and the topic
    drops it."""
    stack = late_stack
    assert stack.servicebus is not None and stack.runner is not None
    client = Client(stack.api_url)
    try:
        mine = write_history(client, contacts=3, updates=1, tag="before")
        conn = stack.servicebus.connection_string
        before = of(drain(conn, until=count_at_least(6, mine), timeout=SHORT), mine)
        assert len(before) == 6

        def describe() -> None:
            reply = client.request(
                "POST", f"/contacts/{mine[0]}/update-description", json_body={"description": "x"}
            )
            assert reply.status == 204, reply.body

        pending = received_as_sent(conn, mine[0], describe)
        before.append(pending)
        stack.stop_servicebus()  # well within the 1.5 s its send waits for its acknowledgement
        # the relay fails and retries
        mine += write_history(client, contacts=5, updates=2, tag="during")
        time.sleep(2)  # the outage's length (writes go on meanwhile), not a verdict
        stack.start_servicebus()  # same port; the relay's retry reconnects
    finally:
        client.close()
    events = stored_events(stack, mine)
    after = of(
        drain(
            stack.servicebus.connection_string,
            until=count_at_least(len(events) - len(before), mine),
            timeout=LONG,
        ),
        mine,
    )
    assert_exactly_once_in_order(before + after, events)
    log = stack.log_path("servicebus").read_text()
    assert f"duplicate message id {pending.message_id} dropped" in log  # sent again, dropped
    record(
        "service_bus_down",
        {
            "events": len(events),
            "received_before": len(before),
            "received_after_restart": len(after),
            "duplicates": 0,
        },
    )


def received_as_sent(namespace: str, session: str, change: Callable[[], None]) -> Received:
    """Make `change` in contact `session` with that session's receiver open, and receive (and
    complete) its message as soon as the relay sends it."""
    with (
        connect(namespace, retry_total=0) as client,
        client.get_subscription_receiver(
            "contact-events", "all-events", session_id=session, max_wait_time=LOOPBACK, keep_alive=0
        ) as receiver,
    ):
        assert receiver.receive_messages(max_wait_time=0.2) == []  # open, the session empty
        change()
        messages = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
        assert len(messages) == 1, f"the change's message not received within {SHORT:g} s"
        receiver.complete_message(messages[0])
    return received_from(messages[0])
