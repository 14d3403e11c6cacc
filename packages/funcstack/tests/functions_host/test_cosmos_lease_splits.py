"""The Cosmos DB trigger on two instances while the monitored container's physical partition
splits, as the change feed processor handles it (``PartitionSynchronizerCore.
HandlePartitionGoneAsync``): the parent's lease is replaced by a child lease per new partition,
each starting where the parent was; the instances share the children; every document is
delivered, in order per partition key, a batch at most again per takeover (at least once).

A split is asked of the local endpoint (``funcstack split``); the sample app's intervals are
short (acquire 1 s, renew 1 s, expiry 10 s). Each test takes 10-25 s.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from funcstack.deadlines import SHORT

from .test_cosmos_leases import Scaled, scaled
from .test_cosmos_trigger import Cosmos, assert_in_order_per_pk, cosmos, wait_for

pytestmark = pytest.mark.integration
__all__ = ["cosmos", "scaled"]  # the module's endpoint and the app's stack (fixtures)

KEYS = [f"k{i:02d}" for i in range(16)]
#: The line of an instance that finds a lease it processes lost, but for one a split deleted.
STOLEN_LEASE_LOST = re.compile(r" lost \(lease [^:]*: (?!no longer exists)")
MAX_ITEMS = 5  # the sample's max_items_per_invocation: what one takeover may deliver again


class Writer:
    """Writes a document per key in turn (``<key>-<seq>``), seq rising, from a thread of its
    own with a client of its own, until stopped."""

    def __init__(self, cosmos: Cosmos, database: str) -> None:
        self._client = cosmos.client()
        self._container = self._client.get_database_client(database).get_container_client(
            "contacts"
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.written: list[str] = []

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            for key in KEYS:
                doc_id = f"{key}-{seq:04d}"
                self._container.create_item({"id": doc_id, "partitionKey": key, "seq": seq})
                self.written.append(doc_id)
                time.sleep(0.01)
            seq += 1

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(timeout=SHORT)  # its last write answered
        self._client.close()
        return list(self.written)


@contextmanager
def writing(cosmos: Cosmos, database: str) -> Iterator[Writer]:
    writer = Writer(cosmos, database).start()
    try:
        yield writer
    finally:
        writer.stop()


def child_tokens(scaled: Scaled) -> list[str]:
    """The lease tokens the container's partitions give: their range ids (version-0 leases,
    as the .NET processor writes a split's children), sorted."""
    return sorted(p.id for p in scaled.physical_partitions())


def takeovers(scaled: Scaled) -> int:
    """Leases taken from another instance (stolen, or expired) so far, in every log."""
    return sum(
        log.count("stolen from") + log.count("expired, was") for log in scaled.logs().values()
    )


def settled(scaled: Scaled) -> bool:
    """Every lease stolen so far has been given up by the instance it was stolen from (until
    then both may read it: at least once). Counted apart from ``Scaled.settled``: a lease
    deleted by a split is lost too ("no longer exists")."""
    logs = scaled.logs().values()
    return sum(log.count("stolen from") for log in logs) == sum(
        len(STOLEN_LEASE_LOST.findall(log)) for log in logs
    )


def sole_owner(scaled: Scaled) -> str:
    """The instance owning the one lease, once one does."""
    wait_for(
        lambda: sum(scaled.owners().values()) == 1 and "-" not in scaled.owners(), "the lease owned"
    )
    [owner] = scaled.owners()
    return owner


def assert_every_document_once_but_for_takeovers(scaled: Scaled, written: list[str]) -> None:
    delivered = scaled.delivered_ids()
    assert set(delivered) == set(written)  # nothing lost
    again = len(delivered) - len(set(delivered))
    assert again <= MAX_ITEMS * takeovers(scaled), (
        f"{again} deliveries again with {takeovers(scaled)} takeover(s): a lease read again "
        "from further back than its last checkpoint"
    )
    assert_in_order_per_pk(delivered)


def test_a_live_split_replaces_the_lease_by_children_the_instances_share(
    scaled: Scaled,
) -> None:
    """One physical partition, so one lease, owned by one of two instances; documents are
    written all along; the partition splits. The owner's next read meets the split: the lease
    is replaced by two children starting where it was, the owner takes both and the other
    instance is handed one (its fair share). Every document is delivered, in order per key."""
    app = scaled.host(2)
    owner = sole_owner(scaled)
    database = scaled.settings["COSMOS_DATABASE"]
    with writing(scaled.cosmos, database) as writer:
        wait_for(lambda: len(set(scaled.delivered_ids())) >= 40, "deliveries before the split")
        assert scaled.split()
        before = len(writer.written)
        wait_for(lambda: len(writer.written) >= before + 64, "writes after the split")
    written = writer.written
    children = child_tokens(scaled)
    assert len(children) == 2
    wait_for(lambda: set(scaled.delivered_ids()) >= set(written), "every document")
    wait_for(
        lambda: (
            sorted(lease["LeaseToken"] for lease in scaled.leases()) == children
            and sorted(scaled.owners().values()) == [1, 1]
            and settled(scaled)
        ),
        "a child lease on each instance",
    )
    last = [f"{key}-9999" for key in KEYS]  # after all the writer wrote
    for doc_id in last:
        scaled.container.create_item({"id": doc_id, "partitionKey": doc_id.split("-")[0]})
    wait_for(lambda: set(scaled.delivered_ids()) >= set(last), "the last documents")
    # each child's documents from its own instance
    assert {instance for instance, doc in scaled.delivered() if doc in last} == {"app-1", "app-2"}
    log = app.instance(owner).log_path.read_text()
    assert f"lease 0 split into {', '.join(children)}" in log
    assert "starts where the lease was (its continuation)" in log
    assert_every_document_once_but_for_takeovers(scaled, [*written, *last])
    assert not any("restarting this feed_range query" in log for log in scaled.logs().values())


def test_a_split_while_the_owner_is_paused_is_made_by_the_instance_that_takes_the_lease(
    scaled: Scaled,
) -> None:
    """The lease's owner is paused (SIGSTOP) and the partition splits meanwhile: the other
    instance takes the expired lease, meets the split, and replaces the lease by its
    children. Resumed, the paused instance finds its lease gone (it splits nothing) and
    is handed one child. Every document is delivered, in order per key."""
    app = scaled.host(2)
    paused = sole_owner(scaled)
    other = ({"app-1", "app-2"} - {paused}).pop()
    database = scaled.settings["COSMOS_DATABASE"]
    with writing(scaled.cosmos, database) as writer:
        wait_for(lambda: len(set(scaled.delivered_ids())) >= 20, "deliveries")
        app.pause(paused)
        try:
            assert scaled.split()
            before = len(writer.written)
            wait_for(lambda: len(writer.written) >= before + 32, "writes after the split")
            log = app.instance(other).log_path
            wait_for(
                lambda: "lease 0 split into" in log.read_text(),
                f"{other} splits the lease it took",
            )
        finally:
            app.resume(paused)
    written = writer.written
    children = child_tokens(scaled)
    wait_for(lambda: set(scaled.delivered_ids()) >= set(written), "every document")
    wait_for(
        lambda: (
            sorted(lease["LeaseToken"] for lease in scaled.leases()) == children
            and scaled.owners() == Counter({"app-1": 1, "app-2": 1})
            and settled(scaled)
        ),
        "a child lease on each instance",
    )
    logs = scaled.logs()
    assert f"expired, was {paused}:" in logs[other]
    assert "split into" not in logs[paused]
    wait_for(
        lambda: "lease 0 lost" in app.instance(paused).log_path.read_text(),
        f"{paused} finds its lease gone",
    )
    assert_every_document_once_but_for_takeovers(scaled, written)
