"""The subscriber app beside the contacts app on the local stack (real SDKs, both apps in the
local Functions host): each event changes the projection exactly once whatever the
redeliveries, and after a load the projection equals the API's state, version for version."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import CosmosResourceNotFoundError
from azure.servicebus import ServiceBusClient

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox.documents import read_feed
from cosmos_outbox.relay import OutboxRecord, to_message
from cosmos_outbox.servicebus import to_servicebus_message
from cosmos_outbox.subscriber import INBOX_TYPE, Outcome, Projector, from_message
from entrypoints.bootstrap import LEGACY_EVENTS
from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, SHORT
from funcstack.servicebus import ServiceBusEndpoint
from tools.httpclient import Client
from tools.stack import Ports, Stack

from contacts_projection.projection import ContactProjection  # isort: skip

pytestmark = pytest.mark.e2e
REPORT = Path(__file__).resolve().parents[2] / ".stack" / "e2e-subscriber-report.json"
DUPLICATE_WINDOW = 2.0
_LINE = re.compile(
    r"event (?P<event>\S+) \(contact (?P<contact>\S+), version (?P<version>\d+), "
    r"delivery (?P<delivery>\d+)\): (?P<outcome>\w+)"
)


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
) -> Iterator[Stack]:
    """One stack for the module's tests: each works on contacts of its own and counts only
    their events (the subscriber's log and projections hold every test's), on the test
    process's endpoints (its topic, with the window below, of its own)."""
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        workdir=tmp_path_factory.mktemp("stack"),
        ports=Ports.free(),
        with_subscriber=True,
        duplicate_window_seconds=DUPLICATE_WINDOW,
        # The app's own feed poll delay (1 s): no test here times the relay or kills it
        # mid-send; idle, a stack polling every 100 ms took 4.8 % of a core, every 1 s 1.3 %
        # (measured once; the figures' history is in git).
    ) as stack:
        yield stack


@pytest.fixture
def stack(shared: Stack) -> Iterator[Stack]:
    """The module's stack, its subscriber running again after a test that stopped it."""
    yield shared
    if shared.subscriber is None or shared.subscriber.process.poll() is not None:
        shared.start_subscriber()


def projections(stack: Stack) -> ContainerProxy:
    return stack.projections_container()


def projection(stack: Stack, contact: str) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = projections(stack).read_item(contact, partition_key=contact)
    except CosmosResourceNotFoundError:
        return None
    return doc


def wait_for(check: Any, what: str, deadline: float = SHORT, *, every: float = 0.2) -> Any:
    """`funcstack.deadlines.wait_for`, polling every 0.2 s by default."""
    return deadlines.wait_for(check, what, deadline, every=every)


def invocations(stack: Stack, contacts: Iterable[str] | None = None) -> list[dict[str, str]]:
    """The subscriber's invocations (for ``contacts`` only, when given: the module's stack's
    log holds every test's)."""
    mine = None if contacts is None else set(contacts)
    text = (stack.workdir / "subscriber.log").read_text("utf-8", "replace")
    return [m.groupdict() for m in _LINE.finditer(text) if mine is None or m["contact"] in mine]


def create(client: Client, tag: str) -> str:
    reply = client.request(
        "POST",
        "/contacts",
        json_body={
            "firstName": tag,
            "lastName": "Sub",
            "email": f"{tag}@example.com",
            "companyName": "Inbox",
        },
    )
    assert reply.status == 201, reply.body
    return str(reply.json()["id"])


def describe(client: Client, contact: str, text: str) -> None:
    reply = client.request(
        "POST", f"/contacts/{contact}/update-description", json_body={"description": text}
    )
    assert reply.status == 204, reply.body


def stored_event(stack: Stack, contact: str, version: int) -> dict[str, Any]:
    [doc] = list(
        stack.contacts_container().query_items(
            "SELECT * FROM c WHERE c.type = 'domainEvent' AND c.version = @v",
            parameters=[{"name": "@v", "value": version}],
            partition_key=contact,
        )
    )
    return dict(doc)


def resend(stack: Stack, document: dict[str, Any]) -> None:
    """Re-drive one stored event through the relay's own message mapping."""
    [item] = read_feed([document], legacy=LEGACY_EVENTS)  # as the contacts app's relay
    assert isinstance(item, OutboxRecord)
    assert stack.servicebus is not None
    with (
        ServiceBusClient.from_connection_string(stack.servicebus.connection_string) as sb,
        sb.get_topic_sender(stack.settings()["SERVICEBUS_TOPIC"]) as sender,
    ):
        sender.send_messages(to_servicebus_message(to_message(item)))


def test_redeliveries_change_the_projection_exactly_once(stack: Stack) -> None:
    assert stack.servicebus is not None and stack.api_url
    client = Client(stack.api_url)
    subscription = stack.subscriber_settings()["SUBSCRIBER_SUBSCRIPTION"]
    topic = stack.settings()["SERVICEBUS_TOPIC"]

    # 1. a message abandoned once: a consumer takes it first and abandons it
    stack.stop_subscriber()
    abandoned = create(client, "abandoned")
    with (
        ServiceBusClient.from_connection_string(stack.servicebus.connection_string) as sb,
        sb.get_subscription_receiver(
            topic, subscription, session_id=abandoned, max_wait_time=SHORT
        ) as receiver,
    ):
        [message] = wait_for(lambda: receiver.receive_messages(max_wait_time=5), "the first event")
        receiver.abandon_message(message)

    # 2. a lock lost mid-processing: a consumer runs the subscriber's own projector on the
    #    message and goes away before completing it (the broker releases the lock, as an
    #    expired one, and redelivers with DeliveryCount + 1)
    lost = create(client, "lost-lock")
    projector = Projector(projections(stack), ContactProjection(), inbox_ttl_seconds=3600)
    with (
        ServiceBusClient.from_connection_string(stack.servicebus.connection_string) as sb,
        sb.get_subscription_receiver(
            topic, subscription, session_id=lost, max_wait_time=SHORT
        ) as receiver,
    ):
        [message] = wait_for(lambda: receiver.receive_messages(max_wait_time=5), "the first event")
        event = from_message(
            b"".join(message.body),
            content_type=message.content_type,
            application_properties=message.application_properties,
        )
        assert projector.handle(event).outcome is Outcome.APPLIED
    stack.start_subscriber()

    wait_for(lambda: projection(stack, abandoned), "the abandoned event's projection")
    describe(client, abandoned, "after the abandon")
    describe(client, lost, "after the lost lock")
    wait_for(
        lambda: (
            (projection(stack, abandoned) or {}).get("version") == 2
            and (projection(stack, lost) or {}).get("version") == 2
        ),
        "version 2",
    )

    # 3. a re-drive outside the topic's duplicate window (accepted by the topic): the window
    #    let pass (a state the test needs, not a verdict)
    time.sleep(DUPLICATE_WINDOW + 1)
    before = {c: projection(stack, c) for c in (abandoned, lost)}
    resend(stack, stored_event(stack, lost, 1))
    resend(stack, stored_event(stack, abandoned, 2))
    wait_for(
        lambda: (
            sum(1 for i in invocations(stack, (abandoned, lost)) if i["outcome"] == "duplicate")
            >= 3
        ),
        "the re-driven duplicates",
    )
    after = {c: projection(stack, c) for c in (abandoned, lost)}
    assert {c: d and d["_etag"] for c, d in after.items()} == {
        c: d and d["_etag"] for c, d in before.items()
    }

    seen = invocations(stack, (abandoned, lost))
    by_event = Counter((i["contact"], i["version"], i["outcome"]) for i in seen)
    assert by_event[(abandoned, "1", "applied")] == 1
    assert by_event[(lost, "1", "applied")] == 0  # applied by the consumer that lost its lock
    assert by_event[(lost, "1", "duplicate")] == 2  # the redelivery and the re-drive
    assert by_event[(abandoned, "2", "duplicate")] == 1
    assert [i["delivery"] for i in seen if i["contact"] == abandoned and i["version"] == "1"] == [
        "2"
    ]
    for contact in (abandoned, lost):
        inbox = list(
            projections(stack).query_items(
                "SELECT * FROM c WHERE c.type = @t",
                parameters=[{"name": "@t", "value": INBOX_TYPE}],
                partition_key=contact,
            )
        )
        assert sorted(r["version"] for r in inbox) == [1, 2]


def test_after_a_load_of_20_clients_the_projection_equals_the_api_version_for_version(
    stack: Stack,
) -> None:
    assert stack.api_url
    contacts: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client_work(n: int) -> None:
        client = Client(stack.api_url)
        rng = random.Random(n)
        try:
            mine = [create(client, f"load{n}-{i}") for i in range(2)]
            with lock:
                contacts.extend(mine)
            for u in range(8):
                contact = rng.choice(mine)
                if rng.random() < 0.5:
                    describe(client, contact, f"client {n} update {u}")
                else:
                    reply = client.request(
                        "POST",
                        f"/contacts/{contact}/update-email",
                        json_body={"email": f"c{n}u{u}@example.com"},
                    )
                    assert reply.status == 204, reply.body
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client_work, args=(n,)) for n in range(20)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(LONG)
        assert not t.is_alive(), f"a client still writing after {LONG:g} s"
    assert errors == []
    client = Client(stack.api_url)
    expected = {c: client.request("GET", f"/contacts/{c}").json() for c in contacts}

    def mismatches() -> dict[str, tuple[Any, Any]]:
        out = {}
        for contact, api in expected.items():
            got = projection(stack, contact)
            view = got and {
                "version": got["version"],
                **{k: got["data"].get(k) for k in ("name", "email", "description", "company")},
            }
            want = {
                "version": api["version"],
                **{k: api[k] for k in ("name", "email", "description", "company")},
            }
            if view != want:
                out[contact] = (view, want)
        return out

    deadline = time.monotonic() + LONG  # the projection catching up with the API
    remaining = mismatches()
    while remaining and time.monotonic() < deadline:
        time.sleep(1)
        remaining = mismatches()
    seen = invocations(stack, contacts)
    report = {
        "contacts": len(contacts),
        "events": sum(e["version"] for e in expected.values()),
        "messages_received": len(seen),
        "redeliveries": sum(1 for i in seen if int(i["delivery"]) > 1),
        "outcomes": dict(Counter(i["outcome"] for i in seen)),
        "projection_mismatches": len(remaining),
        "seconds": round(time.monotonic() - started, 1),
    }
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))
    assert remaining == {}, f"{len(remaining)} projections unlike the API after {LONG:g} s"
    assert report["outcomes"].get("applied", 0) == report["events"]


def test_a_gap_left_by_a_quarantined_event_is_held_and_closed_by_its_replay(
    stack: Stack,
) -> None:
    client = Client(stack.api_url)
    contacts = stack.contacts_container()
    contact = create(client, "gap")
    wait_for(lambda: projection(stack, contact), "version 1")
    # version 2 is committed with an event too large for the topic: the relay quarantines it
    doc = contacts.read_item(contact, partition_key=contact)
    data = {**doc["data"], "version": 2, "description": "replayed"}
    event: dict[str, Any] = {
        "id": f"gap-event-{contact}",
        "partitionKey": contact,
        "type": "domainEvent",
        "aggregateType": "contact",
        "ttl": 600,
        "data": {
            "id": f"gap-event-{contact}",
            "contactId": contact,
            "version": 2,
            "action": "ContactDescriptionUpdatedEvent",
            "createdAt": "2026-01-01T00:00:00Z",
            "description": "x" * 300_000,
        },
    }
    contacts.execute_item_batch(
        batch_operations=[
            ("replace", (contact, {**doc, "data": data}), {"if_match_etag": doc["_etag"]}),
            ("create", (event,)),
        ],
        partition_key=contact,
    )
    wait_for(lambda: _exists(contacts, f"quarantine-{event['id']}", contact), "quarantine")
    reply = client.request(
        "POST",
        f"/contacts/{contact}/update-email",
        json_body={"email": "after-the-gap@example.com"},
    )
    assert reply.status == 204, reply.body

    held = wait_for(
        lambda: list(
            projections(stack).query_items(
                "SELECT * FROM c WHERE c.type = 'heldEvent'", partition_key=contact
            )
        ),
        "held",
    )
    assert [(h["event"]["version"], h["missingVersion"]) for h in held] == [(3, 2)]
    # the outbox's notice (same session, where version 2 would have been) marks the gap as known
    [gap] = wait_for(
        lambda: list(
            projections(stack).query_items(
                "SELECT * FROM c WHERE c.type = 'quarantinedGap'", partition_key=contact
            )
        ),
        "gap",
    )
    assert (gap["version"], gap["eventId"]) == (2, event["id"])
    assert "larger than" in gap["reason"]
    assert (projection(stack, contact) or {})["version"] == 1

    # the replay: the quarantined event, fixed, written back as an event
    contacts.upsert_item({**event, "data": {**event["data"], "description": "replayed"}})
    wait_for(lambda: (projection(stack, contact) or {}).get("version") == 3, "version 3")
    api = client.request("GET", f"/contacts/{contact}").json()
    got = projection(stack, contact)
    assert got is not None and got["version"] == api["version"] == 3
    assert got["data"]["description"] == api["description"] == "replayed"
    assert got["data"]["email"] == api["email"] == "after-the-gap@example.com"
    assert (
        list(
            projections(stack).query_items(
                "SELECT * FROM c WHERE c.type IN ('heldEvent', 'quarantinedGap')",
                partition_key=contact,
            )
        )
        == []
    )


def test_an_action_the_subscriber_does_not_know_never_stalls_the_contact(stack: Stack) -> None:
    """The contacts app emits a new event type (version 2) before the subscriber knows it: the
    subscriber records it and takes its version as applied; version 3 is applied after it."""
    client = Client(stack.api_url)
    contacts = stack.contacts_container()
    contact = create(client, "unknown")
    wait_for(lambda: projection(stack, contact), "version 1")
    doc = contacts.read_item(contact, partition_key=contact)
    event_id = f"nickname-{contact}"
    event: dict[str, Any] = {
        "id": event_id,
        "partitionKey": contact,
        "type": "domainEvent",
        "aggregateType": "contact",
        "source": "/contacts",
        "ttl": 600,
        "data": {
            "id": event_id,
            "contactId": contact,
            "version": 2,
            "action": "ContactNicknameChangedEvent",
            "createdAt": "2026-11-22T08:00:00Z",
            "nickname": "Countess",
        },
    }
    contacts.execute_item_batch(
        batch_operations=[
            (
                "replace",
                (contact, {**doc, "data": {**doc["data"], "version": 2}}),
                {"if_match_etag": doc["_etag"]},
            ),
            ("create", (event,)),
        ],
        partition_key=contact,
    )
    reply = client.request(
        "POST",
        f"/contacts/{contact}/update-email",
        json_body={"email": "after-the-unknown@example.com"},
    )
    assert reply.status == 204, reply.body

    got = wait_for(
        lambda: (p := projection(stack, contact)) and p["version"] == 3 and p, "version 3"
    )
    assert got["data"]["email"] == "after-the-unknown@example.com"
    assert "nickname" not in got["data"]
    inbox = projections(stack).read_item(f"inbox-{event_id}", partition_key=contact)
    assert (inbox["ignored"], inbox["action"]) == (True, "ContactNicknameChangedEvent")
    assert (
        list(
            projections(stack).query_items(
                "SELECT * FROM c WHERE c.type = 'heldEvent'", partition_key=contact
            )
        )
        == []
    )
    log = (stack.workdir / "subscriber.log").read_text("utf-8", "replace")
    assert (
        f"event {event_id} (contact {contact}, version 2): action "
        "ContactNicknameChangedEvent is not projected (unknown action)"
    ) in log


def _exists(store: ContainerProxy, item: str, partition: str) -> bool:
    try:
        store.read_item(item, partition_key=partition)
    except CosmosResourceNotFoundError:
        return False
    return True


# ---- the projection read over HTTP, and a catch-up ----------------------------------------


def test_the_projection_is_read_over_http_with_its_version_and_last_event(
    stack: Stack,
) -> None:
    """Through the subscriber's own host (anonymous locally, as with func start)."""
    assert stack.subscriber is not None
    api, reader = Client(stack.api_url), Client(stack.subscriber.url)
    contact = create(api, "reader")
    describe(api, contact, "read over HTTP")

    def at(version: int) -> Any:
        reply = reader.request("GET", f"/projections/contacts/{contact}")
        return reply.status == 200 and reply.json()["version"] == version and reply

    reply = wait_for(lambda: at(2), "version 2 over HTTP")
    assert (reply.header("content-type") or "").startswith("application/json")
    got = reply.json()
    assert got["lastEventId"] == stored_event(stack, contact, 2)["id"]
    assert (got["deleted"], got["data"]["description"]) == (False, "read over HTTP")
    assert got["data"]["email"] == "reader@example.com"
    assert api.request("DELETE", f"/contacts/{contact}").status == 204
    assert wait_for(lambda: at(3), "the deletion").json()["deleted"] is True

    listed: list[str] = []
    headers: dict[str, str] = {}
    for _ in range(1000):  # a page a projection: the module's other tests' too
        page = reader.request("GET", "/projections/contacts?pageSize=1", headers=headers)
        assert page.status == 200, page.body
        listed += [item["id"] for item in page.json()["items"]]
        token = page.json()["continuationToken"]
        if token is None:
            break
        assert page.header("x-continuation-token") == token
        headers = {"x-continuation-token": token}
    assert contact in listed and len(listed) == len(set(listed))

    for path, status in (
        ("/projections/contacts/no-such-contact", 404),
        ("/projections/contacts/%E2%80%AEx", 400),
        ("/projections/contacts?pageSize=0", 400),
        ("/projections/contacts?pageSize=5&sort=id", 400),
        ("/projections/contacts?continuationToken=t1.x.y", 400),
    ):
        reply = reader.request("GET", path)
        assert reply.status == status, (path, reply.body)
        assert (reply.header("content-type") or "").startswith("application/problem+json")


def test_a_backlog_of_more_contacts_than_sessions_is_caught_up_version_for_version(
    stack: Stack,
) -> None:
    """The subscriber stopped while 100 contacts change (more than its 64 concurrent
    sessions), then started: every projection reaches its contact's version and last event."""
    assert stack.subscriber is not None
    stack.stop_subscriber()
    api = Client(stack.api_url)
    contacts = [create(api, f"backlog{i}") for i in range(100)]
    for contact in contacts:
        describe(api, contact, "caught up")
    stack.start_subscriber()
    reader = Client(stack.subscriber.url)

    def behind() -> list[str]:
        versions: dict[str, int] = {}
        headers: dict[str, str] = {}
        for _ in range(100):
            page = reader.request(
                "GET", "/projections/contacts?pageSize=30", headers=headers
            ).json()
            versions |= {item["id"]: item["version"] for item in page["items"]}
            if page["continuationToken"] is None:
                break
            headers = {"x-continuation-token": page["continuationToken"]}
        return [c for c in contacts if versions.get(c) != 2]

    # each check pages through every projection (pages of 30: 4 requests or more to the
    # subscriber's host, each its queries): once a second, not every 0.2 s, while it catches up
    wait_for(lambda: not behind(), "every projection at version 2", LONG, every=1.0)
    for contact in contacts[::10]:
        got = reader.request("GET", f"/projections/contacts/{contact}").json()
        assert got["lastEventId"] == stored_event(stack, contact, 2)["id"]
        assert got["data"]["description"] == "caught up"
