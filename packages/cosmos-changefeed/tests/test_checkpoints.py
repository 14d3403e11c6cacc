"""When a lease is checkpointed (``_checkpoints``), on the sync and the aio processor in-process:
per batch (the default), every N batches or T seconds (``CheckpointPolicy``), at most once per
``checkpoint_interval``, and manually (``checkpoint="manual"``). A crash is an instance frozen
in its handler (``inprocess.Frozen``: from then on nothing it writes reaches the lease
container, as after a SIGKILL); the heir's deliveries say what was given again -- the resend
bound. ``test_takeover`` holds the same bound against a process SIGKILLed for real."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from deadlines import SHORT
from inprocess import CHECKPOINT, FLAVOURS, STEADY, Delivered, Flavour, Member, eventually, fleet

from cosmos_changefeed import (
    ChangeFeedProcessor,
    CheckpointPolicy,
    InMemoryDocuments,
    InMemoryLeaseStore,
)
from cosmos_changefeed._checkpoints import CheckpointPlan
from cosmos_changefeed.testing import InMemoryFeed, InMemoryFeedSource

DOCS = 24
#: The time policy's seconds (``CheckpointPolicy(seconds=...)``).
SECONDS = 1.0


def one_key(feed: InMemoryFeed, count: int = DOCS, start: int = 0) -> list[str]:
    """``count`` documents of one partition key (one lease), from ``d<start>``."""
    ids = [f"d{i:02d}" for i in range(start, start + count)]
    for item in ids:
        feed.upsert({"id": item, "pk": "one"})
    return ids


def crash_at(
    batch: int, delivered: Delivered, member: list[Member], handed: list[list[str]]
) -> Callable[[Any, list[dict[str, Any]]], object]:
    """A handle that records each batch and freezes its instance in the ``batch``-th one."""

    def handle(context: Any, changes: list[dict[str, Any]]) -> object:
        handed.append([doc["id"] for doc in changes])
        delivered(context, changes)
        if len(handed) == batch:
            member[0].switch.freeze()
        return None

    return handle


def given_again(flavour: Flavour, crash: int, **options: Any) -> tuple[list[list[str]], list[str]]:
    """One lease read in batches of 2 by an instance frozen in its ``crash``-th batch, then by
    an heir: the batches the first instance was given, and what the heir was given again."""
    feed = InMemoryFeed(1)
    ids = one_key(feed)
    first, heir = Delivered(), Delivered()
    handed: list[list[str]] = []
    holder: list[Member] = []
    with fleet(flavour, feed) as f:
        doomed = f.processor(
            "doomed",
            crash_at(crash, first, holder, handed),
            start_from="beginning",
            max_items=2,
            **options,
        )
        holder.append(doomed)
        doomed.start()
        eventually(lambda: len(handed) >= crash)
        f.processor("heir", heir, start_from="beginning", max_items=2).start()
        eventually(lambda: heir.ids | first.ids >= set(ids))
    again = sorted(heir.ids & first.ids)
    return handed, again


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_by_default_a_crash_gives_again_only_the_batch_in_flight(flavour: Flavour) -> None:
    handed, again = given_again(flavour, crash=7)
    assert len(handed) == 7
    assert again == sorted(handed[-1])


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_n_batches_a_crash_gives_again_fewer_than_n_batches_and_the_one_in_flight(
    flavour: Flavour,
) -> None:
    handed, again = given_again(flavour, crash=8, checkpoint=CheckpointPolicy(batches=5))
    # checkpointed after the 5th batch: the 6th, 7th and 8th (in flight) are given again
    assert again == sorted(doc for batch in handed[5:8] for doc in batch)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_t_seconds_an_idle_lease_is_checkpointed_once_its_time_has_passed(
    flavour: Flavour,
) -> None:
    """Not checkpointed before its time: the checkpoint's write (the lease's timestamp once it
    holds the last position) comes ``seconds`` after the lease was acquired at least -- compared
    with the lease's own times, not with what the test saw when: on a loaded machine the
    batches themselves may take longer than ``seconds``, and the checkpoint then is on time."""
    feed, delivered = InMemoryFeed(1), Delivered()
    acquired: list[dt.datetime] = []
    with fleet(flavour, feed) as f:
        policy = CheckpointPolicy(batches=1_000, seconds=SECONDS)
        member = f.processor(
            "p",
            delivered,
            max_items=3,
            checkpoint=policy,
            on_lease_acquired=lambda _token: acquired.append(dt.datetime.now(dt.UTC)),
        ).start()
        member.wait_until_listening()
        ids = one_key(feed, 9)
        eventually(lambda: delivered.ids >= set(ids), within=SHORT)
        last = delivered.batches[-1][0].continuation
        eventually(lambda: f.stored()["0"].continuation == last, within=SHORT)
        written = f.stored()["0"].last_updated  # the checkpoint's write, or a renewal after it
    early = written - acquired[0]
    assert early >= dt.timedelta(seconds=SECONDS), f"checkpointed {early} after its start"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_stop_checkpoints_what_the_policy_had_not_yet(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(1), Delivered()
    with fleet(flavour, feed) as f:
        policy = CheckpointPolicy(batches=1_000)
        member = f.processor("p", delivered, max_items=2, checkpoint=policy, **STEADY).start()
        member.wait_until_listening()
        ids = one_key(feed, 10)
        eventually(lambda: delivered.ids >= set(ids))
        member.stop()
        stored = f.stored()["0"]
        assert stored.owner is None
        assert stored.continuation == delivered.batches[-1][0].continuation
        again = f.processor("p", delivered, checkpoint=policy, **STEADY).start()
        more = one_key(feed, 2, start=10)
        eventually(lambda: delivered.ids >= set(more))
        again.stop()
    assert all(delivered.count(item) == 1 for item in ids)


class Checkpoints:
    """The checkpoints written to ``documents`` (a replace that moves a lease's
    ``ContinuationToken``), with when each was written (``time.monotonic``)."""

    def __init__(self, documents: InMemoryDocuments) -> None:
        self.written: list[tuple[float, str]] = []
        replace = documents.replace

        def counting(
            document: Mapping[str, Any], partition_key: str, etag: str | None
        ) -> dict[str, Any]:
            before = documents.read(str(document["id"]), partition_key) or {}
            stored = replace(document, partition_key, etag)
            moved = stored.get("ContinuationToken")
            if moved is not None and moved != before.get("ContinuationToken"):
                self.written.append((time.monotonic(), str(moved)))
            return stored

        documents.replace = counting  # type: ignore[method-assign]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_with_an_interval_a_busy_lease_is_checkpointed_at_most_once_per_interval_and_at_its_stop(
    flavour: Flavour,
) -> None:
    interval, feed, delivered = 0.25, InMemoryFeed(1), Delivered()

    def slow(context: Any, changes: list[dict[str, Any]]) -> None:
        delivered(context, changes)
        time.sleep(0.01)  # a handler that writes somewhere: the lease stays busy

    with fleet(flavour, feed) as f:
        checkpoints = Checkpoints(f.leases)
        member = f.processor("p", slow, max_items=2, checkpoint_interval=interval).start()
        member.wait_until_listening()
        ids = one_key(feed, 80)
        eventually(lambda: delivered.ids >= set(ids))
        running = list(checkpoints.written)
        member.stop()
        assert f.stored()["0"].continuation == delivered.batches[-1][0].continuation
    assert len(delivered.batches) >= 40
    span = running[-1][0] - running[0][0]
    # the first at once, then one per interval at most (a write may start a little after the
    # plan took it: one more allowed); a checkpoint per batch would be 40
    assert len(running) <= span / interval + 2, (len(running), span)
    assert checkpoints.written[-1][1] == delivered.batches[-1][0].continuation


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_with_an_interval_a_crash_gives_again_what_followed_the_last_written_checkpoint(
    flavour: Flavour,
) -> None:
    handed, again = given_again(flavour, crash=8, checkpoint_interval=60.0)
    # the first batch's checkpoint is written at once; the next is not due for a minute
    assert again == sorted(doc for batch in handed[1:8] for doc in batch)


def test_a_plan_with_an_interval_writes_at_most_once_per_interval() -> None:
    now = [0.0]
    plan = CheckpointPlan(CheckpointPolicy(), clock=lambda: now[0], interval=10.0)
    assert plan.handled('"1"') == '"1"'  # the first at once
    now[0] = 4.0
    assert plan.handled('"2"') is None and plan.caught_up() is None
    now[0] = 10.0
    assert plan.handled('"3"') == '"3"'
    now[0] = 15.0
    assert plan.handled('"4"') is None
    now[0] = 20.0
    assert plan.caught_up() == '"4"'  # an idle lease: at its next read once the time passed
    plan.written('"4"')
    now[0] = 21.0
    plan.handled('"5"')
    assert plan.stopping() == '"5"'  # a stop (or a release) writes it whatever the interval


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_manual_checkpoints_store_only_what_the_handler_checkpointed(flavour: Flavour) -> None:
    feed = InMemoryFeed(1)
    ids = one_key(feed)
    first, heir = Delivered(), Delivered()
    handed: list[list[str]] = []
    holder: list[Member] = []

    def handle(context: Any, changes: list[dict[str, Any]]) -> object:
        handed.append([doc["id"] for doc in changes])
        first(context, changes)
        if len(handed) == 8:
            holder[0].switch.freeze()
        return CHECKPOINT if len(handed) % 3 == 0 else None  # after the 3rd and 6th batches

    with fleet(flavour, feed) as f:
        member = f.processor(
            "doomed", handle, start_from="beginning", max_items=2, checkpoint="manual"
        )
        holder.append(member)
        member.start()
        eventually(lambda: len(handed) >= 8)
        f.processor("heir", heir, start_from="beginning", max_items=2).start()
        eventually(lambda: heir.ids | first.ids >= set(ids))
    assert sorted(heir.ids & first.ids) == sorted(doc for batch in handed[6:8] for doc in batch)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_manual_processor_stops_without_checkpointing_what_was_not(flavour: Flavour) -> None:
    feed, delivered = InMemoryFeed(2), Delivered()
    with fleet(flavour, feed) as f:
        member = f.processor("p", delivered, start_from="beginning", checkpoint="manual")
        member.start()
        ids = one_key(feed, 6)
        eventually(lambda: delivered.ids >= set(ids))
        member.stop()
        stored = f.stored()
        again = f.processor("p", delivered, start_from="beginning", checkpoint="manual").start()
        eventually(lambda: all(delivered.count(item) == 2 for item in ids))
        again.stop()
    # nothing the handler did not checkpoint is (a lease's start, found empty, is kept: "0")
    assert all(lease.owner is None for lease in stored.values())
    assert all(lease.continuation in (None, '"0"') for lease in stored.values())


def test_a_manual_checkpoint_of_an_earlier_batch_after_a_later_one_is_a_no_op() -> None:
    plan = CheckpointPlan("manual")
    first, second = plan.handed(), plan.handed()
    assert plan.manual_checkpoint(second)
    assert not plan.manual_checkpoint(first)
    assert plan.handled('"9"') is None and plan.stopping() is None


def test_a_plan_checkpoints_every_n_batches_or_t_seconds_whichever_first() -> None:
    now = [0.0]
    plan = CheckpointPlan(CheckpointPolicy(batches=3, seconds=10.0), clock=lambda: now[0])
    assert [plan.handled(f'"{n}"') for n in (1, 2, 3, 4)] == [None, None, '"3"', None]
    assert plan.caught_up() is None
    now[0] = 10.0
    assert plan.caught_up() == '"4"'
    assert plan.handled('"5"') is None
    now[0] = 25.0
    assert plan.handled('"6"') == '"6"'
    plan.written('"6"')
    assert plan.stopping() is None
    plan.handled('"7"')
    assert plan.stopping() == '"7"'


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (CheckpointPolicy, "batches must be 1 or more"),
        ("auto", "a CheckpointPolicy"),
    ],
)
def test_a_checkpoint_option_that_cannot_be_honoured_is_refused(option: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        checkpoint = option(batches=0) if option is CheckpointPolicy else option
        ChangeFeedProcessor(
            InMemoryFeedSource(),
            InMemoryLeaseStore(),
            processor_name="p",
            instance_name="i",
            handler=lambda context, changes: None,
            checkpoint=checkpoint,
        )
    with pytest.raises(ValueError, match="seconds"):
        CheckpointPolicy(seconds=0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"checkpoint_interval": 0}, "checkpoint_interval must be a finite number"),
        ({"checkpoint_interval": float("inf")}, "checkpoint_interval must be a finite number"),
        ({"checkpoint_interval": "1s"}, "checkpoint_interval is a number of seconds"),
        (
            {"checkpoint_interval": 1.0, "checkpoint": "manual"},
            "checkpoint_interval is given with checkpoint='manual'",
        ),
    ],
)
def test_a_checkpoint_interval_that_cannot_be_honoured_is_refused(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        ChangeFeedProcessor(
            InMemoryFeedSource(),
            InMemoryLeaseStore(),
            processor_name="p",
            instance_name="i",
            handler=lambda context, changes: None,
            **options,
        )
