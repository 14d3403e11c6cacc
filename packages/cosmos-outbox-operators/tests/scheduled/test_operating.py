"""Scheduled events through the operators' routes (recovery_world.py: the relay, the operators'
routes and the library's subscriber on the test kit's fakes, the kit's clock moved on): the
status counts the scheduled events waiting and those overdue; the journey says an event's due
time and where it is (waiting, released, cancelled); a re-drive keeps a scheduled event's due
time and never sends a cancelled one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import body
from recovery_world import KIND, SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.ports import LeaseBacklog

LATER = timedelta(minutes=15)


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    world = RecoveryWorld()
    try:
        with world.memory:  # the kit's clock is the outbox's
            yield world
    finally:
        world.close()


def scheduled(world: RecoveryWorld, warehouse: str, **due: Any) -> str:
    with world.outbox.transaction(warehouse, entity=KIND) as tx:
        event = tx.publish("StockCounted", {"sku": "a"}, **(due or {"deliver_after": LATER}))
        tx.commit()
    return event


def cancel(world: RecoveryWorld, warehouse: str, event_id: str) -> None:
    with world.outbox.transaction(warehouse, entity=KIND) as tx:
        tx.cancel(event_id)
        tx.commit()


def test_the_status_counts_the_scheduled_events_waiting_and_those_overdue(
    world: RecoveryWorld,
) -> None:
    coming = scheduled(world, "w1")
    cancel(world, "w2", scheduled(world, "w2"))
    scheduled(world, "w3", deliver_at=datetime.now(UTC) - timedelta(hours=1))
    world.relay()
    world.memory.release_due()  # w3's release came: released
    overdue = scheduled(world, "w4", deliver_at=datetime.now(UTC) - timedelta(minutes=5))
    status = body(world.call("GET", "outbox/status"))
    [due] = [e.deliver_at for e in world.memory.scheduled("w1")]
    assert status["scheduled"]["waiting"] == 2  # coming, and the overdue one
    assert status["scheduled"]["overdue"] == 1
    assert datetime.fromisoformat(status["scheduled"]["nextDueAt"]) == due
    assert {e.event_id for e in world.memory.scheduled() if e.state == "waiting"} == {
        coming,
        overdue,
    }


def test_the_journey_of_a_scheduled_event_says_its_due_time_and_where_it_is(
    world: RecoveryWorld,
) -> None:
    world.memory.backlog.leases = [LeaseBacklog("0", 0, None, pending_ids_complete=True)]
    waiting = scheduled(world, "w1")
    dropped = scheduled(world, "w1")
    world.relay()
    cancel(world, "w1", dropped)
    journey = body(world.call("GET", f"outbox/journey/events/{waiting}"))
    assert (journey["relay"], journey["version"], journey["schedule"]["state"]) == (
        "scheduled",
        0,
        "waiting",
    )
    assert "scheduled for" in journey["summary"] and "sent then" in journey["relayNote"]
    # no version: its inbox record says (`other`'s subscriber is unknown to the app)
    assert [s["state"] for s in journey["subscribers"]] == ["unknown", "not received"]
    never = body(world.call("GET", f"outbox/journey/events/{dropped}"))
    assert (never["relay"], never["schedule"]["state"]) == ("cancelled", "cancelled")
    assert "never sent" in never["summary"]
    world.memory.clock.advance(LATER)
    world.relay()
    world.deliver_new()
    sent = body(world.call("GET", f"outbox/journey/events/{waiting}"))
    assert (sent["relay"], sent["schedule"]["state"]) == ("relayed", "released")
    _, sight = sent["subscribers"]
    assert (sight["subscription"], sight["state"]) == (SUBSCRIPTION, "applied")  # its inbox
    aggregate = body(world.call("GET", f"outbox/journey/aggregates/{KIND}/w1"))
    assert {e["eventId"]: e["schedule"]["state"] for e in aggregate["events"]} == {
        waiting: "released",
        dropped: "cancelled",
    }


def test_a_redrive_keeps_a_scheduled_events_due_time_and_never_sends_a_cancelled_one(
    world: RecoveryWorld,
) -> None:
    [counted] = world.publish("w1", "StockAdded")
    coming = scheduled(world, "w1")
    dropped = scheduled(world, "w1")
    cancel(world, "w1", dropped)
    world.relay()
    world.deliver_new()
    [due] = {r.at for r in world.memory.schedule.scheduled}
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    before = len(world.sent)
    page = body(world.call("POST", "outbox/redrive", body={"since": since}))
    assert (page["accepted"], page["scheduled"], page["cancelled"]) == (1, 1, 1)
    assert "release scheduled again for their due time" in page["subscribersWillSee"]
    assert [m.event_id for m in world.sent[before:]] == [counted]  # the scheduled one: not now
    assert [r.at for r in world.memory.schedule.scheduled] == [due, due]  # its due time kept
    world.memory.clock.advance(LATER)
    world.relay()
    assert [m.message_id for m in world.sent[before + 1 :]] == [coming]  # once, at its time
    assert dropped not in {m.event_id or m.message_id for m in world.sent}
