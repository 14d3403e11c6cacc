"""The quarantine's adoption (`Operations.quarantine.adopt`) where other writers meet it, on the
test kit's store with a step run before one of its writes (`Interleaved`: a subclass of the
store port's fake, no SDK class patched): a replay or a discard stopped between its failure
record settled and its quarantine record written is finished by the adoption (the groups read
their summaries again); a replay run between the adoption's read of a record and its write, or
an adoption run between a replay's two writes, leaves the failure record resolved (the
summaries count nothing open too many). And the command line's progress, a page at a time."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from conftest import TicketWorld

from cosmos_outbox.documents import FAILED_MESSAGE_TYPE, FAILURE_GROUP_TYPE
from cosmos_outbox.operations import Actor, acting_as
from cosmos_outbox.ports import BatchOperation
from cosmos_outbox.relay import Quarantine
from cosmos_outbox_testing import InMemoryStore, run_sync
from operators.test_quarantine_groups_exact import (
    cli,
    groups,
    open_counts,
    opened,
    quarantined,
    set_aside_before,
)

QUARANTINE_TYPE = "quarantinedEvent"
#: A write: its kind (create, replace, ...) and its document.
Write = Callable[[str, Mapping[str, Any]], bool]


class Interleaved(InMemoryStore):
    """The test kit's store, with `steps`: each a write it waits for and what runs just before
    it (another writer's whole use case, in between two steps of this one's), run once; and
    `fails`: writes that fail, once each (the process gone before them)."""

    steps: list[tuple[Write, Callable[[], object]]]
    fails: list[Write]

    def _before(self, kind: str, document: Mapping[str, Any]) -> None:
        for failing in list(self.fails):
            if failing(kind, document):
                self.fails.remove(failing)
                raise ConnectionResetError("the process stopped before this write")
        for step in list(self.steps):
            if step[0](kind, document):
                self.steps.remove(step)
                step[1]()

    def replace(
        self, document: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        self._before("replace", document)
        return super().replace(document, if_match=if_match)

    def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]:
        for operation in operations:
            if operation.document is not None:
                self._before(operation.kind, operation.document)
        return super().execute_batch(partition_key, operations)


@pytest.fixture
def world() -> Iterator[TicketWorld]:
    world = TicketWorld(max_payload_bytes=0)
    world.memory.services = dataclasses.replace(world.memory.services, failure_ingest=True)
    store = world.memory.store
    store.__class__ = Interleaved  # the same documents, a step before a chosen write
    assert isinstance(store, Interleaved)
    store.steps, store.fails = [], []
    world.outbox.wiring()  # made with the records kept
    try:
        yield world
    finally:
        world.client.close()


def interleaved(world: TicketWorld) -> Interleaved:
    store = world.memory.store
    assert isinstance(store, Interleaved)
    return store


def quarantine_written(status: str) -> Write:
    """A quarantine record written with `status`."""
    return lambda kind, d: d.get("type") == QUARANTINE_TYPE and d.get("status") == status


def failure_created(kind: str, document: Mapping[str, Any]) -> bool:
    return kind == "create" and document.get("type") == FAILED_MESSAGE_TYPE


def states(world: TicketWorld) -> dict[str, str]:
    """Each event's failure record's state."""
    return {d["eventId"]: d["state"] for d in world.memory.store.of_type(FAILED_MESSAGE_TYPE)}


def statuses(world: TicketWorld) -> dict[str, str]:
    """Each event's quarantine record's status."""
    return {d["eventId"]: d["status"] for d in world.memory.store.of_type(QUARANTINE_TYPE)}


def test_a_replay_and_a_discard_stopped_between_their_two_writes_are_finished_by_the_adoption(
    world: TicketWorld, caplog: pytest.LogCaptureFixture
) -> None:
    events = opened(3)
    quarantined(world.outbox.wiring().quarantine, events)
    replayed, discarded, kept = (e.event_id for e in events)
    ops = world.outbox.operations().quarantine
    store = interleaved(world)
    store.fails = [quarantine_written("resolved"), quarantine_written("discarded")]
    with pytest.raises(ConnectionResetError):
        run_sync(ops.replay(replayed))
    with pytest.raises(ConnectionResetError), acting_as(Actor("signed-in operator", "ada", "1")):
        run_sync(ops.discard(discarded, "written by a bug"))
    # the failure records settled, the quarantine records not: the summaries count 1 of 3
    assert states(world) == {replayed: "resolved", discarded: "archived", kept: "open"}
    assert set(statuses(world).values()) == {"quarantined"}
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    [group] = groups(world)["groups"]
    assert group["count"] == 3
    [warning] = set_aside_before(caplog)
    assert "`cosmos-outbox quarantine adopt`" in warning

    adopted = run_sync(ops.adopt())
    assert (adopted.read, adopted.new, adopted.healed, adopted.settled) == (3, 0, 2, 0)
    assert statuses(world) == {replayed: "resolved", discarded: "discarded", kept: "quarantined"}
    gave_up = run_sync(ops.get(discarded))
    assert (gave_up.discard_reason, gave_up.discarded_by) == (
        "written by a bug",
        "ada (id 1)",
    )
    assert run_sync(ops.get(replayed)).replays == 1
    caplog.clear()
    [group] = groups(world)["groups"]
    assert group["count"] == 1 and set_aside_before(caplog) == []
    assert open_counts(world) == [1]
    # adopted again: nothing to heal
    again = run_sync(ops.adopt())
    assert (again.read, again.new, again.healed) == (1, 0, 0)


def test_a_replay_between_the_adoptions_read_and_its_write_is_not_undone(
    world: TicketWorld, caplog: pytest.LogCaptureFixture
) -> None:
    [event] = opened(1)
    quarantined(Quarantine(world.memory.store), [event])  # before the records were kept
    ops = world.outbox.operations().quarantine
    store = interleaved(world)
    store.steps = [(failure_created, lambda: run_sync(ops.replay(event.event_id)))]
    adopted = run_sync(ops.adopt())
    assert store.steps == []  # the replay ran between the adoption's read and its write
    assert (adopted.read, adopted.new, adopted.settled) == (1, 1, 1)
    assert statuses(world) == {event.event_id: "resolved"}
    assert states(world) == {event.event_id: "resolved"}
    assert open_counts(world) == [0]
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    assert groups(world)["groups"] == [] and set_aside_before(caplog) == []


@pytest.mark.parametrize(("action", "state"), [("replay", "resolved"), ("discard", "archived")])
def test_an_adoption_between_a_replays_or_discards_two_writes_leaves_nothing_open(
    world: TicketWorld, action: str, state: str
) -> None:
    events = opened(2)
    quarantined(Quarantine(world.memory.store), events)  # before the records were kept
    ops = world.outbox.operations().quarantine
    store = interleaved(world)
    answers: list[Any] = []
    status = "resolved" if action == "replay" else "discarded"
    store.steps = [(quarantine_written(status), lambda: answers.append(run_sync(ops.adopt())))]
    # the replay (discard) finds no failure record to settle; the adoption keeps one, open,
    # and reads the quarantine record still quarantined; then the replay (discard) writes it
    if action == "replay":
        run_sync(ops.replay(events[0].event_id))
    else:
        run_sync(ops.discard(events[0].event_id, "written by a bug"))
    [adopted] = answers
    assert (adopted.read, adopted.new, adopted.settled) == (2, 2, 0)
    assert states(world) == {events[0].event_id: state, events[1].event_id: "open"}
    assert open_counts(world) == [1]
    summaries = world.memory.store.of_type(FAILURE_GROUP_TYPE)
    assert [(d["open"], d[state]) for d in summaries] == [(1, 1)]


def test_the_command_line_says_its_progress_a_page_at_a_time(
    world: TicketWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantined(Quarantine(world.memory.store), opened(101))  # before the records were kept
    code, out, err = cli(world, capsys, "quarantine", "adopt")
    assert code == 0
    assert err.splitlines() == [
        "adopted 100 of 101 unresolved quarantine record(s) (100 new)",
        "adopted 101 of 101 unresolved quarantine record(s) (101 new)",
    ]
    assert out == (
        "101 unresolved quarantine record(s) read, 101 new failure record(s) kept "
        "(0 kept already)\n"
    )
    code, out, err = cli(world, capsys, "--json", "--quiet", "quarantine", "adopt")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"read": 101, "new": 0, "of": 101, "healed": 0, "settled": 0}
