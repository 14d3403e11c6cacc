"""A partition key's order past a change set aside (``still_set_aside``, ``_order``), on the sync
and the aio processor in-process: the poison's later changes of its key wait behind it in the
set-aside store (``FailedBatch.behind``), in order, batch after batch and across a change of
owner (the keys held are kept in the lease), while the other keys flow; once the application
has replayed it (and them), its key's next change is handled -- in order after the replay. The
default (no ``still_set_aside``) handles the later changes while the poison waits."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from running import FLAVOURS, Flavour, leases, run

from cosmos_changefeed import (
    FailedBatch,
    HeldBehindError,
    InMemoryDocuments,
    LeaseContext,
    SetAsideChange,
)
from cosmos_changefeed._order import HELD
from cosmos_changefeed.testing import InMemoryFeed


class Store:
    """The application's set-aside store: each change set aside under the change it waits
    behind (or itself), kept until the test replays them."""

    def __init__(self) -> None:
        self.parked: list[FailedBatch] = []
        self.asked: list[SetAsideChange] = []
        self._lock = threading.Lock()

    def park(self, batch: FailedBatch) -> None:
        with self._lock:
            self.parked.append(batch)

    def still_set_aside(self, change: SetAsideChange) -> bool:
        with self._lock:
            self.asked.append(change)
            return any(_first(b) == (change.id, change.lsn) for b in self.parked)

    def ids(self) -> list[str]:
        with self._lock:
            return [str(b.changes[0]["id"]) for b in self.parked]

    def replay(self, handle: Any) -> None:
        """Hand every change parked to ``handle``, in the order parked; then forget them."""
        with self._lock:
            parked, self.parked = self.parked, []
        for batch in parked:
            handle(batch.context, batch.changes)


def _first(batch: FailedBatch) -> tuple[str | None, int | None]:
    if batch.behind is not None:
        return batch.behind.id, batch.behind.lsn
    change = batch.changes[0]
    return str(change["id"]), int(change["_lsn"])


class Handler:
    def __init__(self) -> None:
        self.handled: list[str] = []
        self.healed = False
        self._lock = threading.Lock()

    def __call__(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        if not self.healed and any(c["id"] == "k1" for c in changes):
            raise ValueError("k1 cannot be handled yet")
        with self._lock:
            self.handled.extend(str(c["id"]) for c in changes)

    def of(self, key: str) -> list[str]:
        return [item for item in self.handled if item.startswith(key)]


def write(feed: InMemoryFeed, *ids: str) -> None:
    for item in ids:
        feed.upsert({"id": item, "pk": item[0]})


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_poisons_later_changes_of_its_key_wait_behind_it_and_follow_its_replay_in_order(
    flavour: Flavour,
) -> None:
    feed, documents, handler, store = InMemoryFeed(1), InMemoryDocuments(), Handler(), Store()
    write(feed, "k0", "j0", "k1", "j1", "k2", "k3", "j2")
    options: dict[str, Any] = {
        "handler": handler,
        "set_aside": store.park,
        "still_set_aside": store.still_set_aside,
        "set_aside_after": 2,
        "start_from": "beginning",
    }
    run(flavour, feed, documents, lambda: store.ids() == ["k1", "k2", "k3"], **options)
    assert handler.of("j") == ["j0", "j1", "j2"] and handler.of("k") == ["k0"]
    [k1, k2, k3] = store.parked
    assert k1.behind is None and isinstance(k1.error, ValueError)
    assert k2.behind == k3.behind == SetAsideChange("0", "k", "k1", k1.changes[0]["_lsn"])
    assert isinstance(k2.error, HeldBehindError) and k2.error.behind == k2.behind
    [lease] = leases(documents)
    assert '"k1"' in lease.properties[HELD]  # held in the lease, for whoever owns it next
    # a later batch, read by another instance: k4 waits behind k1 too, j3 is handled
    write(feed, "k4", "j3")
    run(flavour, feed, documents, lambda: "k4" in store.ids(), instance_name="heir", **options)
    assert handler.of("j") == ["j0", "j1", "j2", "j3"] and handler.of("k") == ["k0"]
    assert store.asked and all(c.id == "k1" for c in store.asked)
    # the application replays them, in order, and k5 comes after them
    handler.healed = True
    store.replay(handler)
    write(feed, "k5")
    run(flavour, feed, documents, lambda: "k5" in handler.handled, **options)
    assert handler.of("k") == ["k0", "k1", "k2", "k3", "k4", "k5"]
    run(flavour, feed, documents, lambda: HELD not in leases(documents)[0].properties, **options)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_by_default_a_keys_later_changes_are_handled_while_its_poison_is_set_aside(
    flavour: Flavour,
) -> None:
    feed, documents, handler, store = InMemoryFeed(1), InMemoryDocuments(), Handler(), Store()
    write(feed, "k0", "j0", "k1", "j1", "k2")
    run(
        flavour,
        feed,
        documents,
        lambda: store.ids() == ["k1"] and "k2" in handler.handled,
        handler=handler,
        set_aside=store.park,
        set_aside_after=2,
        start_from="beginning",
    )
    assert handler.of("k") == ["k0", "k2"]  # k2 before k1's replay: the key's order broken
    assert store.parked[0].behind is None
    assert HELD not in leases(documents)[0].properties


def test_still_set_aside_without_set_aside_is_refused() -> None:
    from cosmos_changefeed import ChangeFeedProcessor, InMemoryLeaseStore
    from cosmos_changefeed.testing import InMemoryFeedSource

    with pytest.raises(ValueError, match="still_set_aside is given without set_aside"):
        ChangeFeedProcessor(
            InMemoryFeedSource(),
            InMemoryLeaseStore(),
            processor_name="p",
            instance_name="i",
            handler=lambda context, changes: None,
            still_set_aside=lambda change: True,
        )


def test_a_changes_key_is_read_at_the_containers_paths_in_either_mode() -> None:
    from cosmos_changefeed._order import identity, key_of

    doc = {"id": "a", "_lsn": 7, "tenant": {"id": "t1"}, "user": "u1"}
    assert key_of(doc, ["/tenant/id"]) == '"t1"'
    assert key_of(doc, ["/tenant/id", "/user"]) == '["t1", "u1"]'  # a hierarchical key
    assert key_of({"id": "b"}, ["/pk"]) == "{}"  # no value: Cosmos DB's undefined key
    current = {"current": doc, "metadata": {"operationType": "replace", "lsn": 7}}
    deleted = {
        "metadata": {"operationType": "delete", "lsn": 9, "id": "a", "partitionKey": {"user": "u1"}}
    }
    assert key_of(current, ["/user"]) == key_of(deleted, ["/user"]) == '"u1"'
    assert identity(doc) == identity(current) == ("a", 7)
    assert identity(deleted) == ("a", 9)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_outage_that_ends_while_a_batch_is_taken_apart_keeps_nothing_behind(
    flavour: Flavour,
) -> None:
    """The handler fails on its first four calls (an outage): k0 and j0 fail alone (k1 held
    behind k0) before it works again on the second half. Given once more alone, they are
    handled, k1 after k0, and nothing is set aside or held."""
    feed, documents, store = InMemoryFeed(1), InMemoryDocuments(), Store()
    write(feed, "k0", "k1", "j0", "a0", "b0", "c0")  # keys k, k, j, a, b, c
    handled: list[str] = []
    calls = itertools.count(1)

    def handle(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        if next(calls) < 5:
            raise ConnectionError("down")
        handled.extend(str(c["id"]) for c in changes)

    options: dict[str, Any] = {
        "handler": handle,
        "set_aside": store.park,
        "still_set_aside": store.still_set_aside,
        "set_aside_after": 1,
        "start_from": "beginning",
    }
    run(flavour, feed, documents, lambda: len(set(handled)) == 6, **options)
    assert store.parked == [] and sorted(handled) == ["a0", "b0", "c0", "j0", "k0", "k1"]
    assert [item for item in handled if item.startswith("k")] == ["k0", "k1"]
    assert HELD not in leases(documents)[0].properties
