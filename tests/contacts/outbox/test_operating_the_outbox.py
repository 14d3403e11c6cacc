"""Operators recover, on the local stack through the real SDKs: a too-large event is quarantined
(this stack has no payload storage, so no claim check: tests/contacts/outbox/test_claim_check.py
offloads) and its notice arrives in its session in order; the limit is raised (the Service Bus
endpoint restarted with a larger maximum message size, as a namespace moved to Premium) and the
event replayed; another is discarded (its notice sent, its record kept as discarded) with an
audit line; a re-drive after the subscription was drained, inside the topic's duplicate-detection
window: every event arrives again, under MessageIds of its own, as its report counts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import ContainerProxy

from cosmos_outbox.documents import commit_operations
from cosmos_outbox.relay import QUARANTINE_NOTICE_SUBJECT, notice_id
from domain.contact import Contact
from domain.values import Company, Name
from funcstack import deadlines
from funcstack.deadlines import LONG, SHORT
from tests.conftest import GENEROUS_BOUND
from tests.contacts.outbox.test_outbox_guarantees import (
    NOTHING_MORE,
    of,
    record,
    stored_events,
    write_history,
)
from tools.httpclient import Client
from tools.receive import Received, count_at_least, drain
from tools.stack import Ports, Stack

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack("the app restarted with its relay disabled, then enabled"),
]
ROOT = Path(__file__).resolve().parents[3]
BIG = 300_000  # bytes of description: over the 256 KB of a Standard namespace


def plant_history(
    container: ContainerProxy, first: str, changes: int, big_version: int | None = None
) -> tuple[str, list[str]]:
    """One contact and its events written in one batch, as the unit of work writes them; the
    event of `big_version` made larger than a Standard message. Returns the id and event ids
    by version."""
    contact = Contact.create(
        name=Name(first_name=first, last_name="Ops"),
        email=f"{first.lower()}@example.com",
        company=Company(company_name="Outbox"),
    )
    for i in range(changes):
        contact.describe(f"{first} change {i}")
    operations = commit_operations(
        contact, contact.collect_events(), etag=None, event_ttl_seconds=864000, traceparent=None
    )
    documents = [dict(op.document or {}) for op in operations]
    ids = []
    for doc in documents[1:]:
        ids.append(doc["id"])
        if doc["version"] == big_version:  # its body (JSON text) made larger
            doc["body"] = json.dumps({**json.loads(doc["body"]), "description": "x" * BIG})
    container.execute_item_batch(
        [(op.kind, (doc,)) for op, doc in zip(operations, documents, strict=True)],
        partition_key=contact.id,
    )
    return contact.id, ids


def cli(stack: Stack, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.admin",
            "--settings",
            str(stack.settings_file),
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=LONG,  # a hang guard: the command line's own calls are bounded (60 s each)
        cwd=ROOT,
        check=False,
    )
    assert (done.returncode == 0) == ok, done.stderr
    return done


def per_session(received: list[Received]) -> dict[str, list[tuple[int, str]]]:
    sessions: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for r in received:
        sessions[r.session_id].append((r.version, r.subject))
    return sessions


def wait_for(check: Any, what: str, deadline: float = SHORT) -> Any:
    """`funcstack.deadlines.wait_for`, polling every 0.3 s (each poll is a request)."""
    return deadlines.wait_for(check, what, deadline, every=0.3)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: CosmosEndpoint
) -> Iterator[Stack]:
    """One stack for the module: the quarantine's test first (it counts what the store holds
    pending and quarantined), then the re-drive's, which counts its own contacts' events. Its
    database on the run's Cosmos DB endpoint (no test here stops or faults it; what a test
    counts is its own database's, and the backlog is read from its own containers' LSNs,
    which funcstack keeps per physical partition of each container); a Service Bus endpoint of
    its own, which the quarantine's test restarts with a larger message size."""
    with Stack(
        workdir=tmp_path_factory.mktemp("stack"),
        ports=Ports.free(),
        shared_cosmos=shared_cosmos,
        # The app's own feed poll delay (1 s): no test here times the relay or kills it
        # mid-send; idle, a stack polling every 100 ms took 4.8 % of a core, every 1 s 1.3 %
        # (measured once; history in git). No test here tests the operators' routes' bound.
        settings_overrides=GENEROUS_BOUND,
    ) as stack:
        yield stack


def test_quarantine_notice_replay_after_the_limit_is_raised_and_discard(stack: Stack) -> None:
    assert stack.servicebus is not None
    container = stack.contacts_container()
    started = time.monotonic()
    # The relay off while the histories are written: the status shows them pending.
    stack.stop_runner()
    stack.start_runner(**{"AzureWebJobs.relay_events.Disabled": "true"})
    api = Client(stack.api_url)
    try:
        a, a_ids = plant_history(container, "Ada", 3, big_version=2)
        b, b_ids = plant_history(container, "Bob", 1, big_version=2)
        # The first call after a restart may find the store slow to answer (503, Retry-After).
        answer = wait_for(
            lambda: (r := api.request("GET", "/outbox/status")).status == 200 and r,
            "GET /outbox/status answering 200",
        )
        status = answer.json()
        assert (status["pending"], status["quarantined"]) == (2, 0), status  # 2 transactions
        assert status["oldestPendingAgeSeconds"] is not None

        stack.stop_runner()
        stack.start_runner()
        # Later events of the same contact still flow.
        reply = api.request(
            "POST",
            f"/contacts/{a}/update-description",
            json_body={"description": "after the poison"},
        )
        assert reply.status == 204, reply.body
        # a: v1, notice v2, v3, v4, v5; b: v1, notice v2
        received = drain(stack.servicebus.connection_string, until=count_at_least(7), timeout=SHORT)
        relayed_s = time.monotonic() - started
        sessions = per_session(received)
        assert sessions[a] == [
            (1, "ContactCreatedEvent"),
            (2, QUARANTINE_NOTICE_SUBJECT),
            (3, "ContactDescriptionUpdatedEvent"),
            (4, "ContactDescriptionUpdatedEvent"),
            (5, "ContactDescriptionUpdatedEvent"),
        ]
        assert sessions[b] == [(1, "ContactCreatedEvent"), (2, QUARANTINE_NOTICE_SUBJECT)]
        notice = next(r for r in received if r.message_id == notice_id(a_ids[1]))
        assert notice.body == {
            "eventId": a_ids[1],
            "contactId": a,
            "aggregateType": "contact",
            "aggregateId": a,
            "action": "ContactDescriptionUpdatedEvent",
            "version": 2,
            "reason": notice.body["reason"],
        }
        assert "larger than" in notice.body["reason"]
        assert a_ids[1] not in {r.message_id for r in received}

        status = wait_for(
            lambda: (s := api.request("GET", "/outbox/status").json())["pending"] == 0 and s,
            "the status with nothing pending",
        )
        assert status["quarantined"] == 2, status
        assert status["leases"] and status["leases"][0]["owner"]
        listed = api.request("GET", "/outbox/quarantine?pageSize=1").json()
        assert len(listed["items"]) == 1 and listed["hasMore"] is True
        rest = api.request(
            "GET",
            "/outbox/quarantine",
            headers={"x-continuation-token": listed["continuationToken"]},
        ).json()
        assert {i["eventId"] for i in listed["items"] + rest["items"]} == {a_ids[1], b_ids[1]}

        # Replay while the limit still holds: it stays, counted.
        still = api.request("POST", f"/outbox/quarantine/{a_ids[1]}/replay")
        assert still.status == 202
        assert (still.json()["status"], still.json()["replays"]) == ("quarantined", 1)

        # The namespace moves to Premium: the endpoint restarts with 1 MB messages, and the
        # app is told so (SERVICEBUS_MAX_MESSAGE_BYTES; a changed app setting restarts it).
        stack.stop_servicebus()
        stack.servicebus_max_message_size = 1024 * 1024
        stack.start_servicebus()
        stack.stop_runner()
        stack.start_runner(SERVICEBUS_MAX_MESSAGE_BYTES=str(1024 * 1024))
        # The first send on the new connection may take longer than the operators' bound on a
        # busy machine: 503 (retry later), and a retry answers as a replay does.
        replayed = wait_for(
            lambda: (
                (r := api.request("POST", f"/outbox/quarantine/{a_ids[1]}/replay")).status != 503
                and r
            ),
            "a replay answered (not 503)",
        )
        assert replayed.status == 202, replayed.body
        item = replayed.json()
        assert (item["status"], item["replays"]) == ("resolved", 2), item["reason"]
        again = api.request("POST", f"/outbox/quarantine/{a_ids[1]}/replay").json()
        assert (again["status"], again["replays"]) == ("resolved", 2)
        conn = stack.servicebus.connection_string
        delivered = drain(conn, until=count_at_least(1), timeout=SHORT)  # the replayed event
        delivered += drain(conn, until=lambda r: False, timeout=NOTHING_MORE)  # and no more
        assert [(r.message_id, r.version, r.session_id) for r in delivered] == [(a_ids[1], 2, a)]
        assert len(delivered[0].body["description"]) == BIG
        kept = container.read_item(f"quarantine-{a_ids[1]}", partition_key=a)
        assert kept["status"] == "resolved" and kept["ttl"] == 864000

        # Discard the other one, with the reason: gone from the list, audit line written.
        assert api.request("DELETE", f"/outbox/quarantine/{b_ids[1]}").status == 400
        reason = "superseded by a correction entered by hand"
        gone = api.request(
            "DELETE", f"/outbox/quarantine/{b_ids[1]}?reason={urllib.parse.quote(reason)}"
        )
        assert gone.status == 200 and gone.json()["notice"]["subject"] == "OutboxEventDiscarded"
        items = api.request("GET", "/outbox/quarantine").json()["items"]
        assert sorted((i["eventId"], i["status"]) for i in items) == sorted(
            [(a_ids[1], "resolved"), (b_ids[1], "discarded")]
        )
        assert api.request("GET", "/outbox/status").json()["quarantined"] == 0
        # The same from the command line.
        listed_by_cli = json.loads(cli(stack, "quarantine", "list", "--page-size", "1").stdout)
        assert sorted(i["eventId"] for i in listed_by_cli["items"]) == sorted([a_ids[1], b_ids[1]])
        assert json.loads(cli(stack, "status").stdout)["quarantined"] == 0
        missing = cli(stack, "quarantine", "discard", "no-such-event", "--reason", "x", ok=False)
        assert missing.returncode == 1 and json.loads(missing.stderr)["status"] == 404
        unknown = api.request("POST", "/outbox/quarantine/no-such-event/replay")
        assert unknown.status == 404 and unknown.header("content-type") == (
            "application/problem+json"
        )
    finally:
        api.close()
    log = Path(stack.workdir / "runner.log").read_text(errors="replace")
    audit = [line for line in log.splitlines() if "quarantine.discard" in line]
    assert audit and b_ids[1] in audit[-1] and reason in audit[-1]
    record(
        "operating_quarantine",
        {
            "poison_events": 2,
            "received_before_replay": len(received),
            "notices": sum(r.subject == QUARANTINE_NOTICE_SUBJECT for r in received),
            "relayed_in_s": round(relayed_s, 1),
            "replayed_delivered": len(delivered),
            "second_replay_delivered": 0,
            "total_s": round(time.monotonic() - started, 1),
        },
    )


def test_a_redrive_inside_the_duplicate_detection_window_reaches_the_subscription(
    stack: Stack,
) -> None:
    """Every event created at or after T arrives again, per contact in order, though the topic
    still remembers their MessageIds: a re-drive sends each under one of its own (the event id
    its CloudEvents id), and what its report says the topic accepted is what arrives. (The
    events and messages counted are this test's contacts': the quarantine's test ran on the
    stack before, all of it before T.)"""
    assert stack.servicebus is not None
    conn = stack.servicebus.connection_string
    api = Client(stack.api_url)
    try:
        before = write_history(api, 2, 1, "early")
        early = stored_events(stack, before)
        drain(conn, until=count_at_least(len(early), before), timeout=SHORT)
        # T strictly between the two histories' timestamps (a clock's step apart), not a verdict
        time.sleep(0.05)
        since = datetime.now(UTC)
        time.sleep(0.05)
        after = write_history(api, 2, 2, "late", existing=list(before))
        mine = [*before, *after]
        late_ids = {
            e["id"]
            for e in stored_events(stack, mine)
            if datetime.fromisoformat(str(e["createdAt"])) >= since
        }
        assert len(late_ids) == len(stored_events(stack, mine)) - len(early)
        first = of(drain(conn, until=count_at_least(len(late_ids), mine), timeout=SHORT), mine)
        assert {r.message_id for r in first} == late_ids
        body = {"since": since.isoformat().replace("+00:00", "Z")}

        report = api.request("POST", "/outbox/redrive", json_body=body)
        assert report.status == 202, report.body
        counted = report.json()
        assert counted["events"] == counted["accepted"] == len(late_ids)
        again = of(
            drain(conn, until=count_at_least(counted["accepted"], mine), timeout=SHORT), mine
        )
        again += of(drain(conn, until=lambda r: False, timeout=NOTHING_MORE), mine)
        assert len(again) == counted["accepted"]
        assert sorted(r.properties["cloudEvents_id"] for r in again) == sorted(late_ids)
        assert not {r.message_id for r in again} & late_ids  # MessageIds of their own
        for session, versions in per_session(again).items():
            numbers = [v for v, _ in versions]
            assert numbers == sorted(numbers), (session, versions)
            assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
        # One contact only.
        one = after[0]
        only = api.request(
            "POST",
            "/outbox/redrive",
            json_body={"since": "2000-01-01T00:00:00Z", "contactId": one},
        ).json()
        assert only["events"] == len([e for e in stored_events(stack) if e["partitionKey"] == one])
    finally:
        api.close()
    record(
        "operating_redrive",
        {
            "events_before_T": len(early),
            "events_since_T": len(late_ids),
            "accepted_by_the_topic": counted["accepted"],
            "received_inside_window": len(again),
        },
    )
