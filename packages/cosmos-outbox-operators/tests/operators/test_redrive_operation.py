"""A re-drive as a bulk operation (issue 92 item 1), in-process on recovery_world.py's app (the
test kit's fakes), worked by the relay's worker as its hosts run it: `POST redrive/operation`
answers 202 with the operation at once; its items are the stored events the re-drive selects
(those stored when it began), sent in batches under the operation's id as the re-drive id; its
progress shows at `GET operations/{id}`; a worker killed mid-batch (the broker took part of the
batch) is taken over once its lease ran out, and each event reaches the topic once (a second
send of one is under the same MessageId: the topic's duplicate detection drops it); a cancel
stops it; one audit line, with its counts. The paged `POST redrive` is tested in
test_operators.py and stays as it was."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import body, problem
from recovery_world import KIND, SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.documents import OperationStore
from cosmos_outbox.operations._bulk._worker import BATCH, LEASE_SECONDS, OperationWorker
from cosmos_outbox.relay import OutboxMessage
from cosmos_outbox_testing import run_sync

SINCE = "2000-01-01T00:00:00Z"


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    yield from RecoveryWorld.running()


def stored(world: RecoveryWorld, warehouses: int) -> list[str]:
    """Each warehouse's two events (v1, v2) stored and relayed once; their event ids."""
    ids: list[str] = []
    for n in range(warehouses):
        ids += world.publish(f"w{n}", "StockAdded", "StockAdded")
    world.relay()
    return ids


def start(world: RecoveryWorld, **request: Any) -> dict[str, Any]:
    reply = world.call("POST", "outbox/redrive/operation", body={"since": SINCE, **request})
    assert reply.status_code == 202, reply.get_body()
    return body(reply)  # type: ignore[no-any-return]


def shown(world: RecoveryWorld, operation: dict[str, Any]) -> dict[str, Any]:
    return body(world.call("GET", f"outbox/operations/{operation['id']}"))  # type: ignore[no-any-return]


def host(
    world: RecoveryWorld, name: str, *, skew: float = 0.0, steps: int = 1000
) -> OperationWorker:
    """A relay host's worker of its own name and clock, that takes at most `steps` steps a
    tick (its budget counted in steps, not seconds: a verdict never depends on speed)."""
    bulk = world.outbox.wiring().operations().bulk
    ticks = itertools.count()
    return OperationWorker(
        OperationStore(world.outbox.wiring().store),
        bulk.items_of,
        owner=name,
        clock=lambda: time.time() + skew,
        monotonic=lambda: 0.0 if next(ticks) <= steps else 1e9,
    )


def redriven(world: RecoveryWorld, operation: dict[str, Any]) -> list[OutboxMessage]:
    """The messages the publisher was handed for the operation (its id is their re-drive id)."""
    return [
        m for m in world.sent if m.application_properties.get("outboxRedrive") == operation["id"]
    ]


def topic_accepted(messages: list[OutboxMessage]) -> list[OutboxMessage]:
    """What the topic keeps of `messages`: its duplicate detection drops a MessageId it saw."""
    seen: set[str] = set()
    kept = []
    for m in messages:
        if m.message_id not in seen:
            seen.add(m.message_id)
            kept.append(m)
    return kept


def audit_lines(caplog: pytest.LogCaptureFixture, action: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if getattr(r, "outbox.audit", None) == action]


def test_a_redrive_operation_answers_at_once_and_shows_its_progress_until_done(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    ids = stored(world, 60)
    before = len(world.sent)
    operation = start(world, aggregateType=KIND)
    assert (operation["kind"], operation["state"], operation["itemsKnown"]) == (
        "redrive",
        "created",
        False,
    )
    assert operation["summary"] == (
        f"Re-drive of the stored events created since {SINCE.replace('Z', '+00:00')} of "
        f"{KIND} to the topic"
    )
    assert len(world.sent) == before  # nothing sent by the request
    run_sync(host(world, "a", steps=2).tick(budget_seconds=60))  # counted, one batch sent
    operation = shown(world, operation)
    assert (operation["state"], operation["items"], operation["done"]) == ("running", 120, BATCH)
    assert (operation["remaining"], operation["sent"]) == (120 - BATCH, BATCH)
    world.publish("late", "StockAdded")  # stored after it began: not the operation's
    run_sync(host(world, "a").tick(budget_seconds=60))  # the same host (it holds it) goes on
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["failed"]) == ("done", 120, 0)
    assert (operation["sent"], operation["remaining"], operation["canCancel"]) == (120, 0, False)
    assert "120 new message(s) so far to the topic" in operation["subscribersWillSee"]
    sent = redriven(world, operation)
    assert sorted(str(m.event_id) for m in sent) == sorted(ids)  # each once, the late one not
    assert len({m.message_id for m in sent}) == 120 and not {m.message_id for m in sent} & set(ids)
    [line] = audit_lines(caplog, "operations.redrive")
    assert f"operation {operation['id']}" in line
    assert "done: 120 of 120 done, 0 failed, 0 skipped, 120 message(s) sent" in line


class Killed(BaseException):
    """The worker's process dies here (nothing of it runs on: no except clause catches it)."""


def test_a_worker_killed_mid_batch_is_taken_over_and_sends_each_event_to_the_topic_once(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    ids = stored(world, 60)
    operation = start(world)
    publisher = world.memory.publisher
    real, begun = publisher.send, len(world.sent)

    def dying(batch: Any) -> None:
        """The broker takes the send that brings the re-drive past 70 messages; the process
        dies before the worker counts them (the second batch: 20-odd of 50 sent)."""
        real(batch)
        if len(world.sent) - begun >= 70:
            monkeypatch.setattr(publisher, "send", real)  # the next process's sends are real
            raise Killed

    monkeypatch.setattr(publisher, "send", dying)
    with pytest.raises(Killed):
        run_sync(host(world, "a").tick(budget_seconds=60))
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["inFlight"]) == (
        "running",
        BATCH,
        BATCH,
    )
    died_with = len(redriven(world, operation))
    assert BATCH < died_with < 2 * BATCH  # part of the batch in flight reached the broker
    assert run_sync(host(world, "b").tick(budget_seconds=60)) == 0  # a's lease holds it
    # a's lease ran out: b takes it over, acts on the batch in flight, and goes on
    run_sync(host(world, "b", skew=LEASE_SECONDS + 1).tick(budget_seconds=60))
    operation = shown(world, operation)
    assert (operation["state"], operation["done"], operation["failed"]) == ("done", 120, 0)
    assert (operation["skipped"], operation["sent"], operation["inFlight"]) == (0, 120, 0)
    sent = redriven(world, operation)
    assert len(sent) == 120 + (died_with - BATCH)  # the batch in flight sent again whole...
    by_event: dict[str, set[str]] = {}
    for m in sent:
        by_event.setdefault(str(m.event_id), set()).add(m.message_id)
    # ...under the same MessageIds: the topic keeps each event once
    assert sorted(by_event) == sorted(ids) and all(len(m) == 1 for m in by_event.values())
    accepted = topic_accepted(sent)
    assert sorted(str(m.event_id) for m in accepted) == sorted(ids)
    [line] = audit_lines(caplog, "operations.redrive")
    assert "done: 120 of 120 done, 0 failed, 0 skipped, 120 message(s) sent" in line


def test_a_redrive_operation_is_cancelled_between_batches(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    stored(world, 60)
    operation = start(world, subscription=SUBSCRIPTION)
    assert operation["summary"].endswith(f"to subscription {SUBSCRIPTION}")
    run_sync(host(world, "a", steps=2).tick(budget_seconds=60))
    cancelled = body(world.call("POST", f"outbox/operations/{operation['id']}/cancel"))
    assert (cancelled["state"], cancelled["done"], cancelled["canCancel"]) == (
        "cancelled",
        BATCH,
        False,
    )
    run_sync(host(world, "a").tick(budget_seconds=60))
    sent = redriven(world, operation)
    assert len(sent) == BATCH  # nothing after the cancel
    assert {m.application_properties.get("outboxTarget") for m in sent} == {SUBSCRIPTION}
    [line] = audit_lines(caplog, "operations.redrive")
    assert f"cancelled: {BATCH} of 120 done" in line


def test_a_redrive_operation_is_refused_what_the_paged_redrive_is(world: RecoveryWorld) -> None:
    url = "outbox/redrive/operation"
    problem(world.call("POST", url, body={"since": SINCE, "subscription": "unknown"}), 404)
    problem(world.call("POST", url, body={"since": "yesterday"}), 400)
    problem(world.call("POST", url, body={"since": SINCE, "aggregateId": "w1"}), 400)
    paged = problem(world.call("POST", url, body={"since": SINCE, "pageSize": 10}), 400)
    assert [e["field"] for e in paged["errors"]] == ["pageSize"]  # not paged: not its field
    assert body(world.call("GET", "outbox/operations")) == {"operations": []}
