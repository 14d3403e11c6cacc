"""The poison policy (``_retries``), in-process on the in-memory feed, both flavours: a batch the
handler keeps failing on is counted (the same lease's same continuation), given again after a
wait that doubles up to a cap, shown to ``on_error`` with its attempt, and -- only when the
application gives ``set_aside`` and it returns -- checkpointed past; by default never skipped.
A handler of the wrong kind found at run time fails its batch loudly and is never set aside."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import pytest
from running import FLAVOURS, Flavour, leases, run

from cosmos_changefeed import (
    CheckpointPolicy,
    FailedBatch,
    Failure,
    InMemoryDocuments,
    LeaseContext,
    ManualCheckpointContext,
)
from cosmos_changefeed._retries import Attempts, retry_delay, to_set_aside
from cosmos_changefeed.aio import ManualCheckpointContext as AsyncManualCheckpointContext
from cosmos_changefeed.testing import InMemoryFeed


def poisoned_feed() -> InMemoryFeed:
    feed = InMemoryFeed(partitions=1)
    for name in ("a", "poison", "b"):
        feed.upsert({"id": name, "pk": "k"})
    return feed


class Handler:
    """Fails on any batch holding "poison" until ``healed``; records what it handled."""

    def __init__(self) -> None:
        self.handled: list[str] = []
        self.calls = 0
        self.healed = False

    def __call__(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        self.calls += 1
        if not self.healed and any(doc["id"] == "poison" for doc in changes):
            raise ValueError("cannot handle poison")
        self.handled.extend(doc["id"] for doc in changes)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_failing_batch_is_counted_shown_to_on_error_and_never_skipped_by_default(
    flavour: Flavour,
) -> None:
    feed, documents, handler = poisoned_feed(), InMemoryDocuments(), Handler()
    failures: list[Failure] = []
    run(
        flavour,
        feed,
        documents,
        lambda: len(failures) >= 4,
        handler=handler,
        on_error=failures.append,
        start_from="beginning",
        max_items=10,
    )
    assert [f.attempt for f in failures[:4]] == [1, 2, 3, 4]  # the same batch, again
    first = failures[0]
    assert first.during == "handler" and isinstance(first.error, ValueError)
    assert first.batch is not None and [d["id"] for d in first.batch.changes] == [
        "a",
        "poison",
        "b",
    ]
    assert handler.handled == []
    [lease] = leases(documents)
    assert lease.continuation is None  # nothing checkpointed: at least once
    # healed, the same batch comes again, whole, and only then the lease moves
    handler.healed = True
    run(
        flavour,
        feed,
        documents,
        lambda: handler.handled != [],
        handler=handler,
        start_from="beginning",
    )
    assert handler.handled == ["a", "poison", "b"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_wait_before_a_batch_is_given_again_doubles_up_to_its_cap(
    flavour: Flavour, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, "cosmos_changefeed")
    feed, documents, handler = poisoned_feed(), InMemoryDocuments(), Handler()
    failures: list[Failure] = []
    run(
        flavour,
        feed,
        documents,
        lambda: len(failures) >= 6,
        handler=handler,
        on_error=failures.append,
        start_from="beginning",
        min_retry_delay=0.001,
        max_retry_delay=0.01,
    )
    waits = [
        float(r.getMessage().rsplit(" in ", 1)[1].rstrip("s"))
        for r in caplog.records
        if "the handler failed" in r.getMessage()
    ][:6]
    assert waits == [0.001, 0.002, 0.004, 0.008, 0.01, 0.01]
    assert [r.__dict__["attempt"] for r in caplog.records if "handler failed" in r.getMessage()][
        :6
    ] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_set_aside_takes_a_batch_after_its_attempts_and_the_lease_moves_past_it(
    flavour: Flavour, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "cosmos_changefeed")
    feed, documents, handler = poisoned_feed(), InMemoryDocuments(), Handler()
    feed.upsert({"id": "after", "pk": "k"})
    parked: list[FailedBatch] = []
    failures: list[Failure] = []
    processor = run(
        flavour,
        feed,
        documents,
        lambda: "after" in handler.handled,
        handler=handler,
        on_error=failures.append,
        set_aside=parked.append,
        set_aside_after=3,
        start_from="beginning",
        max_items=1,  # a batch of one: only the poison is set aside
    )
    assert [[d["id"] for d in b.changes] for b in parked] == [["poison"]]
    assert parked[0].attempt == 3 and isinstance(parked[0].error, ValueError)
    assert handler.handled == ["a", "b", "after"]  # in order, the poison not among them
    # the third attempt's twice: the poison alone, then once more after the probe worked
    assert [f.attempt for f in failures] == [1, 2, 3, 3]
    assert processor.batches_set_aside == 1
    [said] = [r for r in caplog.records if "set aside" in r.getMessage()]
    assert said.levelno == logging.WARNING and said.__dict__["attempt"] == 3
    [lease] = leases(documents)
    assert lease.continuation == f'"{feed.lsn("0")}"'


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("checkpoint", ["per batch", "manual"])
def test_only_the_change_that_fails_is_set_aside_the_nine_others_are_handled_and_checkpointed(
    flavour: Flavour, checkpoint: str
) -> None:
    """A batch of 10 in which one change always fails: after ``set_aside_after`` attempts of
    the whole batch, it is taken apart; the nine others are handled (once each), the one is set
    aside alone, and the lease is checkpointed past the batch (under manual checkpoints, by the
    handler's own ``checkpoint()``)."""
    feed, documents, handler = InMemoryFeed(partitions=1), InMemoryDocuments(), Handler()
    names = [f"c{n}" for n in range(10)]
    names[6] = "poison"
    for name in names:
        feed.upsert({"id": name, "pk": "k"})
    parked: list[FailedBatch] = []
    manual = checkpoint == "manual"

    def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        handler(context, changes)
        if manual:
            assert isinstance(context, ManualCheckpointContext)
            context.checkpoint()

    async def handle_aio(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        handler(context, changes)
        if manual:
            assert isinstance(context, AsyncManualCheckpointContext)
            await context.checkpoint()

    async def park(batch: FailedBatch) -> None:
        parked.append(batch)

    run(
        flavour,
        feed,
        documents,
        lambda: bool(parked) and leases(documents)[0].continuation is not None,
        wrap=False,
        handler=handle if flavour == "sync" else handle_aio,
        set_aside=parked.append if flavour == "sync" else park,
        set_aside_after=3,
        start_from="beginning",
        max_items=10,
        checkpoint="manual" if manual else CheckpointPolicy(),
    )
    assert [[d["id"] for d in b.changes] for b in parked] == [["poison"]]
    assert parked[0].attempt == 3 and isinstance(parked[0].error, ValueError)
    assert handler.handled == [name for name in names if name != "poison"]  # in order, once
    [lease] = leases(documents)
    assert lease.continuation == f'"{feed.lsn("0")}"'


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_set_aside_that_fails_leaves_the_batch_where_it_was(flavour: Flavour) -> None:
    feed, documents, handler = poisoned_feed(), InMemoryDocuments(), Handler()
    failures: list[Failure] = []
    tries: list[int] = []

    def park(batch: FailedBatch) -> None:
        tries.append(batch.attempt)
        if len(tries) < 3:
            raise ConnectionError("the dead letter store is away")

    run(
        flavour,
        feed,
        documents,
        lambda: len(tries) >= 3 and handler.handled.count("b") >= 2,
        handler=handler,
        on_error=failures.append,
        set_aside=park,
        set_aside_after=2,
        start_from="beginning",
        max_items=1,
    )
    assert tries == [2, 3, 4]  # each failure from the second on, until it took the batch
    # the lone poison is told by the probe ("b", handled at attempt 2: the handler works); the
    # set_aside that failed leaves the batch where it was, so "b" comes again in its turn
    assert handler.handled == ["a", "b", "b"]
    assert [f.during for f in failures if f.during == "set_aside"] == ["set_aside"] * 2
    assert all(f.batch is not None for f in failures)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_handler_that_returns_the_wrong_kind_fails_its_batch_and_is_never_set_aside(
    flavour: Flavour, recwarn: pytest.WarningsRecorder
) -> None:
    """The sync processor given a plain function that returns a coroutine (a lambda over an
    async def); the aio processor given one marked a coroutine function that returns None."""
    feed, documents = poisoned_feed(), InMemoryDocuments()
    failures: list[Failure] = []
    parked: list[FailedBatch] = []

    async def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        raise AssertionError("never run")

    def sync_returns_a_coroutine(context: LeaseContext, changes: list[dict[str, Any]]) -> Any:
        return handle(context, changes)

    def aio_returns_none(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        return None

    mark = getattr(inspect, "markcoroutinefunction", None)  # Python 3.12+
    if flavour == "aio" and mark is None:
        pytest.skip("only Python 3.12+ can declare a plain function a coroutine function")
    if mark is not None:
        mark(aio_returns_none)  # declared async, is not

    async def park(batch: FailedBatch) -> None:
        parked.append(batch)

    run(
        flavour,
        feed,
        documents,
        lambda: len(failures) >= 3,
        wrap=False,
        handler=sync_returns_a_coroutine if flavour == "sync" else aio_returns_none,
        on_error=failures.append,
        set_aside=parked.append if flavour == "sync" else park,
        set_aside_after=1,
        start_from="beginning",
    )
    assert all(type(f.error).__name__ == "HandlerKindError" for f in failures)
    assert "cosmos_changefeed.aio" in str(failures[0].error)
    assert parked == []
    [lease] = leases(documents)
    assert lease.continuation is None
    assert not [w for w in recwarn if "was never awaited" in str(w.message)]


def test_attempts_count_the_same_position_in_a_row() -> None:
    attempts = Attempts()
    assert [attempts.failed('"1"'), attempts.failed('"1"'), attempts.failed('"2"')] == [1, 2, 1]
    attempts.passed()
    assert attempts.failed('"2"') == 1
    assert Attempts().failed(None) == 1  # a first read from the start is a position too


def test_the_retry_delay_and_the_set_aside_decision() -> None:
    assert [retry_delay(n, 5.0, 60.0) for n in (1, 2, 3, 4, 5, 99)] == [
        5.0,
        10.0,
        20.0,
        40.0,
        60.0,
        60.0,
    ]
    assert retry_delay(1, 0.0, 60.0) == 0.0
    assert not to_set_aside(9, None, ValueError())
    assert to_set_aside(3, 3, ValueError()) and not to_set_aside(2, 3, ValueError())
