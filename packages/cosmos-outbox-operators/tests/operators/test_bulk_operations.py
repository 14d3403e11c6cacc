"""Bulk operations (issue 92 items 1 and 2), in-process on recovery_world.py's app (the library's
subscriber behind `projections`, dead letters on the test kit's fakes), worked by the relay's
worker as its hosts run it (`Operations.bulk.work`, or an `OperationWorker` of a host's own
name and clock): a group's retry sends its canary first and the rest only once the canary is
seen applied; a canary that fails again pauses the operation, says why and leaves the rest
untouched; a worker killed mid-batch is taken over by another once its lease ran out, and each
dead letter is resubmitted once (a second send of one is under the same MessageId: the topic
drops it); a cancel stops it; each operation writes one audit line, with its counts."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from conftest import body, problem
from recovery_world import OTHER, SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.documents import OPERATIONS_PARTITION, OperationStore
from cosmos_outbox.operations._bulk._worker import LEASE_SECONDS, OperationWorker
from cosmos_outbox.ports import BatchOperation, DeadLetterEntity, Outgoing
from cosmos_outbox_testing import run_sync


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    yield from RecoveryWorld.running()


def dead_lettered(world: RecoveryWorld, warehouses: int) -> list[str]:
    """Each warehouse's two events (v1, v2) dead-lettered at `projections` by its subscriber
    (its handler failed): one failure group of 2 x `warehouses`; their event ids."""
    ids: list[str] = []
    for n in range(warehouses):
        ids += world.publish(f"w{n}", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip=set(ids))
    return ids


def the_group(world: RecoveryWorld) -> dict[str, Any]:
    [group] = body(world.call("GET", "outbox/groups"))["groups"]
    return group  # type: ignore[no-any-return]


def start(world: RecoveryWorld, group: dict[str, Any], **request: Any) -> dict[str, Any]:
    reply = world.call("POST", f"outbox/groups/{group['id']}/act", body=request)
    assert reply.status_code == 202, reply.get_body()
    return body(reply)  # type: ignore[no-any-return]


def work(world: RecoveryWorld) -> None:
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=60))


def shown(world: RecoveryWorld, operation: dict[str, Any]) -> dict[str, Any]:
    return body(world.call("GET", f"outbox/operations/{operation['id']}"))  # type: ignore[no-any-return]


def resubmitted(world: RecoveryWorld) -> list[Outgoing]:
    return [o for _, o in world.memory.dead_letters.sent]


def audit_lines(caplog: pytest.LogCaptureFixture, action: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if getattr(r, "outbox.audit", None) == action]


def test_a_group_retry_sends_its_canary_then_the_rest_once_the_canary_is_applied(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    ids = dead_lettered(world, 12)
    operation = start(world, the_group(world), action="retry", canaryWaitSeconds=3600)
    assert (operation["state"], operation["itemsKnown"], operation["canary"]) == (
        "created",
        False,
        5,
    )
    work(world)  # counted, the canary sent: nothing more until it is seen applied
    operation = shown(world, operation)
    assert (operation["state"], operation["itemsKnown"], operation["done"]) == ("canary", True, 5)
    canary = resubmitted(world)
    assert len(canary) == 5 and len(world.memory.dead_letters.letters(SUBSCRIPTION)) == 19
    work(world)
    assert shown(world, operation)["state"] == "canary"  # waits (an hour at most)

    for each in canary:  # the subscriber applies the canary
        world.deliver(each)
    work(world)
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["failed"]) == ("done", 24, 0)
    assert "the canary succeeded: 5 of 5 seen applied by projections" in operation["note"]
    # each dead letter resubmitted once, under a MessageId of its own
    sent = resubmitted(world)
    assert len(sent) == len({o.message_id for o in sent}) == 24
    assert sorted(o.application_properties["cloudEvents_id"] for o in sent) == sorted(ids)
    assert world.memory.dead_letters.letters(SUBSCRIPTION) == []
    [line] = audit_lines(caplog, "operations.groups.retry")
    assert f"operation {operation['id']}" in line and "done: 24 of 24 done, 0 failed" in line
    assert len(audit_lines(caplog, "deadletters.resubmit")) == 1 + 1  # the canary, one batch


def test_a_canary_that_fails_again_pauses_and_leaves_the_rest_untouched(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    dead_lettered(world, 12)
    left = {d.sequence_number for d in world.memory.dead_letters.letters(SUBSCRIPTION)}
    operation = start(world, the_group(world), action="retry", canary=3, canaryWaitSeconds=3600)
    work(world)
    canary = resubmitted(world)
    assert len(canary) == 3
    # the cause is not fixed: the subscriber fails on each again (the broker dead-letters them)
    for sent in canary:
        world.memory.dead_letters.dead_letter(
            SUBSCRIPTION,
            sent.body,
            message_id=sent.message_id,
            session_id=sent.session_id,
            application_properties=sent.application_properties,
            description="handler failed: KeyError 'sku'",
        )
    work(world)
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["canContinue"]) == ("paused", 3, True)
    assert operation["note"].startswith("the canary failed again: 3 of 3 came back as dead letters")
    assert (
        "the other 21 are untouched: continue (act on them anyway) or cancel" in operation["note"]
    )
    work(world)  # paused: nothing moves
    assert len(resubmitted(world)) == 3
    still = {d.sequence_number for d in world.memory.dead_letters.letters(SUBSCRIPTION)}
    assert len(still & left) == 21  # the rest untouched, the canary's back as 3 new ones

    operation = body(world.call("POST", f"outbox/operations/{operation['id']}/continue"))
    assert operation["state"] == "running" and "continued by" in operation["note"]
    body(world.call("POST", f"outbox/operations/{operation['id']}/cancel"))
    operation = shown(world, operation)
    assert (operation["state"], operation["canCancel"]) == ("cancelled", False)
    [line] = audit_lines(caplog, "operations.groups.retry")
    assert "cancelled: 3 of 24 done" in line
    problem(world.call("POST", f"outbox/operations/{operation['id']}/cancel"), 409)
    work(world)
    assert len(resubmitted(world)) == 3  # cancelled: nothing more


class Killed(BaseException):
    """The worker's process dies here (nothing of it runs on: no except clause catches it)."""


def dying_move(
    world: RecoveryWorld, *, after: int, sent_not_removed: bool
) -> Callable[[DeadLetterEntity, Mapping[int, Outgoing | None]], Any]:
    """The fake's move, dying once `after` dead letters were moved in all (the next one sent
    but not removed, when `sent_not_removed`: the broker took the send, the process died
    before the dead letter was completed)."""
    fake = world.memory.dead_letters
    real = fake.move
    moved = [0]

    def move(entity: DeadLetterEntity, moves: Mapping[int, Outgoing | None]) -> Any:
        if moved[0] < 0:  # the next process's move is the broker's own
            return real(entity, moves)
        outcomes: dict[int, str | None] = {}
        for number, outgoing in moves.items():
            if moved[0] == after:
                if sent_not_removed and outgoing is not None:
                    fake.sent.append((entity, outgoing))
                moved[0] = -1
                raise Killed
            outcomes |= real(entity, {number: outgoing})
            moved[0] += 1
        return outcomes

    return move


@pytest.mark.parametrize("sent_not_removed", [False, True], ids=["between", "sent-not-removed"])
def test_a_worker_killed_mid_batch_is_taken_over_and_acts_on_each_item_once(
    world: RecoveryWorld,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    sent_not_removed: bool,
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    ids = dead_lettered(world, 60)
    operation = start(world, the_group(world), action="retry", canary=0)
    dying = dying_move(world, after=70, sent_not_removed=sent_not_removed)
    monkeypatch.setattr(world.memory.dead_letters, "move", dying)
    bulk = world.outbox.wiring().operations().bulk
    store = OperationStore(world.outbox.wiring().store)

    def host(name: str, skew: float = 0.0) -> OperationWorker:
        return OperationWorker(store, bulk.items_of, owner=name, clock=lambda: time.time() + skew)

    with pytest.raises(Killed):  # the first batch done, the second killed after 20 of 50
        run_sync(host("a").tick(budget_seconds=60))
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["inFlight"]) == ("running", 50, 50)
    assert run_sync(host("b").tick(budget_seconds=60)) == 0  # a's lease holds it
    # a's lease ran out: b takes it over, acts on what is left of the batch, and goes on
    run_sync(host("b", skew=LEASE_SECONDS + 1).tick(budget_seconds=60))
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["failed"]) == ("done", 120, 0)
    assert (operation["skipped"], operation["sent"]) == (0, 120)
    # each dead letter resubmitted once: a second send of one has the same MessageId
    sent = resubmitted(world)
    assert len({o.message_id for o in sent}) == 120
    assert len(sent) == 120 + (1 if sent_not_removed else 0)
    by_event: dict[str, set[str]] = {}
    for o in sent:
        by_event.setdefault(o.application_properties["cloudEvents_id"], set()).add(o.message_id)
    assert sorted(by_event) == sorted(ids) and all(len(m) == 1 for m in by_event.values())
    assert world.memory.dead_letters.letters(SUBSCRIPTION) == []
    [line] = audit_lines(caplog, "operations.groups.retry")
    assert "done: 120 of 120 done, 0 failed, 0 skipped, 120 message(s) sent" in line


def test_a_cancel_stops_an_operation_after_its_batch_in_flight(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    dead_lettered(world, 60)
    operation = start(world, the_group(world), action="retry", canary=0)
    dying = dying_move(world, after=70, sent_not_removed=False)
    monkeypatch.setattr(world.memory.dead_letters, "move", dying)
    with pytest.raises(Killed):
        work(world)
    cancelled = body(world.call("POST", f"outbox/operations/{operation['id']}/cancel"))
    assert (cancelled["state"], cancelled["inFlight"]) == ("cancelled", 50)
    assert audit_lines(caplog, "operations.groups.retry") == []  # not closed: a batch in flight
    bulk = world.outbox.wiring().operations().bulk
    later = OperationWorker(
        OperationStore(world.outbox.wiring().store),
        bulk.items_of,
        owner="b",
        clock=lambda: time.time() + LEASE_SECONDS + 1,
    )
    run_sync(later.tick(budget_seconds=60))
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["inFlight"]) == ("cancelled", 100, 0)
    assert len(world.memory.dead_letters.letters(SUBSCRIPTION)) == 20  # never begun
    [line] = audit_lines(caplog, "operations.groups.retry")
    assert "cancelled: 100 of 120 done" in line


def test_a_quarantine_retry_whose_canary_cannot_be_sent_pauses(world: RecoveryWorld) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    for event_id in ids:
        world.poison(event_id)
    world.relay()
    group = the_group(world)
    assert (group["source"], group["count"]) == ("quarantine", 3)
    operation = start(world, group, action="retry", canary=1)
    work(world)  # the cause is not fixed: the canary's replay is set aside again
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["failed"]) == ("paused", 0, 1)
    assert operation["note"].startswith("the canary failed: 1 of 1 could not be sent again")
    records = body(world.call("GET", "outbox/quarantine"))["items"]
    assert [r["replays"] for r in records].count(0) == 2  # the other two untouched


def test_an_operation_is_refused_what_one_row_would_be(world: RecoveryWorld) -> None:
    dead_lettered(world, 1)
    group = the_group(world)
    url = f"outbox/groups/{group['id']}/act"
    problem(world.call("POST", url, body={"action": "discard"}), 400)  # no reason
    problem(world.call("POST", url, body={"action": "retry", "canary": 101}), 400)
    problem(world.call("POST", url, body={"action": "retry", "canaryWaitSeconds": -1}), 400)
    problem(world.call("POST", "outbox/groups/0123456789ab/act", body={"action": "retry"}), 404)
    path = "outbox/deadletters/unknown/resubmit/operation"
    problem(world.call("POST", path, body={"all": True}), 404)
    missing = "outbox/operations/00000000-0000-4000-8000-000000000000"
    problem(world.call("GET", missing), 404)
    problem(world.call("POST", f"{missing}/cancel"), 404)
    assert body(world.call("GET", "outbox/operations")) == {"operations": []}


def test_two_starts_at_once_on_one_group_start_one_operation_the_other_409_naming_it(
    world: RecoveryWorld,
) -> None:
    """Issue 95 item 5: two tabs (or two POSTs) starting an operation on one group at the same
    moment start one; the other is refused 409 naming the open one, and so is every start while
    it is open (paused included). Once it is over, the group may be acted on again; its counts
    add up (done + failed + skipped + remaining = items)."""
    dead_lettered(world, 12)
    group = the_group(world)
    url = f"outbox/groups/{group['id']}/act"
    barrier = threading.Barrier(2)

    def post(request: dict[str, Any]) -> Any:
        barrier.wait()
        return world.call("POST", url, body=request)

    with ThreadPoolExecutor(2) as pool:
        replies = list(
            pool.map(post, [{"action": "retry", "canary": 0}, {"action": "discard", "reason": "x"}])
        )
    assert sorted(r.status_code for r in replies) == [202, 409]
    [started] = [body(r) for r in replies if r.status_code == 202]
    [refused] = [problem(r, 409) for r in replies if r.status_code == 409]
    assert started["id"] in refused["detail"] and "cancel it" in refused["detail"]
    assert [o["id"] for o in body(world.call("GET", "outbox/operations"))["operations"]] == [
        started["id"]
    ]
    again = problem(world.call("POST", url, body={"action": "retry"}), 409)
    assert started["id"] in again["detail"]

    work(world)
    done = shown(world, started)
    assert done["state"] == "done"
    assert done["done"] + done["failed"] + done["skipped"] + done["remaining"] == done["items"]
    dead_lettered(world, 2)  # the same cause again: the group, open once more
    assert start(world, the_group(world), action="retry", canary=0)["id"] != started["id"]


# -- a group's operation and its entity's: one at a time over the same dead letters -----------

LETTERS = f"outbox/deadletters/{SUBSCRIPTION}"


@pytest.fixture(params=["dead letters", "failure records"])
def kept(request: pytest.FixtureRequest) -> Iterator[RecoveryWorld]:
    """The world, its dead letters read at the subscription or (OUTBOX_FAILURE_INGEST on) kept
    as failure records, the relay's ingest having drained them (`drain`)."""
    for running in RecoveryWorld.running():
        if request.param == "failure records":
            services = running.memory.services
            running.memory.services = dataclasses.replace(services, failure_ingest=True)
        yield running


def drain(world: RecoveryWorld) -> None:
    """With failure records kept: every dead letter at `projections` kept as one, then removed."""
    if not world.memory.services.failure_ingest:
        return
    letters = world.memory.dead_letters.letters(SUBSCRIPTION)
    run_sync(world.outbox.wiring().failures.ingest_many(DeadLetterEntity(SUBSCRIPTION), letters))
    world.memory.dead_letters.move(
        DeadLetterEntity(SUBSCRIPTION), {letter.sequence_number: None for letter in letters}
    )


def two_groups(world: RecoveryWorld) -> dict[str, dict[str, Any]]:
    """Two failure groups at `projections` (StockAdded's, StockMoved's: 2 and 1 dead letters),
    by action."""
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockMoved")
    world.relay()
    world.deliver_new(skip=set(ids))
    drain(world)
    groups = body(world.call("GET", "outbox/groups"))["groups"]
    assert sorted((g["action"], g["count"]) for g in groups) == [
        ("StockAdded", 2),
        ("StockMoved", 1),
    ]
    return {g["action"]: g for g in groups}


def start_letters(world: RecoveryWorld, action: str, **request: Any) -> dict[str, Any]:
    reply = world.call("POST", f"{LETTERS}/{action}/operation", body=request)
    assert reply.status_code == 202, reply.get_body()
    return body(reply)  # type: ignore[no-any-return]


def test_an_entitys_operation_is_refused_409_naming_an_open_group_operation_there(
    kept: RecoveryWorld,
) -> None:
    """A group's operation shares its entity: an operation on every dead letter there (or a
    filter's: it could hold the group's) is refused 409 naming it while it is open; another
    group's operation there starts, and an entity elsewhere is not held."""
    world = kept
    groups = two_groups(world)
    added = start(world, groups["StockAdded"], action="retry", canary=0)
    for action, request in (
        ("resubmit", {"all": True, "canary": 0}),
        ("discard", {"aggregateId": "w9", "reason": "known bug"}),
    ):
        refused = problem(world.call("POST", f"{LETTERS}/{action}/operation", body=request), 409)
        assert added["id"] in refused["detail"] and "cancel it" in refused["detail"]
    moved = start(world, groups["StockMoved"], action="discard", reason="known bug")
    refused = problem(world.call("POST", f"{LETTERS}/resubmit/operation", body={"all": True}), 409)
    assert added["id"] in refused["detail"]
    elsewhere = world.call(
        "POST", f"outbox/deadletters/{OTHER}/resubmit/operation", body={"all": True}
    )
    assert elsewhere.status_code == 202, elsewhere.get_body()
    assert {o["id"] for o in body(world.call("GET", "outbox/operations"))["operations"]} == {
        added["id"],
        moved["id"],
        body(elsewhere)["id"],
    }


def test_a_group_operation_is_refused_409_naming_an_open_operation_on_its_entitys_letters(
    kept: RecoveryWorld,
) -> None:
    world = kept
    groups = two_groups(world)
    # none of the groups' dead letters match: the entity is held all the same
    letters = start_letters(world, "resubmit", aggregateId="w9", canary=0)
    for group in groups.values():
        url = f"outbox/groups/{group['id']}/act"
        refused = problem(world.call("POST", url, body={"action": "retry"}), 409)
        assert letters["id"] in refused["detail"] and "cancel it" in refused["detail"]


def each_reads_the_holds_before_either_writes(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of two starts' first transactional batch in the operations' partition waits (2 s at
    most) until the other's reached it too: each read the holds before either wrote them -- the
    race a read-then-write would lose, made certain (a route runs in a thread of its own)."""
    store = world.memory.store
    real = store.execute_batch
    both = threading.Barrier(2, timeout=2)
    arrived = [0]
    lock = threading.Lock()

    def batch(partition_key: str, operations: Sequence[BatchOperation]) -> list[str | None]:
        with lock:
            first = partition_key == OPERATIONS_PARTITION and arrived[0] < 2
            arrived[0] += first
        if first:
            both.wait()
        return real(partition_key, operations)

    monkeypatch.setattr(store, "execute_batch", batch)


def test_a_group_operation_and_its_entitys_started_at_once_start_one(
    kept: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both read the entity's hold before either writes it: each writes it under the etag it
    read (or creates it), one batch is refused, and its start reads the holds again: 409."""
    world = kept
    groups = two_groups(world)
    each_reads_the_holds_before_either_writes(world, monkeypatch)

    def post(path_and_request: tuple[str, dict[str, Any]]) -> Any:
        return world.call("POST", path_and_request[0], body=path_and_request[1])

    starts = [
        (f"outbox/groups/{groups['StockAdded']['id']}/act", {"action": "retry", "canary": 0}),
        (f"{LETTERS}/discard/operation", {"all": True, "reason": "known bug"}),
    ]
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(post, starts))
    assert sorted(r.status_code for r in replies) == [202, 409]
    [started] = [body(r) for r in replies if r.status_code == 202]
    [refused] = [problem(r, 409) for r in replies if r.status_code == 409]
    assert started["id"] in refused["detail"]
    assert len(body(world.call("GET", "outbox/operations"))["operations"]) == 1


def test_the_entity_is_held_no_longer_once_the_operation_that_held_it_is_cancelled_or_done(
    kept: RecoveryWorld,
) -> None:
    world = kept
    groups = two_groups(world)
    added = start(world, groups["StockAdded"], action="retry", canary=0)
    every = {"all": True, "canary": 0}
    problem(world.call("POST", f"{LETTERS}/resubmit/operation", body=every), 409)
    body(world.call("POST", f"outbox/operations/{added['id']}/cancel"))
    # cancelled (no batch in flight): its hold is over, the entity's operation starts
    letters = start_letters(world, "resubmit", **every)
    refused = problem(
        world.call(
            "POST", f"outbox/groups/{groups['StockMoved']['id']}/act", body={"action": "retry"}
        ),
        409,
    )
    assert letters["id"] in refused["detail"]
    work(world)
    assert shown(world, letters)["state"] == "done"
    groups = two_groups(world)  # the same causes again: the groups open once more
    moved = start(world, groups["StockMoved"], action="retry", canary=0)
    again = world.call("POST", f"{LETTERS}/resubmit/operation", body=every)
    assert moved["id"] in problem(again, 409)["detail"]
    work(world)
    assert shown(world, moved)["state"] == "done"
    start_letters(world, "resubmit", **every)
