"""The operators' routes (`Outbox.operators_blueprint`: status, the quarantine's list, replay
and discard, re-drive) and /health, through the tickets app's indexed functions on the test
kit's fakes: a store, a quarantine kept in it, and a publisher with a message size limit that a
test can raise. Their bound (`cosmos_outbox.http.bounded`): a store or a broker that hangs
makes each answer 503 with Retry-After within BOUND_SECONDS, on the sync outbox (the work on a
thread of its own) and on the `aio` one (the work awaited under a timeout)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func
import pytest
from conftest import TicketWorld, body, problem
from operator_functions import HEALTH, KEYED
from tickets import Ticket, ticket_routes

from cosmos_outbox.aio import Outbox as AsyncOutbox
from cosmos_outbox.documents import EVENT_TYPE, QUARANTINE_TYPE
from cosmos_outbox.errors import StoreUnavailableError
from cosmos_outbox.http import Cursor, TokenCodec, operation_of
from cosmos_outbox.http import bounded as bounded
from cosmos_outbox.ports import LeaseBacklog, Page
from cosmos_outbox.relay import QUARANTINE_NOTICE_SUBJECT, notice_id
from cosmos_outbox_operators import Operators, parse_instant
from cosmos_outbox_testing import FakePublisher, FixedBacklog, FunctionClient, InMemoryStore

#: The publisher's limit: an event whose title is 5,000 characters does not fit.
LIMIT = 4096


@pytest.fixture
def world() -> TicketWorld:
    """Without the claim check (max_payload_bytes=0): an event larger than a message is
    quarantined, the case these tests are about (its offloading: relay/test_claim_check.py)."""
    world = TicketWorld(max_payload_bytes=0)
    world.memory.publisher.max_batch_bytes = LIMIT
    return world


def ticket(world: TicketWorld, changes: int, *, title: str = "Printer") -> tuple[str, list[str]]:
    """A ticket opened and retitled `changes` times through the API; its event ids by version."""
    opened = world.client.request("POST", "tickets", body={"title": title})
    assert opened.status_code == 201, opened.get_body()
    tid = body(opened)["id"]
    for n in range(changes):
        changed = world.client.request("PATCH", f"tickets/{tid}", body={"title": f"{title} {n}"})
        assert changed.status_code == 200, changed.get_body()
    stored = [d for d in world.memory.store.of_type(EVENT_TYPE) if d["partitionKey"] == tid]
    return tid, [d["id"] for d in sorted(stored, key=lambda d: d["version"])]


def rewrite(
    world: TicketWorld, tid: str, eid: str, change: Callable[[dict[str, Any]], None]
) -> None:
    """A stored event document changed behind the API's back (the store gives copies)."""
    [stored] = [d for d in world.memory.store.of_type(EVENT_TYPE) if d["id"] == eid]
    change(stored)
    world.memory.store.put(stored)


def enlarge(stored: dict[str, Any]) -> None:
    """Larger than the publisher's limit: a long title in its body (JSON text)."""
    stored["body"] = json.dumps({**json.loads(stored["body"]), "title": "x" * 5000})


def relay_all(world: TicketWorld) -> None:
    world.relay(list(world.memory.store.documents.values()))


def too_large(world: TicketWorld) -> tuple[str, list[str]]:
    """A ticket whose second event (version 2) is larger than the publisher's limit, relayed."""
    tid, ids = ticket(world, 2)
    rewrite(world, tid, ids[1], enlarge)
    relay_all(world)
    return tid, ids


def replay(world: TicketWorld, eid: str) -> func.HttpResponse:
    return world.client.request("POST", f"outbox/quarantine/{eid}/replay")


def discard(world: TicketWorld, eid: str, **params: str) -> func.HttpResponse:
    """A discard as a script sends it: the master key in its header (the audit names it)."""
    return world.client.request(
        "DELETE", f"outbox/quarantine/{eid}", params=params, headers={"x-functions-key": "k"}
    )


def listing(world: TicketWorld, **params: str) -> func.HttpResponse:
    return world.client.request("GET", "outbox/quarantine", params=params)


def redrive(world: TicketWorld, payload: Any) -> func.HttpResponse:
    return world.client.request("POST", "outbox/redrive", body=payload)


def status(world: TicketWorld) -> func.HttpResponse:
    return world.client.request("GET", "outbox/status")


# ---- the relay's notice and the list ------------------------------------------------------


def test_a_quarantined_event_is_listed_and_its_notice_is_in_its_session_in_order(
    world: TicketWorld,
) -> None:
    tid, ids = too_large(world)
    sent = [(m.message_id, m.subject, m.version) for m in world.memory.publisher.messages]
    assert sent == [
        (ids[0], "TicketOpenedEvent", 1),
        (notice_id(ids[1]), QUARANTINE_NOTICE_SUBJECT, 2),
        (ids[2], "TicketRetitledEvent", 3),
    ]
    reply = listing(world)
    assert reply.status_code == 200
    [item] = body(reply)["items"]
    assert item == {
        "eventId": ids[1],
        "aggregateType": "ticket",
        "aggregateId": tid,
        "action": "TicketRetitledEvent",
        "version": 2,
        "reason": item["reason"],
        "quarantinedAt": item["quarantinedAt"],
        "replays": 0,
        "status": "quarantined",
        "resolvedAt": None,
    }
    assert "larger than" in item["reason"]
    assert body(reply)["hasMore"] is False and body(reply)["continuationToken"] is None


def test_the_list_pages_with_sealed_tokens_of_its_own(world: TicketWorld) -> None:
    for n in range(3):
        tid, ids = ticket(world, 1, title=f"P{n}")
        rewrite(world, tid, ids[1], enlarge)
    relay_all(world)
    first = body(listing(world, pageSize="2"))
    assert len(first["items"]) == 2 and first["hasMore"] is True
    token = first["continuationToken"]
    rest = body(listing(world, pageSize="2", continuationToken=token))
    assert len(rest["items"]) == 1 and rest["hasMore"] is False
    assert len({i["eventId"] for i in first["items"] + rest["items"]}) == 3
    # a token the quarantine did not issue: another key's, damaged, cut, made up
    foreign = TokenCodec(b"another key, 16+ bytes").encode(Cursor(store_token="1", page=1))
    for bad in (foreign, token[:-2] + "AA", token.replace("p1.", "p2."), "garbage", ""):
        problem(listing(world, continuationToken=bad), 400)
    problem(listing(world, pageSize="0"), 400)
    problem(listing(world, other="1"), 400)


def test_a_store_token_that_never_moves_is_a_503_not_an_empty_listing(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str | None] = []

    def stuck(self: InMemoryStore, *_: Any, **kwargs: Any) -> Page[dict[str, Any]]:
        asked.append(kwargs.get("continuation"))
        return Page(items=[], continuation_token="stuck")

    monkeypatch.setattr(InMemoryStore, "page_of_type", stuck)
    # the listing follows the store's tokens to fill a page; one that does not move is asked
    # again (an index still building), a bounded number of times, then the store is
    # unavailable: never "nothing is quarantined" (relay/test_quarantine_pages.py: one that
    # moves on after a while lists every record)
    found = problem(listing(world), 503)
    assert "unavailable" in found["detail"]
    assert asked[0] is None and set(asked[1:]) == {"stuck"} and len(asked) > 2


# ---- replay -----------------------------------------------------------------------------


def test_replay_while_the_cause_remains_keeps_it_quarantined_and_counts_the_replay(
    world: TicketWorld,
) -> None:
    _, ids = too_large(world)
    before = len(world.memory.publisher.messages)
    reply = replay(world, ids[1])
    assert reply.status_code == 202
    item = body(reply)
    assert (item["status"], item["replays"]) == ("quarantined", 1)
    assert "larger than" in item["reason"]
    # Only its notice again (same MessageId: dropped by the topic's duplicate detection).
    assert [m.message_id for m in world.memory.publisher.messages[before:]] == [notice_id(ids[1])]
    assert body(replay(world, ids[1]))["replays"] == 2


def test_replay_after_the_limit_is_raised_sends_it_once_with_its_id_and_resolves_it(
    world: TicketWorld,
) -> None:
    _, ids = too_large(world)
    publisher = world.memory.publisher
    before = len(publisher.messages)
    publisher.max_batch_bytes = 1024 * 1024  # the namespace moved to Premium
    item = body(replay(world, ids[1]))
    assert (item["status"], item["replays"]) == ("resolved", 1)
    assert item["resolvedAt"] is not None
    [message] = publisher.messages[before:]
    assert (message.message_id, message.version) == (ids[1], 2)
    assert json.loads(message.body)["title"] == "x" * 5000
    # Kept for audit, expiring with the events; no longer counted as quarantined.
    [kept] = world.memory.store.of_type(QUARANTINE_TYPE)
    assert kept["ttl"] == world.memory.services.event_ttl_seconds
    assert body(status(world))["quarantined"] == 0
    # A second replay is harmless: nothing is sent, the record stays resolved.
    again = body(replay(world, ids[1]))
    assert (again["status"], again["replays"]) == ("resolved", 1)
    assert len(publisher.messages) == before + 1


def test_a_replay_whose_send_fails_keeps_the_record_with_the_failure(world: TicketWorld) -> None:
    _, ids = too_large(world)
    publisher = world.memory.publisher
    publisher.max_batch_bytes = 1024 * 1024
    publisher.fail_on_send = publisher.attempts + 1
    item = body(replay(world, ids[1]))
    assert (item["status"], item["replays"]) == ("quarantined", 1)
    assert item["reason"] == "replay failed to send: ConnectionError"


def test_replay_of_an_unknown_event_is_404_and_a_bad_id_400(world: TicketWorld) -> None:
    assert "no such quarantined event" in problem(replay(world, "nope"), 404)["detail"]
    assert problem(replay(world, "-bad"), 400)["errors"][0]["field"] == "eventId"


# ---- discard ----------------------------------------------------------------------------


def test_discard_needs_a_reason_keeps_the_record_discarded_and_writes_an_audit_line(
    world: TicketWorld, caplog: pytest.LogCaptureFixture
) -> None:
    tid, ids = too_large(world)
    for reason in (None, "  ", "a\x00b"):
        params = {} if reason is None else {"reason": reason}
        assert problem(discard(world, ids[1], **params), 400)["errors"][0]["field"] == "reason"
    with caplog.at_level(logging.INFO, logger="cosmos_outbox.operators"):
        reply = discard(world, ids[1], reason="customer asked; re-entered by hand")
    assert reply.status_code == 200  # what was given up, and what subscribers will see
    assert body(reply)["notice"]["subject"] == "OutboxEventDiscarded"
    assert [i["status"] for i in body(listing(world))["items"]] == ["discarded"]
    [audit] = [r for r in caplog.records if getattr(r, "outbox.audit", None)]
    fields = audit.__dict__
    assert fields["outbox.audit"] == "quarantine.discard"
    assert fields["outbox.event_id"] == ids[1] and fields["outbox.aggregate_id"] == tid
    assert fields["outbox.reason"] == "customer asked; re-entered by hand"
    assert (fields["outbox.actor"], fields["outbox.actor_kind"]) == ("admin key", "admin key")
    assert body(discard(world, ids[1], reason="again"))["notice"] is None  # nothing new
    problem(discard(world, "no-such-event", reason="again"), 404)


# ---- status -----------------------------------------------------------------------------


def test_status_reports_the_backlog_per_lease_and_the_quarantine(world: TicketWorld) -> None:
    too_large(world)
    now = datetime.now(UTC).timestamp()
    world.memory.backlog.leases = [
        LeaseBacklog("0", 3, now - 30, "host-1", "2026-11-22T08:00:00+00:00"),
        LeaseBacklog("1", 0, None),
    ]
    answer = body(status(world))
    assert answer["pending"] == 3 and answer["quarantined"] == 1
    assert 29 <= answer["oldestPendingAgeSeconds"] < 60
    assert answer["leases"][0]["owner"] == "host-1"
    assert answer["leases"][0]["checkpointAt"] == "2026-11-22T08:00:00+00:00"
    assert answer["leases"][1] == {
        "lease": "1",
        "pending": 0,
        "oldestPendingAgeSeconds": None,
        "owner": None,
        "checkpointAt": None,
    }


def test_status_answers_503_with_the_stores_retry_after_when_it_is_unavailable(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(self: FixedBacklog) -> list[LeaseBacklog]:
        raise StoreUnavailableError("the store is unreachable", retry_after=1.0)

    monkeypatch.setattr(FixedBacklog, "estimate", down)
    reply = status(world)
    assert problem(reply, 503)["title"] == "Service Unavailable"
    assert reply.headers["Retry-After"] == "1"


# ---- re-drive ---------------------------------------------------------------------------


def test_redrive_sends_exactly_the_events_created_since_in_per_aggregate_order(
    world: TicketWorld,
) -> None:
    a, a_ids = ticket(world, 3, title="A")
    b, b_ids = ticket(world, 2, title="B")
    t = datetime.now(UTC) - timedelta(hours=1)

    def before_t(stored: dict[str, Any]) -> None:
        stored["createdAt"] = (t - timedelta(minutes=5)).isoformat()

    for tid, ids in ((a, a_ids), (b, b_ids)):  # versions 1-2 of each were written before T
        for eid in ids[:2]:
            rewrite(world, tid, eid, before_t)
    reply = redrive(world, {"since": t.isoformat().replace("+00:00", "Z")})
    assert reply.status_code == 202
    answer = body(reply)
    assert (answer["events"], answer["accepted"], answer["quarantined"]) == (3, 3, 0)
    publisher = world.memory.publisher
    # each under a MessageId of its own, the event id its CloudEvents id
    assert all(m.message_id != m.event_id for m in publisher.messages)
    sent = [(m.session_id, m.version, m.event_id) for m in publisher.messages]
    assert sorted(sent) == sorted([(a, 3, a_ids[2]), (a, 4, a_ids[3]), (b, 3, b_ids[2])])
    assert [v for s, v, _ in sent if s == a] == [3, 4]  # in order within the aggregate
    publisher.sent.clear()
    only_b = body(
        redrive(
            world,
            {"since": "1970-01-01T00:00:00+00:00", "aggregateType": "ticket", "aggregateId": b},
        )
    )
    assert only_b["events"] == 3
    assert [m.event_id for m in publisher.messages] == b_ids


def test_redrive_refuses_a_bad_body(world: TicketWorld) -> None:
    for payload, field in [
        ({}, "since"),
        ({"since": "2026-01-01"}, "since"),
        ({"since": "1700000000"}, "since"),
        ({"since": 1700000000}, "since"),
        ({"since": "2026-02-30T00:00:00Z"}, "since"),
        ({"since": "2026-01-01T00:00:00Z", "aggregateType": None}, "aggregateType"),
        ({"since": "2026-01-01T00:00:00Z", "x": 1}, "x"),
    ]:
        doc = problem(redrive(world, payload), 400)
        assert doc["errors"][0]["field"] == field, (payload, doc)


def test_redrive_answers_503_when_the_broker_fails(world: TicketWorld) -> None:
    ticket(world, 0)
    world.memory.publisher.fail_on_send = 1
    reply = redrive(world, {"since": "2000-01-01T00:00:00Z"})
    problem(reply, 503)
    assert reply.headers["Retry-After"] == "5"


def test_instants_are_rfc_3339_with_an_offset_and_clamp_at_the_calendar_ends() -> None:
    assert parse_instant("2026-11-22T08:00:00.1234567+01:00") == datetime(
        2026, 11, 22, 7, 0, 0, 123456, tzinfo=UTC
    )
    assert parse_instant("0001-01-01T00:00:00+01:00") == datetime.min.replace(tzinfo=UTC)
    assert parse_instant("9999-12-31T23:59:59-01:00") == datetime.max.replace(tzinfo=UTC)
    for bad in ("2026-11-22", "2026-11-22T08:00:00", "now", "2026-13-01T00:00:00Z"):
        with pytest.raises(ValueError):
            parse_instant(bad)


# ---- bounded: a store or a broker that hangs, sync and aio -----------------------------------


class Hanging:
    """Makes a port's methods wait as I/O that never answers, for the outbox's flavour: a sync
    outbox's call blocks (until the test ends: `release`), an `aio` outbox's awaits."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, asynchronous: bool) -> None:
        self._monkeypatch = monkeypatch
        self._asynchronous = asynchronous
        self._released = threading.Event()

    def __call__(self, cls: type, method: str) -> None:
        if self._asynchronous:
            # a sync fake's method that hands back an awaitable, as I/O the app's event loop
            # awaits (an `async def` in its place would make the fake an async adapter)
            self._monkeypatch.setattr(cls, method, lambda *_, **__: self._waits())
        else:
            self._monkeypatch.setattr(cls, method, lambda *_, **__: self._blocks())

    async def _waits(self) -> None:
        await asyncio.sleep(30)
        raise ConnectionError("released")

    def _blocks(self) -> None:
        self._released.wait(30)
        raise ConnectionError("released")

    def release(self) -> None:
        self._released.set()


@pytest.fixture(params=["sync", "aio"])
def bound(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TicketWorld, Hanging]]:
    """The tickets app on the sync outbox or on the `aio` one (the same routes), without the
    claim check, and a `Hanging` for it; the bound is 0.2 s instead of 4 s."""
    world = TicketWorld(max_payload_bytes=0, bound_seconds=0.2)
    world.memory.publisher.max_batch_bytes = LIMIT
    asynchronous = request.param == "aio"
    if asynchronous:
        outbox = AsyncOutbox([Ticket], services=lambda: world.memory.services, bound_seconds=0.2)
        app = outbox.function_app(ticket_routes(outbox), Operators(), title="Tickets")  # type: ignore[arg-type]
        world.client = FunctionClient(app)
    hanging = Hanging(monkeypatch, asynchronous=asynchronous)
    try:
        yield world, hanging
    finally:
        hanging.release()
        world.client.close()


def unavailable(reply: func.HttpResponse) -> None:
    doc = problem(reply, 503)
    assert reply.headers["Retry-After"] == str(bounded.BOUND_RETRY_AFTER_SECONDS)
    # the bound's words, or the dependency's own wait, which takes what is left of the call's
    # time (`bounded.Budget`: 0.17 s of 0.2)
    assert re.search(r"did not answer within 0?\.\d+ s", doc["detail"]), doc["detail"]


def test_every_operator_route_answers_503_within_the_bound_when_the_store_hangs(
    bound: tuple[TicketWorld, Hanging],
) -> None:
    world, hang = bound
    _, ids = too_large(world)
    # The quarantine and the re-drive read the outbox's store: a record found by its id, a page
    # of records, the stored events; the status reads the backlog.
    for cls, method in (
        (FixedBacklog, "estimate"),
        (InMemoryStore, "find"),
        (InMemoryStore, "page_of_type"),
        (InMemoryStore, "of_type"),
    ):
        hang(cls, method)
    unavailable(status(world))
    unavailable(listing(world))
    unavailable(replay(world, ids[1]))
    unavailable(discard(world, ids[1], reason="gone"))
    unavailable(redrive(world, {"since": "2000-01-01T00:00:00Z"}))


def test_replay_and_redrive_answer_503_within_the_bound_when_the_broker_hangs(
    bound: tuple[TicketWorld, Hanging],
) -> None:
    world, hang = bound
    _, ids = too_large(world)
    world.memory.publisher.max_batch_bytes = 1_000_000  # the replay would now go out
    hang(FakePublisher, "send")
    unavailable(replay(world, ids[1]))
    unavailable(redrive(world, {"since": "2000-01-01T00:00:00Z"}))


def test_health_answers_503_within_the_bound_when_the_store_hangs(
    bound: tuple[TicketWorld, Hanging],
) -> None:
    world, hang = bound
    assert world.client.request("GET", "health").status_code == 200
    hang(InMemoryStore, "ping")
    unavailable(world.client.request("GET", "health"))


def test_every_operator_operation_and_health_are_bounded(world: TicketWorld) -> None:
    declared = {
        name: operation_of(f.get_user_function()) for name, f in world.client.functions.items()
    }
    bounded_ones = {name for name, op in declared.items() if op is not None and op.bounded}
    operators = {
        name for name, op in declared.items() if op is not None and op.route.startswith("outbox/")
    }
    keyed = KEYED | HEALTH
    # each also through the signed-in door (outbox/console/...), bounded the same; but the
    # anonymous outbox/health, which has no door
    assert operators == keyed | {f"console_{name}" for name in keyed - {"outbox_health"}}
    assert bounded_ones == operators | {"health"}


def test_the_status_describes_a_stall_on_a_silent_service_bus_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 72 item 4: as a stall sets in with Service Bus silent, the status asked the probe
    (2 s) and then the topic's rules (2 s more): past the bound, a 503 the console showed as
    stale. The rules are not asked of a Service Bus the probe found silent: the status answers,
    stalled, naming Service Bus."""
    import time as clock

    from cosmos_outbox.ports import LeaseBacklog

    world = TicketWorld()
    try:
        hang = lambda *_: clock.sleep(30)  # noqa: E731  # a frozen namespace answers nothing
        monkeypatch.setattr(world.memory.publisher, "probe", hang, raising=False)
        monkeypatch.setattr(world.memory.target_rules, "check", hang)
        world.memory.backlog.leases = [LeaseBacklog("0", 1, clock.time() - 600)]
        reply = world.client.request("GET", "outbox/status")
        assert reply.status_code == 200, reply.get_body()
        status = body(reply)
        assert status["relay"]["state"] == "stalled"
        assert status["relay"]["notAnswering"] == "Service Bus"
        assert not status["targetRules"]["checked"]
        assert "Service Bus does not answer" in status["targetRules"]["reason"]
    finally:
        world.client.close()
