"""The claim check on the local stack, every part real: events of 300 KB and 1.5 MB written
through the write path (one transactional batch each), relayed by the app's change-feed trigger
in the local Functions host to a 256 KB topic with their bodies in Azurite, and read whole by a
subscriber, once, in order. Faults injected for real: the relay killed while a claim check's
send waits for its acknowledgement, Azurite stopped while the relay offloads, a message whose
payload is missing. And the contacts projection (the subscriber app, unchanged) reads offloaded
contact events without knowing it."""

from __future__ import annotations

import json
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from cosmos_outbox.blob import BlobPayloadStore
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox_testing import event_fields
from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, SHORT
from funcstack.otel import ENV_VAR as OTEL_ENV_VAR
from funcstack.otel import METRICS_FILE
from funcstack.servicebus import ServiceBusEndpoint
from funcstack.services import LocalServices
from tests.conftest import GENEROUS_BOUND
from tests.contacts.manuscripts import Manuscript, text_of
from tests.contacts.outbox.test_outbox_guarantees import (
    FAST_TAKEOVER,
    NOTHING_MORE,
    dropped_as_duplicates,
    kill_relay_mid_batch,
    write_large_history,
)
from tests.contacts.outboxes import outbox_on
from tools import status
from tools.httpclient import Client
from tools.receive import Received, count_at_least, drain
from tools.stack import Ports, Stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack(
        "a stack of its own with Azurite: the relay killed mid-send, Azurite stopped, "
        "the subscriber app beside it"
    ),
]
RELAY = {"FEED_POLL_DELAY_MS": "100"}
KB = 1024


def payloads(stack: Stack) -> BlobPayloadStore:
    assert stack.azurite is not None
    return BlobPayloadStore.from_connection_string(
        stack.azurite.connection_string, stack.settings()["OUTBOX_PAYLOAD_CONTAINER"]
    )


def write(stack: Stack, sizes: list[int], tag: str) -> tuple[str, list[str]]:
    """A manuscript started, then revised once per size (text of that many characters), each
    change its own transactional batch; its id and the event ids by version."""
    container = stack.contacts_container()
    outbox = outbox_on(CosmosDocumentStore(container), Manuscript, event_ttl_seconds=3600)
    manuscript = Manuscript.start(f"{tag} draft")
    with outbox.unit_of_work() as uow:
        uow.repository(Manuscript).add(manuscript)
        uow.commit()
    for i, size in enumerate(sizes):
        with outbox.unit_of_work() as uow:
            current = uow.repository(Manuscript).get(manuscript.id)
            current.revise(text_of(size, f"{tag}{i}"))
            uow.commit()
    events = sorted(
        container.query_items(
            "SELECT c.id, c.version FROM c WHERE c.type = 'domainEvent' AND c.partitionKey = @id",
            parameters=[{"name": "@id", "value": manuscript.id}],
            partition_key=manuscript.id,
        ),
        key=lambda e: e["version"],
    )
    return manuscript.id, [e["id"] for e in events]


def stored(stack: Stack, event_id: str, aggregate_id: str) -> dict[str, Any]:
    """What the app published with an event: its message body."""
    data = event_fields(
        stack.contacts_container().read_item(event_id, partition_key=aggregate_id)
    ).data
    assert data is not None
    return dict(data)


def blobs(stack: Stack, prefix: str = "") -> list[str]:
    return [b.name for b in stack.payload_container().list_blobs(name_starts_with=prefix)]


def once_in_order(received: list[Received]) -> dict[str, list[Received]]:
    counts = Counter(r.message_id for r in received)
    assert {k: n for k, n in counts.items() if n > 1} == {}
    sessions: dict[str, list[Received]] = defaultdict(list)
    for r in received:
        sessions[r.session_id].append(r)
    for messages in sessions.values():
        assert [m.version for m in messages] == sorted(m.version for m in messages)
    return sessions


def wait_for(check: Callable[[], Any], what: str, deadline: float = SHORT) -> Any:
    """`funcstack.deadlines.wait_for`, polling every 0.3 s (each poll reads a file or the
    store)."""
    return deadlines.wait_for(check, what, deadline, every=0.3)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
    claim_check_azurite: LocalServices,
) -> Iterator[Stack]:
    """The module's stack, on the test process's endpoints (a topic of its own) and the
    claim-check modules' Azurite (tests/conftest.py; a payload container of its own), which the
    outage test stops and starts again (the subscriber's claim-check module, which shares it,
    runs after this one in the same xdist unit); the test that kills the relay mid-send, last,
    has a stack of its own (its Service Bus endpoint answers late) on that Azurite too."""
    workdir = Path(tmp_path_factory.mktemp("claim-check"))
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        shared_azurite=claim_check_azurite.azurite,
        workdir=workdir / "stack",
        ports=Ports.free(),
        with_subscriber=True,
        # the app's own feed poll delay (1 s): these tests do not time the relay (RELAY, 100 ms,
        # is the killed relay's stack's); idle, a stack polling every 100 ms took 4.8 % of a
        # core, every 1 s 1.3 % (measured once; history in git)
        settings_overrides={
            OTEL_ENV_VAR: str(workdir / "otel"),
            **GENEROUS_BOUND,
            # the missing payload's test receives the dead letter from the dead-letter queue
            # itself (as Service Bus keeps it): the failures' ingest (on by default) would
            # drain it into a failure record first
            "OUTBOX_FAILURE_INGEST": "false",
        },
    ) as stack:
        yield stack


def test_events_of_300_kb_and_1_5_mb_reach_a_subscriber_whole_once_in_order(
    stack: Stack,
) -> None:
    assert stack.servicebus is not None
    written = [write(stack, [300 * KB, 1536 * KB, 100], tag) for tag in ("first", "second")]
    total = sum(len(ids) for _, ids in written)
    received = drain(
        stack.servicebus.connection_string,
        topic=stack.settings()["SERVICEBUS_TOPIC"],
        until=count_at_least(total),
        timeout=LONG,
        payloads=payloads(stack).get,
    )
    sessions = once_in_order(received)
    container = stack.settings()["OUTBOX_PAYLOAD_CONTAINER"]  # the stack's own on the Azurite
    for manuscript, ids in written:
        messages = sessions[manuscript]
        assert [m.message_id for m in messages] == ids  # every event, once, in version order
        for message in messages:
            assert message.body == stored(stack, message.message_id, manuscript)  # whole
        small, big, bigger, last = messages
        assert (len(big.body["text"]), len(bigger.body["text"])) == (300 * KB, 1536 * KB)
        for claim in (big, bigger):
            assert claim.raw_size == 0 and claim.content_type == "application/json"
            assert claim.dataref is not None and claim.dataref.endswith(
                f"/{container}/manuscript/{manuscript}/{claim.message_id}"
            )
            assert claim.properties["manuscriptId"] == manuscript
        assert small.dataref is None and last.dataref is None
        assert sorted(blobs(stack, f"manuscript/{manuscript}/")) == sorted(
            f"manuscript/{manuscript}/{m.message_id}" for m in (big, bigger)
        )
    # Counted as relayed, not quarantined: the operators' status and `make status`' figures.
    client = Client(stack.api_url)
    try:
        answer = client.request("GET", "/outbox/status")
    finally:
        client.close()
    assert (answer.status, answer.json()["quarantined"]) == (200, 0)
    metrics = Path(stack.settings()[OTEL_ENV_VAR]) / METRICS_FILE

    def offloaded() -> status.Summary | None:
        if not metrics.exists():
            return None
        summary = status.summarise(metrics.read_text().splitlines())
        return summary if summary.sums.get("outbox.events.offloaded", 0) >= 4 else None

    summary = wait_for(offloaded, "the offload counters' export")
    assert summary.sums.get("outbox.events.quarantined", 0) == 0
    assert summary.sums["outbox.events.offloaded.bytes"] > 2 * (300 + 1536) * KB
    shown = status.render(summary)
    assert "offloaded (claim check)" in shown and "4 events" in shown


def test_azurite_down_while_offloading_is_retried_and_nothing_is_lost(
    stack: Stack, claim_check_azurite: LocalServices
) -> None:
    assert stack.servicebus is not None
    log = stack.log_path("runner")
    failures_before = log.read_text("utf-8", "replace").count("PayloadStoreError")
    claim_check_azurite.stop_part("azurite")
    try:
        manuscript, ids = write(stack, [400 * KB, 100], "outage")
        wait_for(
            lambda: log.read_text("utf-8", "replace").count("PayloadStoreError") > failures_before,
            "a relay invocation failing on the payload store",
        )
    finally:
        # on its ports, with its data: the trigger's retry goes through
        claim_check_azurite.run_azurite()
    received = drain(
        stack.servicebus.connection_string,
        topic=stack.settings()["SERVICEBUS_TOPIC"],
        until=count_at_least(len(ids)),
        timeout=LONG,
        payloads=payloads(stack).get,
    )
    messages = once_in_order(received)[manuscript]
    assert [m.message_id for m in messages] == ids
    assert [m.body for m in messages] == [stored(stack, i, manuscript) for i in ids]
    assert blobs(stack, f"manuscript/{manuscript}/") == [f"manuscript/{manuscript}/{ids[1]}"]


def test_the_contacts_projection_reads_offloaded_contact_events_without_a_change(
    stack: Stack,
) -> None:
    """The relay told that the topic takes 1 KB: most contact events go by claim check, and
    the subscriber app (unchanged) projects them through the package's dispatch."""
    assert stack.servicebus is not None
    stack.stop_runner()
    stack.start_runner(SERVICEBUS_MAX_MESSAGE_BYTES="1024")
    client = Client(stack.api_url)
    try:
        created = client.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": "Claire",
                "lastName": "Check",
                "email": "claire@example.com",
                "companyName": "Claims",
                "description": "d" * 500,
            },
        )
        assert created.status == 201, created.body
        cid = created.json()["id"]
        described = client.request(
            "POST", f"/contacts/{cid}/update-description", json_body={"description": "e" * 500}
        )
        assert described.status == 204, described.body
        contact = client.request("GET", f"/contacts/{cid}").json()
        received = drain(
            stack.servicebus.connection_string,
            topic=stack.settings()["SERVICEBUS_TOPIC"],
            until=count_at_least(2),
            timeout=SHORT,
        )
        assert [r.dataref is not None for r in received] == [True, True]

        def projected() -> dict[str, Any] | None:
            doc: dict[str, Any] | None = next(
                iter(
                    stack.projections_container().query_items(
                        "SELECT * FROM c WHERE c.id = @id",
                        parameters=[{"name": "@id", "value": cid}],
                        partition_key=cid,
                    )
                ),
                None,
            )
            return doc if doc and doc["version"] == 2 else None

        projection = wait_for(projected, "the projection at version 2")
        assert projection["data"]["description"] == contact["description"] == "e" * 500
        assert projection["data"]["email"] == "claire@example.com"
    finally:
        client.close()
        stack.stop_runner()
        stack.start_runner()


def test_a_message_whose_payload_is_missing_is_dead_lettered_with_the_reason_logged(
    stack: Stack,
) -> None:
    assert stack.servicebus is not None
    cid, eid = str(uuid.uuid4()), str(uuid.uuid4())
    dataref = payloads(stack).reference(f"contact/{cid}/{eid}")  # never stored
    message = ServiceBusMessage(
        b"",
        content_type="application/json",
        subject="ContactCreatedEvent",
        message_id=eid,
        session_id=cid,
        application_properties={
            "aggregateType": "contact",
            "contactId": cid,
            "version": 1,
            "action": "ContactCreatedEvent",
            "cloudEvents_specversion": "1.0",
            "cloudEvents_id": eid,
            "cloudEvents_source": "/contacts",
            "cloudEvents_type": "ContactCreatedEvent",
            "cloudEvents_subject": cid,
            "cloudEvents_dataref": dataref,
        },
    )
    topic = stack.settings()["SERVICEBUS_TOPIC"]
    with ServiceBusClient.from_connection_string(stack.servicebus.connection_string) as client:
        with client.get_topic_sender(topic) as sender:
            sender.send_messages(message)
        with client.get_subscription_receiver(
            topic,
            "contact-projection",
            sub_queue=ServiceBusSubQueue.DEAD_LETTER,
            max_wait_time=LONG,
        ) as dead_letters:
            # ten deliveries, each failing, before the subscription dead-letters it
            found = dead_letters.receive_messages(max_message_count=1, max_wait_time=LONG)
            assert found, f"the message not dead-lettered within {LONG:g} s"
            [dead] = found
            dead_letters.complete_message(dead)
    assert dead.message_id == eid
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert dead.delivery_count == 10

    def logged() -> list[Any]:
        return [
            json.loads(line) if line.startswith("{") else line
            for line in stack.log_path("subscriber").read_text("utf-8", "replace").splitlines()
            if eid in line and "could not be fetched" in line
        ]

    # the host writes the worker's lines as they come: the last may follow the dead letter
    def ten() -> list[Any] | None:
        found = logged()
        return found if len(found) >= 10 else None

    lines: list[Any] = wait_for(ten, "the ten deliveries' lines")
    assert len(lines) == 10  # one per delivery, each with the reason
    assert all("no payload at" in str(line) and dataref in str(line) for line in lines)


def test_a_relay_killed_during_a_claim_checks_send_resends_once_and_leaves_one_blob(
    tmp_path: Path,
    shared_cosmos: CosmosEndpoint,
    stack: Stack,
    claim_check_azurite: LocalServices,
    late_servicebus: ServiceBusEndpoint,
    late_servicebus_log: Path,
) -> None:
    """The relay stores the body, sends the batch holding its claim check, and is SIGKILLed
    while it waits for the acknowledgement (the endpoint answers 1.5 s late). The retry stores
    the same bytes under the same name and sends again; the topic drops the duplicate. A stack
    of its own on the late Service Bus endpoint (tests/conftest.py's `late_servicebus`, which
    the scale-out chaos uses after this module; a topic of its own) and the module stack's
    Azurite (no test stops it after the outage's), in a payload container of its own, deleted
    when it stops."""
    module_stack = stack
    azurite = claim_check_azurite.azurite  # as the outage test started it again
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=late_servicebus,  # it answers 1.5 s late
        shared_azurite=azurite,
        workdir=tmp_path / "stack",
        ports=Ports.free(),
        with_runner=False,
        settings_overrides={**RELAY, "MAX_ITEMS_PER_INVOCATION": "1000", **FAST_TAKEOVER},
    ) as stack:
        assert stack.servicebus is not None
        manuscript, ids = write(stack, [300 * KB], "killed")  # first in the feed: first batch
        total = len(ids) + write_large_history(stack)
        before = kill_relay_mid_batch(stack, total)
        assert ids[1] in {r.message_id for r in before}, "the claim check's send had landed"
        assert blobs(stack) == [f"manuscript/{manuscript}/{ids[1]}"]
        stack.start_runner()
        topic = stack.settings()["SERVICEBUS_TOPIC"]
        rest = drain(
            stack.servicebus.connection_string,
            topic=topic,
            until=count_at_least(total - len(before)),
            timeout=LONG,
            payloads=payloads(stack).get,
        )
        rest += drain(
            stack.servicebus.connection_string,
            topic=topic,
            until=lambda r: False,
            timeout=NOTHING_MORE,
        )
        sessions = once_in_order(before + rest)
        assert sum(len(m) for m in sessions.values()) == total
        assert [m.message_id for m in sessions[manuscript]] == ids
        log = late_servicebus_log.read_text()
        dropped = dropped_as_duplicates(log, {r.message_id for r in before})
        assert dropped >= len(before)  # the claim check's resend among them
        assert blobs(stack) == [f"manuscript/{manuscript}/{ids[1]}"]  # one blob
        body = payloads(stack).get(payloads(stack).reference(blobs(stack)[0]))
        assert json.loads(body) == stored(stack, ids[1], manuscript)
        own = stack.payload_container()
    # stopped: its container deleted, the module stack's Azurite and container left as they were
    assert azurite is not None and not azurite.stopped
    assert not own.exists() and module_stack.payload_container().exists()
    assert own.container_name != module_stack.payload_container().container_name
