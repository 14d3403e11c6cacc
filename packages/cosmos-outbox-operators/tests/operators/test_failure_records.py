"""Failed messages as data (issue 95 items 1-4) behind the operators' routes, in-process on
recovery_world.py's app with OUTBOX_FAILURE_INGEST on: the dead letters drained into failure
records (`Failures.ingest`, what the relay's trigger and receiver do), the groups read from the
records' summaries with exact counts, a preview that says the operation's real count, a group's
retry that resends each stored message once and marks it resolved (with who and which
operation; its TTL set), and a retried message that fails again: the same record, one more
attempt, open again, its group back."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
from conftest import body
from recovery_world import OTHER, SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.documents import FAILED_MESSAGE_TYPE, failure_record
from cosmos_outbox.http.bounded import await_bounded
from cosmos_outbox.ports import DeadLetterEntity
from cosmos_outbox_testing import run_sync
from operators.test_console_recovery import CONSOLE, PAGE, elements, page
from operators.test_mcp import AZURE, OPERATOR, call, http_session

ENTITY = DeadLetterEntity(SUBSCRIPTION)


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    for running in RecoveryWorld.running():
        running.memory.services = dataclasses.replace(running.memory.services, failure_ingest=True)
        yield running


def drained(world: RecoveryWorld) -> int:
    """Every dead letter at `projections` kept as a record, then removed (the ingest)."""
    failures = world.outbox.wiring().failures
    letters = world.memory.dead_letters.letters(SUBSCRIPTION)
    for letter in letters:
        run_sync(failures.ingest(ENTITY, letter))
    world.memory.dead_letters.move(ENTITY, {letter.sequence_number: None for letter in letters})
    return len(letters)


def dead_lettered(world: RecoveryWorld, warehouses: int) -> list[str]:
    ids: list[str] = []
    for n in range(warehouses):
        ids += world.publish(f"w{n}", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip=set(ids))
    assert drained(world) == len(ids)
    return ids


def records(world: RecoveryWorld) -> list[Any]:
    return [
        failure_record(d)
        for d in world.memory.store.query("SELECT * FROM c")
        if d.get("type") == FAILED_MESSAGE_TYPE
    ]


def test_a_group_of_records_is_counted_exactly_previewed_whole_and_retried_once_each(
    world: RecoveryWorld,
) -> None:
    ids = dead_lettered(world, 600)  # 1,200 failures: more than the 1,000 a queue is peeked for
    assert world.memory.dead_letters.letters(SUBSCRIPTION) == []  # drained
    groups = body(world.call("GET", "outbox/groups"))
    [group] = groups["groups"]
    assert (group["count"], group["seen"], groups["atLeast"]) == (1200, "failed", False)
    url = f"outbox/groups/{group['id']}"
    preview = body(world.call("POST", f"{url}/preview", body={"action": "retry"}))
    assert preview["matching"] == 1200
    assert "1200 message(s) at subscription projections" in preview["subscribersWillSee"]

    operation = body(world.call("POST", f"{url}/act", body={"action": "retry", "canary": 0}))
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=120))
    done = body(world.call("GET", f"outbox/operations/{operation['id']}"))
    assert (done["state"], done["items"], done["done"], done["failed"]) == ("done", 1200, 1200, 0)
    sent = [o for _, o in world.memory.dead_letters.sent]
    assert len(sent) == len({o.message_id for o in sent}) == 1200  # each once
    assert sorted(o.application_properties["cloudEvents_id"] for o in sent) == sorted(ids)
    kept = records(world)
    assert {r.state for r in kept} == {"resolved"}
    assert {r.ttl for r in kept} == {world.outbox.wiring().failures.retention_seconds}
    assert {(n.what, n.operation) for r in kept for n in r.history} == {
        ("retried", operation["id"])
    }
    assert body(world.call("GET", "outbox/groups"))["groups"] == []  # none open

    # the cause not fixed for one: it fails again, back as a dead letter, drained again
    again = sent[0]
    world.memory.dead_letters.dead_letter(
        SUBSCRIPTION,
        again.body,
        message_id=again.message_id,
        session_id=again.session_id,
        subject=again.subject,
        application_properties=dict(again.application_properties),
        reason="HandlerFailed",
        description="again",
        delivery_count=10,
    )
    assert drained(world) == 1
    [reopened] = [r for r in records(world) if r.state == "open"]
    assert reopened.event_id == again.application_properties["cloudEvents_id"]
    assert reopened.attempt_count == 2 and reopened.ttl is None
    assert len(records(world)) == 1200  # the same record, not a new one
    [back] = body(world.call("GET", "outbox/groups"))["groups"]
    assert back["count"] == 1


def test_a_discarded_group_is_archived_and_unarchived_its_counts_return_exactly(
    world: RecoveryWorld,
) -> None:
    """Issue 95 item 4: a group's discard archives its records (a notice to the subscriber as
    before; who and why kept; TTL set), hides the group; unarchive brings them back, at most
    100 a call, the count exactly what it was, the TTL gone (an open record never expires)."""
    dead_lettered(world, 60)
    [group] = body(world.call("GET", "outbox/groups"))["groups"]
    url = f"outbox/groups/{group['id']}"
    operation = body(
        world.call("POST", f"{url}/act", body={"action": "discard", "reason": "known bug 7"})
    )
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=120))
    done = body(world.call("GET", f"outbox/operations/{operation['id']}"))
    assert (done["state"], done["done"], done["sent"]) == ("done", 120, 120)  # 120 notices
    archived = records(world)
    assert {r.state for r in archived} == {"archived"}
    assert {r.ttl for r in archived} == {world.outbox.wiring().failures.retention_seconds}
    assert {(n.what, n.note) for r in archived for n in r.history} == {("archived", "known bug 7")}
    assert body(world.call("GET", "outbox/groups"))["groups"] == []

    first = body(world.call("POST", f"{url}/unarchive"))
    assert (first["unarchived"], first["remaining"], first["group"]["count"]) == (100, 20, 100)
    second = body(world.call("POST", f"{url}/unarchive"))
    assert (second["unarchived"], second["remaining"]) == (20, 0)
    [back] = body(world.call("GET", "outbox/groups"))["groups"]
    assert back["id"] == group["id"] and back["count"] == group["count"] == 120
    kept = records(world)
    assert {r.state for r in kept} == {"open"} and {r.ttl for r in kept} == {None}
    assert world.call("POST", "outbox/groups/0123456789ab/unarchive").status_code == 404


def test_a_records_canary_that_fails_again_pauses_with_the_rest_open(
    world: RecoveryWorld,
) -> None:
    """A group retry's canary over records: the first 3 (in key order) resent, their records
    looked at again after (`RecordItems`' canary items: read for the canary batch only); they
    fail again → the operation pauses naming them, the other 117 still open, untouched."""
    dead_lettered(world, 60)
    [group] = body(world.call("GET", "outbox/groups"))["groups"]
    url = f"outbox/groups/{group['id']}"
    operation = body(
        world.call(
            "POST", f"{url}/act", body={"action": "retry", "canary": 3, "canaryWaitSeconds": 3600}
        )
    )
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=120))
    canary = [o for _, o in world.memory.dead_letters.sent]
    assert len(canary) == 3
    for sent in canary:  # the cause not fixed: each fails again, drained again
        world.memory.dead_letters.dead_letter(
            SUBSCRIPTION,
            sent.body,
            message_id=sent.message_id,
            session_id=sent.session_id,
            subject=sent.subject,
            application_properties=dict(sent.application_properties),
            reason="HandlerFailed",
            description="again",
            delivery_count=10,
        )
    assert drained(world) == 3
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=120))
    shown = body(world.call("GET", f"outbox/operations/{operation['id']}"))
    assert (shown["state"], shown["done"]) == ("paused", 3)
    assert shown["note"].startswith("the canary failed again: 3 of 3")
    assert len(world.memory.dead_letters.sent) == 3  # the rest not sent
    states = [r.state for r in records(world)]
    assert (len(states), states.count("open")) == (120, 120)  # 117 untouched + 3 open again


def signed_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app on Azure, its console's and MCP server's callers signed in (test_mcp's)."""
    for name, value in AZURE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FUNCTIONS_CORETOOLS_ENVIRONMENT", raising=False)


def receives(preview: dict[str, Any]) -> dict[str, int]:
    return {d["subscription"]: d["receives"] for d in preview["deliveries"]}


def test_a_groups_preview_counts_what_each_subscription_receives_of_all_its_records(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group of 150 records (more than the 100 a preview's sample held): its retry and
    discard previews count each subscription's deliveries over every record, as its rules
    decide (`other` lacks the targeted-delivery clause: a rule of its own takes the messages of
    the warehouses w1 and w10-w19 only, by their session: 22 of them); the console's dialog and
    the MCP tool say the same."""
    world.memory.target_rules.lacking(OTHER, "some: SqlFilter sys.SessionId LIKE 'w1%'")
    ids = dead_lettered(world, 75)
    [group] = body(world.call("GET", "outbox/groups"))["groups"]
    url = f"outbox/groups/{group['id']}/preview"
    retry = body(world.call("POST", url, body={"action": "retry"}))
    assert (retry["matching"], retry["group"]["count"]) == (150, 150)
    assert receives(retry) == {SUBSCRIPTION: 150, OTHER: 22}
    assert f"{OTHER} receives 22; {SUBSCRIPTION} receives 150" in retry["subscribersWillSee"]
    assert len(retry["group"]["members"]) == 100 and set(retry["group"]["members"]) <= set(ids)
    discard = body(world.call("POST", url, body={"action": "discard", "reason": "a bug"}))
    assert discard["matching"] == 150
    assert receives(discard) == {SUBSCRIPTION: 150, OTHER: 22}  # each notice in its session

    # the console's dialog and the MCP tool (signed in on Azure): the same numbers
    signed_in(monkeypatch)
    listed = page(world, "groups")
    [(form, _)] = elements(listed, data_preview=f"{CONSOLE}/groups/{group['id']}/preview")[:1]
    route = form["data-preview"].removeprefix("/api/")
    sent = json.loads(form["data-json"])
    shown = world.call("POST", route, headers=PAGE, body=sent).get_body().decode()
    [(box, text)] = elements(shown, data_outcome="group-retry")
    assert box["data-matching"] == "150" and "Retry 150 of the 150 event(s)" in text
    assert f"{OTHER} receives 22; {SUBSCRIPTION} receives 150" in text

    async def on_call() -> None:
        async with http_session(world, OPERATOR) as session:
            seen = await call(session, "preview_group", groupId=group["id"], action="retry")
            assert seen["matching"] == 150 and receives(seen) == receives(retry)

    anyio.run(on_call)


def test_the_groups_of_records_are_listed_with_their_last_failures_as_examples(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each group read from its summary lists examples read from its own records: its last
    three open ones dead-lettered (the highest sequence numbers first), none of another
    group's."""
    added: list[str] = []
    removed: list[str] = []
    for n in range(8):
        added += world.publish(f"w{n}", "StockAdded")
        removed += world.publish(f"w{n}", "StockRemoved")
    world.relay()
    world.deliver_new(skip={*added, *removed})
    assert drained(world) == 16
    groups = {g["action"]: g for g in body(world.call("GET", "outbox/groups"))["groups"]}
    assert {a: g["count"] for a, g in groups.items()} == {"StockAdded": 8, "StockRemoved": 8}
    assert groups["StockAdded"]["examples"] == added[::-1][:3]
    assert groups["StockRemoved"]["examples"] == removed[::-1][:3]
    # the console lists them in each group's row
    signed_in(monkeypatch)
    listed = page(world, "groups")
    for group in groups.values():
        [(_, text)] = elements(listed, data_group_id=group["id"])
        assert all(e in text for e in group["examples"]) and "and 5 more" in text


def test_a_call_short_of_time_lists_the_groups_without_examples_and_previews_what_it_read(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within a route's bound (`await_bounded`), the examples are read while the call keeps 30%
    of it, and a preview's pages too: past that, the groups are listed without examples (their
    counts exact), and a preview counts what it read and says so (pages of 50 here)."""
    monkeypatch.setattr("cosmos_outbox.operations._failures._FACTS_PAGE", 50)
    dead_lettered(world, 75)
    groups = world.outbox.operations().groups

    async def late(work: Callable[[], Awaitable[Any]], after: float) -> Any:
        await asyncio.sleep(after)  # the call's time spent elsewhere first (a slow store)
        return await work()

    def bounded_call(work: Callable[[], Awaitable[Any]], after: float) -> Any:
        return asyncio.run(await_bounded(late(work, after), what="groups", seconds=4.0))

    [group] = bounded_call(groups.groups, 0).groups
    assert (group.count, len(group.examples)) == (150, 3)
    [late_group] = bounded_call(groups.groups, 2.5).groups  # 0.9 s of the 3.4 s left: < 30%
    assert (late_group.count, late_group.examples) == (150, [])

    whole = bounded_call(lambda: groups.preview(group.id, "retry"), 0)
    assert whole.matching == 150 and {d.receives for d in whole.deliveries} >= {150}
    cut = bounded_call(lambda: groups.preview(group.id, "retry"), 2.5)  # one page read
    assert cut.matching == 150
    assert {d.subscription: d.receives for d in cut.deliveries}[SUBSCRIPTION] == 50
    assert "counted for the first 50 of its 150 events" in cut.subscribers_will_see
