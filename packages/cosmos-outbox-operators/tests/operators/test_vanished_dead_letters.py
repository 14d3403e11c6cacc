"""No dead letter leaves without a word (issue 66, item 4): a dead letter resent the way Service
Bus Explorer does it (a copy with the same MessageId, then the dead letter completed) is dropped
by the topic's duplicate detection inside its window: the dead-letter queue empties and the
subscriber never gets it, holding the versions after it. The backlog timer's watch notices it left
without being applied and says so in the status and the event's journey, with the action that
recovers it; that action applies it once, and the watch then says it is resolved."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import body, console_fragment
from recovery_world import KIND, SUBSCRIPTION, RecoveryWorld, outcomes

from cosmos_outbox.operations import _watch
from cosmos_outbox_testing import timer_request


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    yield from RecoveryWorld.running()


def tick(world: RecoveryWorld) -> list[dict[str, Any]]:
    """One backlog timer tick (the watch sweeps); the vanished dead letters the status says."""
    world.client.invoke("outbox_backlog", timer_request())
    vanished: list[dict[str, Any]] = body(world.call("GET", "outbox/status"))["deadLettersVanished"]
    return vanished


def test_a_dead_letter_resent_with_its_message_id_is_said_vanished_then_recovered_once(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    assert outcomes(world.deliver_new(skip={ids[0]})) == ["held", "held"]
    assert tick(world) == []  # seen in its queue: dead-lettered, nothing to say yet

    # Service Bus Explorer's resend: the copy has the dead letter's MessageId, so the topic drops
    # it as a duplicate (the relay sent that MessageId minutes ago); the dead letter is completed.
    [letter] = world.memory.dead_letters.letters(SUBSCRIPTION)
    assert letter.message_id in {m.message_id for m in world.sent}  # inside the window: dropped
    del world.memory.dead_letters.queues[SUBSCRIPTION][letter.sequence_number]
    assert tick(world) == []  # left: a resubmission may still be on its way (the grace period)
    found_gone = datetime.now(UTC)
    monkeypatch.setattr(_watch, "GRACE_SECONDS", 0.0)  # the grace period over
    [vanished] = tick(world)
    # gone since the tick that found it gone, not since the one that said it vanished (issue
    # 72: "gone 0 s ago" for a letter that left 33 s earlier)
    assert datetime.fromisoformat(vanished["leftAt"]) <= found_gone
    assert (vanished["eventId"], vanished["subscription"], vanished["version"]) == (
        ids[0],
        SUBSCRIPTION,
        1,
    )
    assert vanished["stored"] and f"--subscription {SUBSCRIPTION}" in vanished["recover"]
    page = console_fragment(world.client, "status", monkeypatch)
    assert 'data-vanished="1"' in page and ids[0] in page and "never by resending" in page
    journey = body(world.call("GET", f"outbox/journey/events/{ids[0]}"))
    sight = next(s for s in journey["subscribers"] if s["subscription"] == SUBSCRIPTION)
    assert sight["state"] == "vanished"
    # its journey's page does not say "Dead letters: none" in green beside it (issue 72)
    steps = console_fragment(world.client, f"journey/events/{ids[0]}", monkeypatch)
    assert 'data-step="dead-letters" class="warn"' in steps and "vanished" in steps

    # the recovery it names: a re-drive of its aggregate to that subscription only
    before = len(world.sent)
    page = body(
        world.call(
            "POST",
            "outbox/redrive",
            body={
                "since": vanished["createdAt"],
                "aggregateType": KIND,
                "aggregateId": "w1",
                "subscription": SUBSCRIPTION,
            },
        )
    )
    assert page["events"] == 3
    assert all(
        m.application_properties["outboxTarget"] == SUBSCRIPTION for m in world.sent[before:]
    )
    results = world.deliver_new()
    assert outcomes(results).count("applied") == 1  # version 1, once; it releases 2 and 3
    stock = world.stock("w1")
    assert stock is not None and stock["version"] == 3
    assert tick(world) == []  # applied: resolved
    history = [
        s["what"] for s in body(world.call("GET", f"outbox/journey/events/{ids[0]}"))["history"]
    ]
    assert history[0].startswith("created") and history[1].startswith(
        f"dead-lettered at {SUBSCRIPTION}"
    )
    assert f"applied by {SUBSCRIPTION}" in history


def test_the_journey_keeps_the_history_of_a_resubmitted_dead_letter(world: RecoveryWorld) -> None:
    """Issue 66, item 6: after a resubmission the journey said only "applied"."""
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[0]})
    tick(world)
    [letter] = world.memory.dead_letters.letters(SUBSCRIPTION)
    done = world.call(
        "POST",
        f"outbox/deadletters/{SUBSCRIPTION}/resubmit",
        body={"sequenceNumbers": [letter.sequence_number]},
        headers={"x-functions-key": "the-master-key"},
    )
    assert body(done)["done"] == 1
    [(_, resubmitted)] = world.memory.dead_letters.sent
    world.deliver(resubmitted)
    journey = body(world.call("GET", f"outbox/journey/events/{ids[0]}"))
    history = [s["what"] for s in journey["history"]]
    assert history[0].startswith("created")
    assert history[1].startswith(f"dead-lettered at {SUBSCRIPTION}")
    assert f"resubmitted to {SUBSCRIPTION} by admin key" in history
    assert history[-1] == f"applied by {SUBSCRIPTION}"


def test_a_dead_letter_that_left_then_was_given_up_is_said_given_up(world: RecoveryWorld) -> None:
    """The watch tells a version given up after its dead letter left (a release) from one
    applied: the journey's history says which."""
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[0]})
    assert tick(world) == []
    [letter] = world.memory.dead_letters.letters(SUBSCRIPTION)
    del world.memory.dead_letters.queues[SUBSCRIPTION][letter.sequence_number]
    assert tick(world) == []  # left: within the grace period
    released = world.call(
        "POST",
        f"outbox/subscribers/{SUBSCRIPTION}/release",
        body={"aggregateType": KIND, "aggregateId": "w1", "version": 1, "reason": "lost"},
    )
    assert body(released)["subscription"] == SUBSCRIPTION
    world.deliver_new()
    assert tick(world) == []
    journey = body(world.call("GET", f"outbox/journey/events/{ids[0]}"))
    history = [s["what"] for s in journey["history"]]
    assert f"given up at {SUBSCRIPTION} after it left its dead-letter queue" in history
    assert f"applied by {SUBSCRIPTION}" not in history
