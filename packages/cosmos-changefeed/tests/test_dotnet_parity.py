""".NET's processor features this package lacked (issue 71, item 3), in-process on the in-memory
feed, both flavours: the push estimator (.NET's ``GetChangeFeedEstimatorBuilder``), an estimate
that is the truth for a processor that never ran, a start from a saved continuation
(``ChangeFeedStartFrom.ContinuationToken``), and the lease state exported and restored -- with
an in-memory lease store that keeps it in a file (.NET 3.59's in-memory leases with a stream)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from running import FAST, FLAVOURS, Flavour, leases, run, wait, wrapped

import cosmos_changefeed
import cosmos_changefeed.aio
from cosmos_changefeed import (
    ChangeFeedEstimator,
    ChangeFeedProcessor,
    ChangeFeedProcessorState,
    Continuation,
    InMemoryDocuments,
    InMemoryLeaseStore,
    LeaseContext,
    lease_prefix,
)
from cosmos_changefeed._names import legacy_prefix
from cosmos_changefeed.aio import ChangeFeedEstimator as AsyncChangeFeedEstimator
from cosmos_changefeed.aio import ChangeFeedProcessor as AsyncChangeFeedProcessor
from cosmos_changefeed.aio import InMemoryLeaseStore as AsyncInMemoryLeaseStore
from cosmos_changefeed.testing import AsyncInMemoryFeedSource, InMemoryFeed, InMemoryFeedSource


def write(feed: InMemoryFeed, prefix: str, n: int) -> list[str]:
    ids = [f"{prefix}{i}" for i in range(n)]
    for doc_id in ids:
        feed.upsert({"id": doc_id, "pk": doc_id})
    return ids


class Seen:
    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        self.ids.extend(doc["id"] for doc in changes)


# -- the estimator --------------------------------------------------------------------------


def test_a_processor_that_never_ran_is_estimated_as_get_pending_lists_it() -> None:
    """The issue's figures: 57 changes pending and no lease yet; with estimate_from the
    estimate was 0 (no lease: nothing summed) while get_pending listed 57."""
    feed = InMemoryFeed(partitions=4)
    write(feed, "d", 57)
    estimator = ChangeFeedEstimator(
        InMemoryFeedSource(feed),
        InMemoryLeaseStore(),
        processor_name="p",
        estimate_from="beginning",
    )
    pending = estimator.get_pending(100)
    assert sum(len(p.changes) for p in pending) == 57
    estimates = estimator.get_estimates()
    assert sorted(s.lease_token for s in estimates) == ["0", "1", "2", "3"]
    assert estimator.estimated_lag() == 57
    assert {s.lease_token: s.estimated_lag for s in estimates} == {
        p.lease_token: len(p.changes) for p in pending
    }
    # as .NET's estimator, without estimate_from nothing is known of a processor that never ran
    plain = ChangeFeedEstimator(InMemoryFeedSource(feed), InMemoryLeaseStore(), processor_name="p")
    assert plain.get_estimates() == []


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_push_estimator_hands_every_leases_estimate_each_interval(flavour: Flavour) -> None:
    feed, documents = InMemoryFeed(partitions=2), InMemoryDocuments()
    seen = Seen()
    write(feed, "early", 6)
    run(flavour, feed, documents, lambda: len(seen.ids) == 6, handler=seen, start_from="beginning")
    write(feed, "late", 5)
    pushed: list[list[ChangeFeedProcessorState]] = []
    if flavour == "sync":
        estimator = ChangeFeedEstimator(
            InMemoryFeedSource(feed),
            InMemoryLeaseStore(documents=documents),
            processor_name="p",
            on_estimate=pushed.append,
            estimation_interval=0.01,
        )
        with estimator:
            wait(lambda: len(pushed) >= 3)
        count = len(pushed)
        time.sleep(0.05)
        assert len(pushed) == count  # stopped
    else:

        async def main() -> None:
            enough = asyncio.Event()

            async def push(states: list[ChangeFeedProcessorState]) -> None:
                pushed.append(states)
                if len(pushed) >= 3:
                    enough.set()

            async with AsyncChangeFeedEstimator(
                AsyncInMemoryFeedSource(feed),
                AsyncInMemoryLeaseStore(documents=documents),
                processor_name="p",
                on_estimate=push,
                estimation_interval=0.01,
            ):
                await asyncio.wait_for(enough.wait(), 10)

        asyncio.run(main())
    assert all(sum(s.estimated_lag for s in states) == 5 for states in pushed)
    assert all(sorted(s.lease_token for s in states) == ["0", "1"] for states in pushed)


def test_an_estimator_without_on_estimate_cannot_be_started() -> None:
    estimator = ChangeFeedEstimator(
        InMemoryFeedSource(InMemoryFeed()), InMemoryLeaseStore(), processor_name="p"
    )
    with pytest.raises(RuntimeError, match="has no on_estimate"):
        estimator.start()


# -- a start from a saved continuation -------------------------------------------------------


def pull_model_continuation(feed: InMemoryFeed) -> str:
    """What azure-cosmos's pull model (``query_items_change_feed`` over the whole container)
    leaves as its continuation once it read everything: per range, its latest position
    (``_continuation``'s layout, which tests/test_sdk_contract.py holds to the SDK's own)."""
    entries = [
        {
            "token": f'"{feed.lsn(r.id)}"',
            "range": {
                "min": r.range.min,
                "max": r.range.max,
                "isMinInclusive": True,
                "isMaxInclusive": False,
            },
        }
        for r in feed.ranges()
    ]
    whole = {"min": "", "max": "FF", "isMinInclusive": True, "isMaxInclusive": False}
    state = {
        "v": "v2",
        "containerRid": feed.container_rid,
        "mode": "LatestVersion",
        "startFrom": {"Type": "Beginning"},
        "continuation": {
            "v": "v2",
            "rid": feed.container_rid,
            "continuation": entries,
            "Range": whole,
        },
    }
    return base64.b64encode(json.dumps(state).encode()).decode()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_processor_starts_where_a_pull_model_reader_stopped(flavour: Flavour) -> None:
    feed, documents, seen = InMemoryFeed(partitions=3), InMemoryDocuments(), Seen()
    write(feed, "read-by-the-pull-model", 9)
    saved = Continuation(pull_model_continuation(feed))
    late = write(feed, "after", 7)
    processor = run(
        flavour,
        feed,
        documents,
        lambda: sorted(seen.ids) == sorted(late),
        handler=seen,
        start_from=saved,
    )
    assert sorted(seen.ids) == sorted(late)  # nothing the pull model had read
    assert processor.start_position is saved


def test_a_continuation_is_refused_when_it_is_not_one_or_not_of_the_whole_container() -> None:
    feed = InMemoryFeed(partitions=2)
    with pytest.raises(ValueError, match="not an azure-cosmos change feed continuation"):
        Continuation('"42"')
    whole = json.loads(base64.b64decode(pull_model_continuation(feed)))
    whole["continuation"]["continuation"] = whole["continuation"]["continuation"][:1]
    with pytest.raises(ValueError, match="covers only part of the container"):
        Continuation(base64.b64encode(json.dumps(whole).encode()).decode())


def test_a_continuation_that_is_none_is_refused_saying_so() -> None:
    """What a pull-model reader at "now" over an empty container is left with: refused, and
    the message says it was None and what to start from instead."""
    with pytest.raises(ValueError, match=r"Continuation\(None\): the token is None") as refused:
        Continuation(None)  # type: ignore[arg-type]
    assert "start_from=" in str(refused.value)


def test_a_continuation_of_another_container_fails_the_start_before_any_lease() -> None:
    other, feed, documents = InMemoryFeed(), InMemoryFeed(), InMemoryDocuments()
    processor = ChangeFeedProcessor(
        InMemoryFeedSource(feed),
        InMemoryLeaseStore(documents=documents),
        processor_name="p",
        instance_name="i",
        handler=Seen(),
        start_from=Continuation(pull_model_continuation(other)),
        **FAST,
    )
    with pytest.raises(ValueError, match="the Continuation is of container"):
        processor.start()
    assert documents.list_documents("") == []


# -- the lease state, exported and restored ---------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_lease_state_exported_and_restored_elsewhere_resumes_from_its_checkpoints(
    flavour: Flavour,
) -> None:
    feed, documents, seen = InMemoryFeed(partitions=2), InMemoryDocuments(), Seen()
    write(feed, "handled", 8)
    processor = run(
        flavour, feed, documents, lambda: len(seen.ids) == 8, handler=seen, start_from="beginning"
    )
    state = export(processor)
    assert sorted(d["id"].rsplit(".", 1)[-1] for d in state) == ["0", "1", "info"]
    assert all(not key.startswith("_") for doc in state for key in doc)
    text = json.dumps(state)  # JSON as it is
    write(feed, "new", 5)
    moved, again = InMemoryDocuments(), Seen()
    fresh = make(flavour, feed, moved, again)
    assert restore(fresh, json.loads(text)) == 3
    run(flavour, feed, moved, lambda: len(again.ids) == 5, handler=again)
    assert sorted(again.ids) == [f"new{i}" for i in range(5)]  # none of the handled again


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_lease_state_is_exported_and_restored_without_a_processor(flavour: Flavour) -> None:
    """``export_leases`` / ``restore_leases`` take the two containers and the processor's name:
    a tool that moves or backs up the leases has no handler to give."""
    feed, documents, seen = InMemoryFeed(partitions=2), InMemoryDocuments(), Seen()
    write(feed, "handled", 6)
    run(flavour, feed, documents, lambda: len(seen.ids) == 6, handler=seen, start_from="beginning")
    moved = InMemoryDocuments()
    if flavour == "sync":
        state = cosmos_changefeed.export_leases(
            InMemoryFeedSource(feed), InMemoryLeaseStore(documents=documents), processor_name="p"
        )
        created = cosmos_changefeed.restore_leases(
            InMemoryFeedSource(feed),
            InMemoryLeaseStore(documents=moved),
            processor_name="p",
            state=state,
        )
    else:

        async def across() -> tuple[list[dict[str, Any]], int]:
            source = AsyncInMemoryFeedSource(feed)
            exported = await cosmos_changefeed.aio.export_leases(
                source, AsyncInMemoryLeaseStore(documents=documents), processor_name="p"
            )
            count = await cosmos_changefeed.aio.restore_leases(
                source, AsyncInMemoryLeaseStore(documents=moved), processor_name="p", state=exported
            )
            return exported, count

        state, created = asyncio.run(across())
    assert sorted(d["id"].rsplit(".", 1)[-1] for d in state) == ["0", "1", "info"]
    assert created == 3
    again = Seen()
    write(feed, "new", 3)
    run(flavour, feed, moved, lambda: len(again.ids) == 3, handler=again)
    assert sorted(again.ids) == ["new0", "new1", "new2"]  # none of the handled again


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_leases_written_by_1_0_on_an_ipv6_endpoint_go_on_under_dotnets_prefix(
    flavour: Flavour,
) -> None:
    """1.0 wrote an IPv6 literal's host without .NET's brackets: the first start of a later
    version adopts those leases (their checkpoints, under .NET's prefix) and leaves them."""
    endpoint = "https://[::ffff:127.0.0.1]:8081/"
    feed, seen = InMemoryFeed(partitions=2, account_endpoint=endpoint), Seen()
    documents = InMemoryDocuments()
    write(feed, "handled", 6)
    run(flavour, feed, documents, lambda: len(seen.ids) == 6, handler=seen, start_from="beginning")
    new = lease_prefix("p", endpoint, feed.container_rid)
    old = legacy_prefix("p", endpoint, feed.container_rid)
    assert old is not None and "[" not in old and new.startswith("p[::ffff:127.0.0.1]_")
    left_by_1_0 = InMemoryDocuments()  # the same documents, under 1.0's spelling
    left_by_1_0.restore([doc | {"id": doc["id"].replace(new, old)} for doc in documents.export()])
    write(feed, "new", 3)
    again = Seen()
    run(
        flavour,
        feed,
        left_by_1_0,
        lambda: len(again.ids) == 3,
        handler=again,
        start_from="beginning",
    )
    assert sorted(again.ids) == ["new0", "new1", "new2"]  # none of the handled again
    ids = {doc["id"] for doc in left_by_1_0.list_documents("")}
    assert {f"{new}..0", f"{new}..1", f"{new}.info", f"{old}..0", f"{old}..1"} <= ids


def test_a_restore_is_refused_into_a_store_in_use_or_from_another_container() -> None:
    feed, documents, seen = InMemoryFeed(), InMemoryDocuments(), Seen()
    write(feed, "x", 2)
    processor = run("sync", feed, documents, lambda: len(seen.ids) == 2, handler=seen)
    assert isinstance(processor, ChangeFeedProcessor)
    state = processor.export_leases()
    with pytest.raises(ValueError, match="already holds 2 document"):
        processor.restore_leases(state)
    other = make("sync", InMemoryFeed(), InMemoryDocuments(), seen)
    with pytest.raises(ValueError, match="not this processor's on this container"):
        restore(other, state)
    with processor, pytest.raises(RuntimeError, match="is running; stop it first"):
        processor.restore_leases(state)


def test_an_in_memory_lease_store_kept_in_a_file_restarts_at_its_last_checkpoint(
    tmp_path: Path,
) -> None:
    """Kept at every change, not only at a stop: nothing the first process does after its
    last checkpoint reaches the file (its release included), as after a kill; the next one,
    on the same file, goes on from the checkpoints."""
    path, feed, seen = tmp_path / "leases.json", InMemoryFeed(partitions=2), Seen()
    write(feed, "first", 6)
    store = InMemoryLeaseStore(state_file=path)
    killed = ChangeFeedProcessor(
        InMemoryFeedSource(feed),
        store,
        processor_name="p",
        instance_name="same-host",
        handler=seen,
        start_from="beginning",
        **FAST,
    )
    with killed:
        wait(lambda: len(seen.ids) == 6)
        wait(
            lambda: all(lease.continuation for lease in leases(InMemoryDocuments(state_file=path)))
        )
        store.documents.state_file = None  # killed: from now on nothing reaches the file
    assert all(lease.owner == "same-host" for lease in leases(InMemoryDocuments(state_file=path)))
    write(feed, "second", 4)
    later = Seen()
    restarted = InMemoryDocuments(state_file=path)
    run(
        "sync",
        feed,
        restarted,
        lambda: len(later.ids) == 4,
        handler=later,
        instance_name="same-host",
    )
    assert sorted(later.ids) == [f"second{i}" for i in range(4)]
    assert json.loads(path.read_text())  # still kept


# -- helpers ------------------------------------------------------------------------------------


def make(flavour: Flavour, feed: InMemoryFeed, documents: InMemoryDocuments, seen: Seen) -> Any:
    if flavour == "sync":
        return ChangeFeedProcessor(
            InMemoryFeedSource(feed),
            InMemoryLeaseStore(documents=documents),
            processor_name="p",
            instance_name="i",
            handler=seen,
        )
    return AsyncChangeFeedProcessor(
        AsyncInMemoryFeedSource(feed),
        AsyncInMemoryLeaseStore(documents=documents),
        processor_name="p",
        instance_name="i",
        handler=wrapped(seen),
    )


def export(processor: Any) -> list[dict[str, Any]]:
    if isinstance(processor, ChangeFeedProcessor):
        return processor.export_leases()
    return list(asyncio.run(processor.export_leases()))


def restore(processor: Any, state: list[dict[str, Any]]) -> int:
    if isinstance(processor, ChangeFeedProcessor):
        return processor.restore_leases(state)
    return int(asyncio.run(processor.restore_leases(state)))
