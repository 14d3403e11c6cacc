"""The operators' routes and use cases (status, quarantine list / replay / discard, re-drive)
through the indexed functions, on the in-memory fakes of our ports: a store, a quarantine kept
in it, and a publisher with a message size limit that a test can raise."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cosmos_outbox.documents import EVENT_TYPE, QUARANTINE_TYPE, envelope_and_data
from cosmos_outbox.errors import StoreUnavailableError
from cosmos_outbox.http import Cursor, operation_of
from cosmos_outbox.http import bounded as bounded
from cosmos_outbox.operators import parse_instant
from cosmos_outbox.ports import LeaseBacklog
from cosmos_outbox.relay import QUARANTINE_NOTICE_SUBJECT, notice_id
from cosmos_outbox.testing import FakePublisher, FixedBacklog, InMemoryStore
from domain.contact import Contact
from domain.values import Company, Name
from tests.contacts.conftest import FakeWorld
from tests.contacts.unit.test_http_api import Api, body, problem

LIMIT = 4096


@pytest.fixture
def world() -> Iterator[FakeWorld]:
    """Without the claim check (OUTBOX_PAYLOAD_MAX_BYTES=0): an event larger than a message is
    quarantined, the case these tests are about (its offloading: test_relay.py)."""
    world = FakeWorld(max_payload_bytes=0)
    try:
        yield world
    finally:
        world.client.close()


@pytest.fixture
def api(world: FakeWorld) -> Api:
    world.publisher.max_batch_bytes = LIMIT
    return Api(world.client)


def contact(world: FakeWorld, changes: int, *, first: str = "Ada") -> tuple[str, list[str]]:
    """A contact with `changes` description changes, committed; its event ids by version."""
    c = Contact.create(
        name=Name(first_name=first, last_name="L"),
        email="a@example.com",
        company=Company(company_name="E"),
    )
    for i in range(changes):
        c.describe(f"change {i}")
    with world.uow() as uow:
        uow.repository(Contact).add(c)
        uow.commit()
    return c.id, [e["id"] for e in sorted(events(world, c.id), key=lambda e: e["version"])]


def events(world: FakeWorld, cid: str | None = None) -> list[dict[str, Any]]:
    return [
        envelope_and_data(d)
        for d in world.store.of_type(EVENT_TYPE)
        if cid is None or d["partitionKey"] == cid
    ]


def enlarge(stored: dict[str, Any]) -> None:
    """A stored event made larger than the publisher's limit: a long description in its body
    (the event document keeps the body as JSON text)."""
    stored["body"] = json.dumps({**json.loads(stored["body"]), "description": "x" * 5000})


def document(world: FakeWorld, cid: str, eid: str) -> dict[str, Any]:
    return world.store.documents[(cid, eid)]


def relay_all(world: FakeWorld) -> None:
    """What the change-feed trigger would hand the relay: every stored document."""
    world.relay(list(world.store.documents.values()))


def too_large(world: FakeWorld) -> tuple[str, list[str]]:
    """A contact whose second event (version 2) is larger than the publisher's limit, relayed."""
    cid, ids = contact(world, 2)
    enlarge(document(world, cid, ids[1]))
    relay_all(world)
    return cid, ids


def replay(api: Api, eid: str) -> Any:
    return api.call(
        "replay_quarantined",
        "POST",
        f"outbox/quarantine/{eid}/replay",
        route_params={"eventId": eid},
    )


def discard(api: Api, eid: str, **params: str) -> Any:
    return api.call(
        "discard_quarantined",
        "DELETE",
        f"outbox/quarantine/{eid}",
        route_params={"eventId": eid},
        params=params,
    )


def listing(api: Api, **params: str) -> Any:
    return api.call("list_quarantine", "GET", "outbox/quarantine", params=params)


def redrive(api: Api, payload: Any) -> Any:
    return api.call("redrive_events", "POST", "outbox/redrive", body=payload)


# ---- the relay's notice -----------------------------------------------------------------


def test_a_quarantined_event_is_listed_and_its_notice_is_in_its_session_in_order(
    api: Api, world: FakeWorld
) -> None:
    cid, ids = too_large(world)
    sent = [(m.message_id, m.subject, m.version) for m in world.publisher.messages]
    assert sent == [
        (ids[0], "ContactCreatedEvent", 1),
        (notice_id(ids[1]), QUARANTINE_NOTICE_SUBJECT, 2),
        (ids[2], "ContactDescriptionUpdatedEvent", 3),
    ]
    reply = listing(api)
    assert reply.status_code == 200
    [item] = body(reply)["items"]
    assert item == {
        "eventId": ids[1],
        "contactId": cid,
        "aggregateType": "contact",
        "aggregateId": cid,
        "action": "ContactDescriptionUpdatedEvent",
        "version": 2,
        "reason": item["reason"],
        "quarantinedAt": item["quarantinedAt"],
        "replays": 0,
        "status": "quarantined",
        "resolvedAt": None,
    }
    assert "larger than" in item["reason"]
    assert body(reply)["hasMore"] is False and body(reply)["continuationToken"] is None


# ---- replay -----------------------------------------------------------------------------


def test_replay_while_the_cause_remains_keeps_it_quarantined_and_counts_the_replay(
    api: Api, world: FakeWorld
) -> None:
    _, ids = too_large(world)
    before = len(world.publisher.messages)
    reply = replay(api, ids[1])
    assert reply.status_code == 202
    item = body(reply)
    assert (item["status"], item["replays"]) == ("quarantined", 1)
    assert "larger than" in item["reason"]
    # Only its notice again (same MessageId: dropped by the topic's duplicate detection).
    assert [m.message_id for m in world.publisher.messages[before:]] == [notice_id(ids[1])]
    assert body(replay(api, ids[1]))["replays"] == 2


def test_replay_after_the_limit_is_raised_sends_it_once_with_its_id_and_resolves_it(
    api: Api, world: FakeWorld
) -> None:
    _, ids = too_large(world)
    before = len(world.publisher.messages)
    world.publisher.max_batch_bytes = 1024 * 1024  # the namespace moved to Premium
    item = body(replay(api, ids[1]))
    assert (item["status"], item["replays"]) == ("resolved", 1)
    assert item["resolvedAt"] is not None
    [message] = world.publisher.messages[before:]
    assert (message.message_id, message.version) == (ids[1], 2)
    assert json.loads(message.body)["description"] == "x" * 5000
    # Kept for audit, expiring with the events; no longer counted as quarantined.
    [kept] = world.store.of_type(QUARANTINE_TYPE)
    assert kept["ttl"] == world.services.event_ttl_seconds
    assert body(api.call("outbox_status", "GET", "outbox/status"))["quarantined"] == 0
    # A second replay is harmless: nothing is sent, the record stays resolved.
    again = body(replay(api, ids[1]))
    assert (again["status"], again["replays"]) == ("resolved", 1)
    assert len(world.publisher.messages) == before + 1


def test_a_replay_whose_send_fails_keeps_the_record_with_the_failure(
    api: Api, world: FakeWorld
) -> None:
    _, ids = too_large(world)
    world.publisher.max_batch_bytes = 1024 * 1024
    world.publisher.fail_on_send = world.publisher.attempts + 1
    item = body(replay(api, ids[1]))
    assert (item["status"], item["replays"]) == ("quarantined", 1)
    assert item["reason"] == "replay failed to send: ConnectionError"


def test_replay_of_an_unknown_event_is_404_and_a_bad_id_400(api: Api) -> None:
    assert "no such quarantined event" in problem(replay(api, "nope"), 404)["detail"]
    assert problem(replay(api, "-bad"), 400)["errors"][0]["field"] == "eventId"


# ---- discard ----------------------------------------------------------------------------


def test_discard_needs_a_reason_keeps_the_record_discarded_and_writes_an_audit_line(
    api: Api, world: FakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    cid, ids = too_large(world)
    assert problem(discard(api, ids[1]), 400)["errors"][0]["field"] == "reason"
    assert problem(discard(api, ids[1], reason="  "), 400)["errors"][0]["field"] == "reason"
    assert problem(discard(api, ids[1], reason="a\x00b"), 400)["errors"][0]["field"] == "reason"
    with caplog.at_level(logging.INFO, logger="cosmos_outbox.operators"):
        reply = discard(api, ids[1], reason="customer asked; re-entered by hand")
    assert reply.status_code == 200  # what was given up, and what subscribers will see
    assert body(reply)["notice"]["subject"] == "OutboxEventDiscarded"
    assert [i["status"] for i in body(listing(api))["items"]] == ["discarded"]
    [audit] = [r for r in caplog.records if getattr(r, "outbox.audit", None)]
    fields = audit.__dict__
    assert fields["outbox.audit"] == "quarantine.discard"
    assert fields["outbox.event_id"] == ids[1] and fields["outbox.aggregate_id"] == cid
    assert fields["outbox.reason"] == "customer asked; re-entered by hand"
    assert (fields["outbox.actor"], fields["outbox.actor_kind"]) == ("admin key", "admin key")
    assert body(discard(api, ids[1], reason="again"))["notice"] is None  # nothing new
    assert problem(discard(api, "no-such-event", reason="again"), 404)


# ---- list paging ------------------------------------------------------------------------


def test_the_list_pages_with_sealed_tokens_of_its_own(api: Api, world: FakeWorld) -> None:
    for i in range(3):
        cid, ids = contact(world, 1, first=f"P{i}")
        enlarge(document(world, cid, ids[1]))
    relay_all(world)
    first = body(listing(api, pageSize="2"))
    assert len(first["items"]) == 2 and first["hasMore"] is True
    rest = body(listing(api, pageSize="2", continuationToken=first["continuationToken"]))
    assert len(rest["items"]) == 1 and rest["hasMore"] is False
    seen = {i["eventId"] for i in first["items"] + rest["items"]}
    assert len(seen) == 3
    contacts_token = world.tokens.encode(Cursor(store_token="mem:1", page=1))
    problem(listing(api, continuationToken=contacts_token), 400)
    problem(listing(api, pageSize="0"), 400)
    problem(listing(api, other="1"), 400)


# ---- status -----------------------------------------------------------------------------


def test_status_reports_the_backlog_per_lease_and_the_quarantine(
    api: Api, world: FakeWorld
) -> None:
    too_large(world)
    now = datetime.now(UTC).timestamp()
    world.backlog.leases = [
        LeaseBacklog("0", 3, now - 30, "host-1", "2026-11-22T08:00:00+00:00"),
        LeaseBacklog("1", 0, None),
    ]
    status = body(api.call("outbox_status", "GET", "outbox/status"))
    assert status["pending"] == 3 and status["quarantined"] == 1
    assert 29 <= status["oldestPendingAgeSeconds"] < 60
    assert status["leases"][0]["owner"] == "host-1"
    assert status["leases"][0]["checkpointAt"] == "2026-11-22T08:00:00+00:00"
    assert status["leases"][1] == {
        "lease": "1",
        "pending": 0,
        "oldestPendingAgeSeconds": None,
        "owner": None,
        "checkpointAt": None,
    }


# ---- re-drive ---------------------------------------------------------------------------


def test_redrive_sends_exactly_the_events_created_since_in_per_contact_order(
    api: Api, world: FakeWorld
) -> None:
    a, a_ids = contact(world, 3, first="A")
    b, b_ids = contact(world, 2, first="B")
    t = datetime.now(UTC) - timedelta(hours=1)
    # Versions 1-2 of each were written before T.
    for cid, ids in ((a, a_ids), (b, b_ids)):
        for eid in ids[:2]:
            document(world, cid, eid)["createdAt"] = (t - timedelta(minutes=5)).isoformat()
    reply = redrive(api, {"since": t.isoformat().replace("+00:00", "Z")})
    assert reply.status_code == 202
    answer = body(reply)
    assert (answer["events"], answer["accepted"], answer["quarantined"]) == (3, 3, 0)
    # each under a MessageId of its own, the event id its CloudEvents id
    assert all(m.message_id != m.event_id for m in world.publisher.messages)
    sent = [(m.session_id, m.version, m.event_id) for m in world.publisher.messages]
    assert sent == [(a, 3, a_ids[2]), (a, 4, a_ids[3]), (b, 3, b_ids[2])] or sent == [
        (b, 3, b_ids[2]),
        (a, 3, a_ids[2]),
        (a, 4, a_ids[3]),
    ]
    world.publisher.sent.clear()
    only_b = body(redrive(api, {"since": "1970-01-01T00:00:00+00:00", "contactId": b}))
    assert only_b["events"] == 3
    assert [m.event_id for m in world.publisher.messages] == b_ids


def test_redrive_refuses_a_bad_body(api: Api) -> None:
    for payload, field in [
        ({}, "since"),
        ({"since": "2026-01-01"}, "since"),
        ({"since": "1700000000"}, "since"),
        ({"since": 1700000000}, "since"),
        ({"since": "2026-02-30T00:00:00Z"}, "since"),
        ({"since": "2026-01-01T00:00:00Z", "contactId": None}, "contactId"),
        ({"since": "2026-01-01T00:00:00Z", "x": 1}, "x"),
    ]:
        doc = problem(redrive(api, payload), 400)
        assert doc["errors"][0]["field"] == field, (payload, doc)


def test_redrive_answers_503_when_the_broker_fails(api: Api, world: FakeWorld) -> None:
    contact(world, 0)
    world.publisher.fail_on_send = 1
    reply = redrive(api, {"since": "2000-01-01T00:00:00Z"})
    assert problem(reply, 503)
    assert reply.headers["Retry-After"] == "5"


# ---- bounded: a store or a broker that hangs -----------------------------------------------


async def never_answers() -> None:
    """What a store or a broker that hangs gives the app's event loop to await."""
    await asyncio.sleep(30)
    raise ConnectionError("released")


@pytest.fixture
def hang(monkeypatch: pytest.MonkeyPatch) -> Callable[[type, str], None]:
    """`hang(Class, "method")` makes the port's method wait (30 s, as I/O that never answers:
    the app awaits it, on its event loop); the bound is 0.2 s instead of 4 s."""
    monkeypatch.setattr(bounded, "BOUND_SECONDS", 0.2)

    def hang(cls: type, method: str) -> None:
        monkeypatch.setattr(cls, method, lambda *_, **__: never_answers())

    return hang


def unavailable(reply: Any) -> dict[str, Any]:
    doc = problem(reply, 503)
    assert reply.headers["Retry-After"] == str(bounded.BOUND_RETRY_AFTER_SECONDS)
    assert "did not answer within 0.2 s" in doc["detail"]
    return doc


def test_every_operator_route_answers_503_within_the_bound_when_the_store_hangs(
    api: Api, world: FakeWorld, hang: Callable[[type, str], None]
) -> None:
    _, ids = too_large(world)
    # The quarantine and the re-drive read the outbox's store: a record found by its id, a page
    # of records, the stored events.
    for cls, method in (
        (FixedBacklog, "estimate"),
        (InMemoryStore, "find"),
        (InMemoryStore, "page_of_type"),
        (InMemoryStore, "of_type"),
    ):
        hang(cls, method)
    unavailable(api.call("outbox_status", "GET", "outbox/status"))
    unavailable(listing(api))
    unavailable(replay(api, ids[1]))
    unavailable(discard(api, ids[1], reason="gone"))
    unavailable(redrive(api, {"since": "2000-01-01T00:00:00Z"}))


def test_replay_and_redrive_answer_503_within_the_bound_when_the_broker_hangs(
    api: Api, world: FakeWorld, hang: Callable[[type, str], None]
) -> None:
    _, ids = too_large(world)
    world.publisher.max_batch_bytes = 1_000_000  # the replay would now go out
    hang(FakePublisher, "send")
    unavailable(replay(api, ids[1]))
    unavailable(redrive(api, {"since": "2000-01-01T00:00:00Z"}))


def test_status_answers_503_when_the_store_is_unavailable(
    api: Api, world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(self: FixedBacklog) -> list[LeaseBacklog]:
        raise StoreUnavailableError("the store is unreachable", retry_after=1.0)

    monkeypatch.setattr(FixedBacklog, "estimate", down)
    reply = api.call("outbox_status", "GET", "outbox/status")
    assert problem(reply, 503)["title"] == "Service Unavailable"
    assert reply.headers["Retry-After"] == "1"


def test_every_operator_operation_and_health_are_bounded(functions: dict[str, Any]) -> None:
    declared = {name: operation_of(f.get_user_function()) for name, f in functions.items()}
    bounded = {name for name, op in declared.items() if op is not None and op.bounded}
    operators = {
        name for name, op in declared.items() if op is not None and op.route.startswith("outbox/")
    }
    keyed = {
        "outbox_status",
        "backlog_history",
        "list_quarantine",
        "show_quarantined",
        "replay_quarantined",
        "discard_quarantined",
        "redrive_events",
        "outbox_health",
        "count_dead_letters",
        "list_dead_letters",
        "peek_dead_letter",
        "resubmit_dead_letters",
        "discard_dead_letters",
        "event_journey",
        "aggregate_journey",
        "subscribers_status",
        "release_held",
    }
    # each also through the signed-in door (outbox/console/...), bounded the same; but the
    # anonymous outbox/health, which has no door
    assert operators == keyed | {f"console_{name}" for name in keyed - {"outbox_health"}}
    assert bounded == operators | {"health"}


def test_instants_are_rfc_3339_with_an_offset_and_clamp_at_the_calendar_ends() -> None:
    assert parse_instant("2026-11-22T08:00:00.1234567+01:00") == datetime(
        2026, 11, 22, 7, 0, 0, 123456, tzinfo=UTC
    )
    assert parse_instant("0001-01-01T00:00:00+01:00") == datetime.min.replace(tzinfo=UTC)
    assert parse_instant("9999-12-31T23:59:59-01:00") == datetime.max.replace(tzinfo=UTC)
    for bad in ("2026-11-22", "2026-11-22T08:00:00", "now", "2026-13-01T00:00:00Z"):
        with pytest.raises(ValueError):
            parse_instant(bad)


def test_redrive_takes_the_contact_alias_and_the_generic_scope(api: Api, world: FakeWorld) -> None:
    a, _ = contact(world, 1, first="A")
    contact(world, 0, first="B")

    def events(**scope: str) -> int:
        reply = redrive(api, {"since": "2000-01-01T00:00:00Z", **scope})
        assert reply.status_code == 202, reply.get_body()
        return int(body(reply)["events"])

    assert events() == 3
    assert events(aggregateType="contact") == 3
    assert events(aggregateType="contact", aggregateId=a) == 2
    assert events(contactId=a) == 2
    assert events(contactId=a, aggregateType="contact") == 2
    assert events(aggregateType="ticket") == 0


@pytest.mark.parametrize(
    ("scope", "field"),
    [
        ({"aggregateId": "abc"}, "$"),
        ({"contactId": "abc", "aggregateId": "abc", "aggregateType": "contact"}, "$"),
        ({"contactId": "abc", "aggregateType": "ticket"}, "$"),
        ({"aggregateType": "no spaces"}, "aggregateType"),
    ],
)
def test_a_redrive_scope_that_does_not_hold_together_is_a_400(
    api: Api,
    scope: dict[str, str],
    field: str,
) -> None:
    doc = problem(redrive(api, {"since": "2000-01-01T00:00:00Z", **scope}), 400)
    assert doc["errors"][0]["field"] == field
