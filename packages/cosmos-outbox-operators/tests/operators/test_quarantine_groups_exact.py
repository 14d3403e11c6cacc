"""The quarantine's failure groups with the failure records kept (OUTBOX_FAILURE_INGEST), in-process
on the test kit's fakes: each quarantined event is a failure record of the pseudo-entity
`quarantine` too, so its group is its summary's, exact at any size (not the quarantine's
records read to QUARANTINE_LIMIT, "at least" beyond); a group with records set aside before
they were kept is read from the quarantine, as before, with a warning; a quarantined event's
record read by its id like any failure's, and its event's journey showing its quarantine once;
a group's retry resolving its records, its discard archiving them (never brought back); the
records set aside before adopted as failure records (`Operations.quarantine.adopt`, the command
line's `quarantine adopt`), after which the groups are their summaries' again; an event set
aside again after a replay stopped halfway (its record resolved) open in its group again."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import TicketWorld, body, problem, worked
from tickets import Ticket

from cosmos_outbox.documents import (
    FAILED_MESSAGE_TYPE,
    FAILURE_GROUP_TYPE,
    aggregate_event_document,
    read_feed,
)
from cosmos_outbox.relay import OutboxRecord, Quarantine
from cosmos_outbox_operators.cli import main
from cosmos_outbox_testing import run_sync
from operators.test_failure_groups import two_causes

#: The quarantine records the groups read where the summaries are not used (`_groups`).
QUARANTINE_LIMIT = 2000
OLD_WRITER = "malformed by an old writer"
REASON = "message of 70000 bytes is larger than the largest a batch can hold"


@pytest.fixture
def world() -> Iterator[TicketWorld]:
    world = TicketWorld(max_payload_bytes=0)
    world.memory.services = dataclasses.replace(world.memory.services, failure_ingest=True)
    try:
        yield world
    finally:
        world.client.close()


def opened(count: int) -> list[OutboxRecord]:
    """The stored events of `count` tickets opened, as the relay reads them."""
    documents: list[dict[str, Any]] = []
    for i in range(count):
        [event] = Ticket.open(f"T{i}").collect_events()
        documents.append(aggregate_event_document(event, source=Ticket.source(), ttl_seconds=60))
    return [r for r in read_feed(documents) if isinstance(r, OutboxRecord)]


def quarantined(quarantine: Quarantine, events: list[OutboxRecord]) -> None:
    for event in events:
        run_sync(quarantine.put(event, reason=REASON))


def quarantined_in_batches(world: TicketWorld, events: list[OutboxRecord]) -> None:
    """`events` quarantined, then kept as failure records 100 at a time (`Failures.quarantined`
    of many, as `Quarantine.put` keeps each: the fake store reads every document for a query,
    one query an event would be slow)."""
    quarantined(Quarantine(world.memory.store), events)
    wiring = world.outbox.wiring()
    token: str | None = None
    while True:
        page = run_sync(wiring.quarantine.list_page(page_size=100, continuation=token))
        run_sync(wiring.failures.quarantined(*page.items))
        if (token := page.continuation_token) is None:
            return


def groups(world: TicketWorld) -> dict[str, Any]:
    found: dict[str, Any] = body(world.client.request("GET", "outbox/groups"))
    return found


def test_a_quarantine_group_past_the_read_limit_is_counted_exactly(world: TicketWorld) -> None:
    count = QUARANTINE_LIMIT + 100
    assert world.outbox.wiring().quarantine.failures is not None
    quarantined_in_batches(world, opened(count))
    answer = groups(world)
    [group] = answer["groups"]
    assert (group["source"], group["count"], answer["atLeast"]) == ("quarantine", count, False)
    assert group["firstSeen"] <= group["lastSeen"] and group["seen"] == "quarantined"
    # the group found by its id, previewed from every one of its records
    preview = body(
        world.client.request(
            "POST",
            f"outbox/groups/{group['id']}/preview",
            body={"action": "discard", "reason": "written by a bug"},
        )
    )
    assert preview["group"]["count"] == preview["matching"] == count
    assert f"{count} quarantined event(s)" in preview["subscribersWillSee"]


def test_a_quarantine_groups_preview_counts_each_subscriptions_deliveries_of_all_its_events() -> (
    None
):
    """150 quarantined events (more than the 100 a preview's sample held), two subscriptions:
    the retry's preview says what each receives of all of them, as its rules decide (`some`
    lacks the targeted-delivery clause: a rule of its own takes the tickets whose id, their
    session, begins with 0-3), and the list of groups shows three of them as examples."""
    world = TicketWorld(max_payload_bytes=0, subscriptions={"all": None, "some": None})
    world.memory.services = dataclasses.replace(world.memory.services, failure_ingest=True)
    some = " OR ".join(f"sys.SessionId LIKE '{c}%'" for c in "0123")
    world.memory.target_rules.lacking("some", f"tickets: SqlFilter {some}")
    try:
        events = opened(150)
        quarantined_in_batches(world, events)
        [group] = groups(world)["groups"]
        assert group["count"] == 150
        assert len(group["examples"]) == 3
        assert set(group["examples"]) <= {e.event_id for e in events}
        preview = body(
            world.client.request(
                "POST", f"outbox/groups/{group['id']}/preview", body={"action": "retry"}
            )
        )
        assert preview["matching"] == 150
        delivered = {d["subscription"]: d["receives"] for d in preview["deliveries"]}
        chosen = sum(1 for e in events if e.aggregate_id[0] in "0123")
        assert delivered == {"all": 150, "some": chosen}
        assert f"all receives 150; some receives {chosen}" in preview["subscribersWillSee"]
    finally:
        world.client.close()


def test_quarantine_records_set_aside_before_their_records_are_grouped_as_before(
    world: TicketWorld, caplog: pytest.LogCaptureFixture
) -> None:
    quarantine = world.outbox.wiring().quarantine
    events = opened(5)
    quarantined(Quarantine(world.memory.store), events[:3])  # before the records were kept
    quarantined(quarantine, events[3:])
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    [group] = groups(world)["groups"]
    assert (group["source"], group["count"]) == ("quarantine", 5)
    [warning] = [r.getMessage() for r in caplog.records if "set aside before" in r.getMessage()]
    assert "holds 5 record(s) not resolved, its failure records count 2: 3" in warning


def test_a_quarantined_events_record_is_read_by_id_and_its_journey_shows_it_once(
    world: TicketWorld,
) -> None:
    [event] = opened(1)
    quarantined(world.outbox.wiring().quarantine, [event])
    [record_id] = [
        d["id"]
        for d in world.memory.store.of_type(FAILED_MESSAGE_TYPE)
        if d["eventId"] == event.event_id
    ]
    failure = body(world.client.request("GET", f"outbox/failures/{record_id}"))
    assert (failure["eventId"], failure["aggregateType"], failure["version"]) == (
        event.event_id,
        "ticket",
        1,
    )
    record = failure["failure"]
    assert (record["entityKind"], record["eventId"], record["state"]) == (
        "quarantine",
        event.event_id,
        "open",
    )
    journey = body(world.client.request("GET", f"outbox/journey/events/{event.event_id}"))
    assert (journey["quarantine"]["status"], journey["quarantine"]["reason"]) == (
        "quarantined",
        REASON,
    )
    assert [f for f in journey.get("failures", []) if f["entityKind"] == "quarantine"] == []


def test_a_quarantine_groups_retry_resolves_its_records_and_its_discard_archives_them(
    world: TicketWorld,
) -> None:
    world.memory.publisher.max_batch_bytes = 4096
    world.outbox.wiring()  # made with the records kept
    causes = two_causes(world, 6)
    by_cause = {g["cause"][:10]: g for g in groups(world)["groups"]}
    assert sorted(g["count"] for g in by_cause.values()) == [3, 3]
    large, unreadable = by_cause["message of"], by_cause["event vers"]
    url = "outbox/groups/{}/{}"

    world.memory.publisher.max_batch_bytes = 1024 * 1024  # the cause fixed
    started = world.client.request(
        "POST", url.format(large["id"], "act"), body={"action": "retry", "canary": 0}
    )
    assert worked(world.outbox, world.client, started)["done"] == 3
    started = world.client.request(
        "POST",
        url.format(unreadable["id"], "act"),
        body={"action": "discard", "reason": OLD_WRITER},
    )
    assert worked(world.outbox, world.client, started)["done"] == 3
    assert groups(world)["groups"] == []
    states = {
        d["eventId"]: (d["state"], d["history"][-1]["what"], d["history"][-1]["note"])
        for d in world.memory.store.of_type(FAILED_MESSAGE_TYPE)
    }
    assert states == {
        **dict.fromkeys(causes["too large"], ("resolved", "replayed", None)),
        **dict.fromkeys(
            causes["unreadable"], ("archived", "discarded", "malformed by an old writer")
        ),
    }
    # a discarded event's version was given up: its group is not brought back
    problem(world.client.request("POST", url.format(unreadable["id"], "unarchive")), 409)


def open_counts(world: TicketWorld) -> list[int]:
    """The quarantine's group summaries' open counts, as stored."""
    summaries = world.memory.store.of_type(FAILURE_GROUP_TYPE)
    return sorted(d["open"] for d in summaries if d["entityKind"] == "quarantine")


def counted(adopted: Any) -> tuple[int, int]:
    """An adoption's answer (`Adopted`): the records it read, and how many were new."""
    return adopted.read, adopted.new


def set_aside_before(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "set aside before" in r.getMessage()]


def test_records_set_aside_before_are_adopted_and_the_groups_are_exact_again(
    world: TicketWorld, caplog: pytest.LogCaptureFixture
) -> None:
    quarantine = world.outbox.wiring().quarantine
    events = opened(6)
    quarantined(Quarantine(world.memory.store), events[:4])  # before the records were kept
    quarantined(quarantine, events[4:])
    run_sync(world.outbox.operations().quarantine.discard(events[0].event_id, "by hand"))
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    assert groups(world)["groups"][0]["count"] == 5 and open_counts(world) == [2]
    assert set_aside_before(caplog)  # read from the quarantine
    adopt = world.outbox.operations().quarantine.adopt
    # a page of 2 at a time: the discarded record is not read, the two kept are unchanged
    assert counted(run_sync(adopt(page_size=2))) == (5, 3)
    assert open_counts(world) == [5]
    caplog.clear()
    [group] = groups(world)["groups"]
    assert (group["source"], group["count"]) == ("quarantine", 5)
    assert set_aside_before(caplog) == []
    kept = sorted(d["eventId"] for d in world.memory.store.of_type(FAILED_MESSAGE_TYPE))
    assert kept == sorted(e.event_id for e in events[1:])
    # adopted again: nothing new, the same counts
    assert counted(run_sync(adopt())) == (5, 0)
    assert open_counts(world) == [5]
    assert [len(d["attempts"]) for d in world.memory.store.of_type(FAILED_MESSAGE_TYPE)] == [1] * 5


def cli(world: TicketWorld, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args), outbox=world.outbox)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_line_adopts_the_quarantine_once(
    world: TicketWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    world.outbox.wiring()
    quarantined(Quarantine(world.memory.store), opened(3))
    code, out, err = cli(world, capsys, "quarantine", "adopt")
    assert (code, err) == (0, "adopted 3 of 3 unresolved quarantine record(s) (3 new)\n")
    assert out == (
        "3 unresolved quarantine record(s) read, 3 new failure record(s) kept (0 kept already)\n"
    )
    code, out, _ = cli(world, capsys, "--json", "quarantine", "adopt")
    assert code == 0
    assert json.loads(out) == {"read": 3, "new": 0, "of": 3, "healed": 0, "settled": 0}
    assert open_counts(world) == [3]


def test_adopting_the_quarantine_is_refused_when_failure_records_are_not_kept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    world = TicketWorld(max_payload_bytes=0)
    try:
        quarantined(Quarantine(world.memory.store), opened(2))
        code, out, err = cli(world, capsys, "quarantine", "adopt")
        assert code == 1 and out == "" and len(err.splitlines()) == 1
        assert err.startswith("error: 409 Conflict") and "OUTBOX_FAILURE_INGEST" in err
        assert world.memory.store.of_type(FAILED_MESSAGE_TYPE) == []
    finally:
        world.client.close()


def test_an_event_set_aside_again_after_a_replay_stopped_halfway_is_open_in_its_group(
    world: TicketWorld, caplog: pytest.LogCaptureFixture
) -> None:
    wiring = world.outbox.wiring()
    [event] = opened(1)
    quarantined(wiring.quarantine, [event])
    # a replay that was sent and settled the failure record, then stopped before the
    # quarantine record was written: the record resolved, the quarantine record unresolved
    failures = wiring.failures
    assert failures is not None
    run_sync(failures.quarantine_settled(event.event_id, "resolved", what="replayed", by="ada"))
    quarantined(wiring.quarantine, [event])  # the relay sets it aside again (its lease read again)
    quarantined(wiring.quarantine, [event])  # and again: the same quarantine
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    [group] = groups(world)["groups"]
    assert (group["source"], group["count"]) == ("quarantine", 1)
    assert set_aside_before(caplog) == []  # the summaries count it: no reading the quarantine
    [record] = world.memory.store.of_type(FAILED_MESSAGE_TYPE)
    assert (record["state"], len(record["attempts"])) == ("open", 2)
    assert [n["what"] for n in record["history"]] == ["replayed", "quarantined again"]
    # the adoption leaves the new quarantine as it is: nothing to bring to a settled state
    adopted = run_sync(world.outbox.operations().quarantine.adopt())
    assert (adopted.read, adopted.new, adopted.healed) == (1, 0, 0)
    assert run_sync(wiring.quarantine.get(event.event_id)).status == "quarantined"
