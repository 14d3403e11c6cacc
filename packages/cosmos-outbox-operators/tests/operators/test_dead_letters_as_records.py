"""The dead letters' routes on the failure records (issue 95, OUTBOX_FAILURE_INGEST on), in-process
on recovery_world.py's app as test_failure_records.py: the relay drains the dead-letter queues,
so the per-subscription count, list, peek, preview, resubmit and discard (by sequence numbers,
and as a bulk operation) read and act on the entity's open failure records, exact at any size
(no "at least"); a failure's peek and its event's journey show its attempts and what was done
to it (issue 95 item 3); a record retried, failed again and retried again goes out with a
MessageId of its own each time."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from conftest import body
from recovery_world import SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.documents import FAILED_MESSAGE_TYPE, failure_record
from cosmos_outbox.errors import StoreUnavailableError
from cosmos_outbox.ports import DeadLetterEntity, Outgoing
from cosmos_outbox_operators.cli import main
from cosmos_outbox_testing import run_sync
from operators.test_console_recovery import page
from operators.test_mcp import AZURE, OPERATOR, call, http_session, refused

ENTITY = DeadLetterEntity(SUBSCRIPTION)
URL = f"outbox/deadletters/{SUBSCRIPTION}"


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    for running in RecoveryWorld.running():
        running.memory.services = dataclasses.replace(running.memory.services, failure_ingest=True)
        yield running


def drained(world: RecoveryWorld) -> int:
    """Every dead letter at `projections` kept as a record, then removed (the ingest)."""
    failures = world.outbox.wiring().failures
    letters = world.memory.dead_letters.letters(SUBSCRIPTION)
    if letters:
        run_sync(failures.ingest_many(ENTITY, letters))
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


def records(world: RecoveryWorld) -> dict[str, Any]:
    return {
        d["eventId"]: failure_record(d)
        for d in world.memory.store.query("SELECT * FROM c")
        if d.get("type") == FAILED_MESSAGE_TYPE
    }


def fail_again(world: RecoveryWorld, sent: Outgoing) -> None:
    """A resent message that fails again: dead-lettered at `projections`, then drained."""
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
    assert drained(world) == 1


def listed(world: RecoveryWorld) -> list[dict[str, Any]]:
    """Every dead letter the list route gives, page after page."""
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        reply = world.call("GET", URL, headers={"X-Continuation-Token": token} if token else {})
        found += body(reply)["items"]
        token = reply.headers.get("X-Continuation-Token")
        if not token:
            return found


def test_the_dead_letters_routes_read_the_records_exactly_past_the_peeked_limit(
    world: RecoveryWorld,
) -> None:
    ids = dead_lettered(world, 600)  # 1,200: more than the 1,000 a queue was peeked for
    assert world.memory.dead_letters.letters(SUBSCRIPTION) == []  # drained
    counts = {e["name"]: e for e in body(world.call("GET", "outbox/deadletters"))["entities"]}
    assert (counts[SUBSCRIPTION]["deadLetters"], counts[SUBSCRIPTION]["atLeast"]) == (1200, False)
    items = listed(world)
    assert sorted(i["eventId"] for i in items) == sorted(ids)
    assert len({i["sequenceNumber"] for i in items}) == 1200
    preview = body(world.call("POST", f"{URL}/resubmit/preview", body={"all": True}))
    assert (preview["matching"], preview["atLeast"]) == (1200, False)

    peeked = body(world.call("GET", f"{URL}/messages/{items[0]['sequenceNumber']}"))
    assert peeked["eventId"] == items[0]["eventId"]
    failure = peeked["failure"]
    assert (failure["state"], failure["attemptCount"], failure["history"]) == ("open", 1, [])
    [attempt] = failure["attempts"]
    assert attempt["sequenceNumber"] == items[0]["sequenceNumber"]
    assert world.call("GET", f"{URL}/messages/999999").status_code == 404


def test_a_resubmit_by_numbers_resolves_the_records_and_a_failure_again_shows_its_history(
    world: RecoveryWorld,
) -> None:
    ids = dead_lettered(world, 3)
    items = listed(world)
    first = next(i for i in items if i["eventId"] == ids[0])
    done = body(
        world.call("POST", f"{URL}/resubmit", body={"sequenceNumbers": [first["sequenceNumber"]]})
    )
    assert (done["done"], done["failed"]) == (1, 0)
    [(_, resent)] = world.memory.dead_letters.sent
    assert resent.application_properties["cloudEvents_id"] == ids[0]
    record = records(world)[ids[0]]
    assert record.state == "resolved" and record.ttl is not None
    assert [(n.what, n.operation) for n in record.history] == [("retried", None)]
    count = body(world.call("GET", "outbox/deadletters"))["entities"][0]
    assert (count["name"], count["deadLetters"]) == (SUBSCRIPTION, 5)

    fail_again(world, resent)  # the cause not fixed: back, the same record, attempt 2
    assert body(world.call("GET", "outbox/deadletters"))["entities"][0]["deadLetters"] == 6
    again = next(i for i in listed(world) if i["eventId"] == ids[0])
    failure = body(world.call("GET", f"{URL}/messages/{again['sequenceNumber']}"))["failure"]
    assert (failure["state"], failure["attemptCount"], failure["reason"]) == (
        "open",
        2,
        "HandlerFailed",
    )
    assert [a["sequenceNumber"] for a in failure["attempts"]] == [
        first["sequenceNumber"],
        again["sequenceNumber"],
    ]
    assert [(n["what"], n["by"]) for n in failure["history"]] == [
        ("retried", "nobody: keys not enforced locally")
    ]

    journey = body(world.call("GET", f"outbox/journey/events/{ids[0]}"))
    [seen] = journey["failures"]
    assert (seen["id"], seen["attemptCount"]) == (failure["id"], 2)
    assert (
        body(world.call("GET", f"outbox/journey/events/{ids[1]}"))["failures"][0]["attemptCount"]
        == 1
    )

    # retried again: a MessageId of its own (the first one's would be dropped as a duplicate)
    body(world.call("POST", f"{URL}/resubmit", body={"sequenceNumbers": [again["sequenceNumber"]]}))
    ids_sent = [o.message_id for _, o in world.memory.dead_letters.sent]
    assert len(ids_sent) == len(set(ids_sent)) == 2


def test_a_discard_by_numbers_archives_the_records_with_who_and_why(
    world: RecoveryWorld,
) -> None:
    ids = dead_lettered(world, 2)
    numbers = [i["sequenceNumber"] for i in listed(world)]
    done = body(
        world.call(
            "POST",
            f"{URL}/discard",
            body={"sequenceNumbers": numbers[:3], "reason": "known bug 7"},
        )
    )
    assert (done["done"], done["failed"]) == (3, 0)
    assert len(world.memory.dead_letters.sent) == 3  # a discard notice each
    archived = [r for r in records(world).values() if r.state == "archived"]
    assert len(archived) == 3
    assert {(n.what, n.note) for r in archived for n in r.history} == {("archived", "known bug 7")}
    assert body(world.call("GET", "outbox/deadletters"))["entities"][0]["deadLetters"] == 1
    assert len(ids) == 4


def test_a_bulk_resubmit_of_an_entity_acts_on_every_record_once_noted_with_its_operation(
    world: RecoveryWorld,
) -> None:
    ids = dead_lettered(world, 60)
    operation = body(
        world.call("POST", f"{URL}/resubmit/operation", body={"all": True, "canary": 0})
    )
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=120))
    done = body(world.call("GET", f"outbox/operations/{operation['id']}"))
    assert (done["state"], done["items"], done["done"], done["failed"]) == ("done", 120, 120, 0)
    sent = [o for _, o in world.memory.dead_letters.sent]
    assert len(sent) == len({o.message_id for o in sent}) == 120
    assert sorted(o.application_properties["cloudEvents_id"] for o in sent) == sorted(ids)
    stored = records(world).values()
    assert {r.state for r in stored} == {"resolved"}
    assert {(n.what, n.operation) for r in stored for n in r.history} == {
        ("retried", operation["id"])
    }
    assert body(world.call("GET", "outbox/deadletters"))["entities"][0]["deadLetters"] == 0


def retried_and_failed_again(world: RecoveryWorld) -> tuple[list[str], dict[str, Any]]:
    """Three warehouses' six failures; the first retried by an operator, failed again: its
    event ids and the first one's failure (two attempts, one note)."""
    ids = dead_lettered(world, 3)
    first = next(i for i in listed(world) if i["eventId"] == ids[0])
    world.call("POST", f"{URL}/resubmit", body={"sequenceNumbers": [first["sequenceNumber"]]})
    [(_, resent)] = world.memory.dead_letters.sent
    fail_again(world, resent)
    again = next(i for i in listed(world) if i["eventId"] == ids[0])
    return ids, body(world.call("GET", f"{URL}/messages/{again['sequenceNumber']}"))["failure"]


def test_a_failures_history_from_the_command_line_by_its_id_and_in_its_events_journey(
    world: RecoveryWorld, capsys: Any
) -> None:
    ids, failure = retried_and_failed_again(world)
    code = main(["deadletters", "show", failure["id"]], outbox=world.outbox)
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith(f"failure {failure['id']}: open at {SUBSCRIPTION}, 2 attempt(s)")
    assert [line.split(" at ")[0].strip() for line in lines[1:]] == [
        "attempt 1",
        "attempt 2",
        "retried",
    ]
    assert "HandlerFailed: again" in lines[2]
    assert main(["journey", "--event", ids[0]], outbox=world.outbox) == 0
    journey = capsys.readouterr().out
    assert f"failure {failure['id']}: open at {SUBSCRIPTION}, 2 attempt(s)" in journey
    assert main(["deadletters", "show", "failure-" + "0" * 32], outbox=world.outbox) != 0
    assert "failed message" in capsys.readouterr().err


def test_a_failures_history_in_the_console_peek_its_own_page_and_its_events_journey(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    monkeypatch.setenv("OUTBOX_CONSOLE_SIGN_IN", "app-service-authentication")
    ids, failure = retried_and_failed_again(world)
    again = failure["attempts"][-1]["sequenceNumber"]
    for path in (
        f"deadletters/{SUBSCRIPTION}/messages/{again}",
        f"failures/{failure['id']}",
        f"journey/events/{ids[0]}",
    ):
        html = page(world, path)
        assert f'data-failure-id="{failure["id"]}"' in html, path
        assert 'data-attempts="2"' in html, path
        assert html.count('class="failure-attempt"') == 2, path
        assert html.count('class="failure-note"') == 1, path
        assert "nobody: keys not enforced locally" in html or "retried" in html, path


def test_an_agent_reads_a_failures_history_with_show_failure(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in AZURE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FUNCTIONS_CORETOOLS_ENVIRONMENT", raising=False)
    ids, failure = retried_and_failed_again(world)

    async def on_call() -> None:
        async with http_session(world, OPERATOR) as session:
            shown = await call(session, "show_failure", failureId=failure["id"])
            assert shown["eventId"] == ids[0]
            assert shown["failure"]["attemptCount"] == 2
            assert [n["what"] for n in shown["failure"]["history"]] == ["retried"]
            journey = await call(session, "event_journey", eventId=ids[0])
            assert [f["id"] for f in journey["failures"]] == [failure["id"]]
            assert "not found" in (
                await refused(session, "show_failure", failureId="failure-" + "0" * 32)
            )

    anyio.run(on_call)


def test_an_entitys_resubmit_whose_canary_fails_again_pauses_its_records_back_open(
    world: RecoveryWorld,
) -> None:
    """The canary's messages dead-lettered again and drained: their records open again (their
    MessageId the first dead letter's, not the resubmission's): the operation pauses, the rest
    untouched."""
    dead_lettered(world, 12)
    operation = body(
        world.call(
            "POST",
            f"{URL}/resubmit/operation",
            body={"all": True, "canary": 3, "canaryWaitSeconds": 3600},
        )
    )
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=120))
    canary = [o for _, o in world.memory.dead_letters.sent]
    assert len(canary) == 3
    for sent in canary:
        world.memory.dead_letters.dead_letter(
            SUBSCRIPTION,
            sent.body,
            message_id=sent.message_id,
            session_id=sent.session_id,
            application_properties=dict(sent.application_properties),
            description="handler failed: KeyError 'sku'",
        )
    assert drained(world) == 3
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=120))
    shown = body(world.call("GET", f"outbox/operations/{operation['id']}"))
    assert (shown["state"], shown["done"]) == ("paused", 3), shown["note"]
    assert shown["note"].startswith("the canary failed again: 3 of 3")
    assert len(world.memory.dead_letters.sent) == 3  # the other 21 untouched
    assert body(world.call("GET", "outbox/deadletters"))["entities"][0]["deadLetters"] == 24


def test_an_events_journey_whose_failure_records_do_not_answer_is_a_503_not_no_such_event(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an event the outbox no longer holds (its document expired), known by its failure record
    ids = dead_lettered(world, 1)
    store = world.memory.store
    for document in store.query("SELECT * FROM c"):
        if document.get("type") == "domainEvent" and document.get("id") == ids[0]:
            store.delete(document["partitionKey"], document["id"])
    assert body(world.call("GET", f"outbox/journey/events/{ids[0]}"))["failures"]

    class Unanswered:  # the failure records' reads time out (the outbox's own still answer)
        def __getattr__(self, name: str) -> Any:
            async def fails(*args: Any, **kwargs: Any) -> Any:
                raise StoreUnavailableError("the store timed out")  # as the adapter says it

            return fails

    monkeypatch.setattr(world.outbox.wiring().failures, "_store", Unanswered())
    answer = world.call("GET", f"outbox/journey/events/{ids[0]}")
    assert answer.status_code == 503, answer.get_body().decode()[:3000]
    assert "Cosmos DB (the store) is unavailable" in answer.get_body().decode()


def test_a_journey_reads_the_records_of_its_event_or_aggregate_not_every_entitys(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # at 10,000 failures a journey that scanned each watched entity's first 1,000 records took
    # 3 s and missed those past them: it reads the records by the event's or aggregate's id
    ids = dead_lettered(world, 2)
    letters = world.outbox.wiring().operations().dead_letters

    async def scanned(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a journey scanned an entity's records")

    monkeypatch.setattr(letters, "scan", scanned)
    journey = body(world.call("GET", f"outbox/journey/events/{ids[0]}"))
    assert [d["eventId"] for d in journey["deadLetters"]] == [ids[0]], journey["deadLetters"]
    assert journey["unanswered"] == [], journey["unanswered"]
    aggregate = body(world.call("GET", "outbox/journey/aggregates/warehouse/w1"))
    told = sorted(d["eventId"] for e in aggregate["events"] for d in e["deadLetters"])
    assert told == sorted(ids[2:]), aggregate["events"]  # w1's two (ids: w0's two, w1's two)
