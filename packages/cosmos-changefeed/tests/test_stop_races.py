"""A stop that meets a lease being acquired: a split's child acquired while the processor stops
is released at once, not registered after ``stop`` has listed its workers. (Its worker used to be
registered first and its thread started after, outside the lock ``stop`` lists the workers
under: a stop in between met a thread not yet started, "cannot join thread before it is
started", 1 run in 12 of test_processing's split test; now both happen under that lock.)"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from deadlines import LOOPBACK, wait_for
from inprocess import FAST, Delivered, write

from cosmos_changefeed import ChangeFeedProcessor, InMemoryDocuments, InMemoryLeaseStore
from cosmos_changefeed.testing import InMemoryFeed, InMemoryFeedSource


class _GatedDocuments(InMemoryDocuments):
    """Lease documents whose first write taking a child lease (any lease but ``0``) for an
    owner waits at a gate, once the gate is armed."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.passed = threading.Event()

    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        if (
            self.armed
            and document.get("LeaseToken") not in (None, "0")
            and document.get("Owner")
            and not self.entered.is_set()
        ):
            self.entered.set()
            assert self.gate.wait(LOOPBACK), "the test never opened the gate"
            try:
                return super().replace(document, partition_key, etag)
            finally:
                self.passed.set()
        return super().replace(document, partition_key, etag)


def test_a_childs_lease_acquired_as_the_processor_stops_is_released_not_run_unseen() -> None:
    """The threads looked at are this processor's: a lease's thread is named ``lease-<token>``
    whatever its processor, and another test's processor (one whose handler a failure left
    waiting) may still have one in this process -- it says nothing of this stop."""
    feed, delivered, documents = InMemoryFeed(1), Delivered(), _GatedDocuments()
    others = set(threading.enumerate())
    processor = ChangeFeedProcessor(
        InMemoryFeedSource(feed),
        InMemoryLeaseStore(documents=documents),
        handler=delivered,
        processor_name="p",
        instance_name="only",
        **FAST,  # type: ignore[arg-type]
    )
    processor.start()
    processor.wait_until_listening(LOOPBACK)
    documents.armed = True
    feed.split("0")
    write(feed, keys=4, per_key=1)
    assert documents.entered.wait(LOOPBACK), "no child lease was acquired after the split"
    processor.stop(timeout=2)  # the parent's thread is inside the child's acquisition
    documents.gate.set()
    assert documents.passed.wait(LOOPBACK), "the child's acquisition did not go on"

    def released() -> bool:
        leases = [d for d in documents.export() if "LeaseToken" in d]
        return bool(leases) and all(not d.get("Owner") for d in leases)

    wait_for(released, "every lease released, the child acquired as it stopped too", LOOPBACK)

    def running() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("lease-") and t not in others]

    wait_for(lambda: not running(), "no lease's thread of this processor left running", LOOPBACK)


class _AddedAgainWhileAcquiring(ChangeFeedProcessor):
    """A processor whose first acquisition, once made and before its worker is registered, meets
    a second add of the same lease from another thread (the acquire loop beside a split's child
    added from a lease's thread): what that add answered."""

    again: list[object]

    def _acquired(self, lease: Any, acquired: Any, manager: Any, start: Any) -> None:
        super()._acquired(lease, acquired, manager, start)
        if getattr(self, "again", None) is None:
            self.again = []

            def add() -> None:
                try:
                    self.again.append(self._add(lease))
                except Exception as exc:  # a second acquisition refused: not a second worker
                    self.again.append(exc)

            other = threading.Thread(target=add)
            other.start()
            other.join(LOOPBACK)


def test_a_lease_added_twice_at_once_gets_one_worker() -> None:
    """A second add of a lease between its acquisition and its worker's registration adds
    nothing: two workers on one lease read its range twice (a fresh clone's make test gave a
    split's children's changes twice, 2 runs in 5 under load)."""
    feed, delivered = InMemoryFeed(1), Delivered()
    processor = _AddedAgainWhileAcquiring(
        InMemoryFeedSource(feed),
        InMemoryLeaseStore(documents=InMemoryDocuments()),
        handler=delivered,
        processor_name="p",
        instance_name="only",
        **FAST,  # type: ignore[arg-type]
    )
    processor.start()
    try:
        processor.wait_until_listening(LOOPBACK)
        wait_for(lambda: getattr(processor, "again", None), "the second add's answer", LOOPBACK)
        assert processor.again == [False], f"the lease was added again: {processor.again}"
    finally:
        processor.stop(timeout=LOOPBACK)
