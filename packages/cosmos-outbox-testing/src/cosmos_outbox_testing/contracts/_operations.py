"""The bulk operations' store suite (`cosmos_outbox.operations`' operations, kept in the outbox's
container by its `OperationStore` over the store's single writes and queries): an operation
reads back as it was written, every field; a write made from an old read is refused (two hosts
taking one operation: one wins); the open ones are found by one query in their partition, the
newest listed first; a finished one expires. The operations of other tests may share the
partition: each test looks at its own."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from cosmos_outbox.documents import (
    OPERATION_TYPE,
    OPERATIONS_PARTITION,
    OperationStore,
    operation_document,
    operation_record,
)
from cosmos_outbox.errors import NotFoundError, PreconditionFailedError
from cosmos_outbox_testing.contracts._worlds import StoreWorld, Suite

__all__ = ["OperationStoreContract"]

AT = "2026-11-24T21:47:02.123456+00:00"


def _operation(**changes: Any) -> Any:
    """An operation of one test's own, every field set (its stored form, read back)."""
    document = {
        "id": str(uuid.uuid4()),
        "partitionKey": OPERATIONS_PARTITION,
        "type": OPERATION_TYPE,
        "kind": "groups.retry",
        "state": "canary",
        "selector": {
            "group": "3f2a9c1b0d4e",
            "source": "dead letters",
            "entity": "all-events",
            "cause": "HandlerRefused: the subscriber refused it",
            "aggregateType": "contact",
            "action": "ContactDescriptionUpdatedEvent",
        },
        "canary": 5,
        "canaryWaitSeconds": 120.0,
        "counts": {"items": 2000, "done": 5, "failed": 0, "skipped": 1, "sent": 5},
        "itemsKnown": True,
        "limit": "8123",
        "cursor": "6130",
        "batch": ["6131", "6133"],
        "batchSince": 1767225590.5,
        "canaryItems": [
            {
                "key": "6126",
                "messageId": "m-1",
                "eventId": "e-1",
                "aggregateType": "contact",
                "aggregateId": "c-1",
                "version": 7,
            },
            {"key": "6127"},
        ],
        "canarySentAt": AT,
        "watermarks": {"all-events": 8130},
        "note": "the canary succeeded",
        "failures": ["#6129: the send was refused"],
        "who": {"kind": "signed-in operator", "name": "ada", "id": "oid-ada"},
        "reason": "the handler is fixed",
        "createdAt": AT,
        "updatedAt": AT,
        "owner": "host-1/42/abcdef",
        "leaseUntil": 1767225650.25,
        "audited": False,
        "subscribersWillSee": "5 message(s) at subscription all-events only",
    }
    return dataclasses.replace(operation_record(document), **changes)


def _ignoring_time(record: Any) -> Any:
    return dataclasses.replace(record, updated_at="", etag=None)


class OperationStoreContract(Suite[StoreWorld]):
    """The operations' store (see the module), over a world's store."""

    def _store(self, world: StoreWorld) -> OperationStore:
        return OperationStore(world.async_store)

    def test_an_operation_reads_back_as_it_was_written(self, world: StoreWorld) -> None:
        store = self._store(world)
        written = _operation()
        created = world.run(store.create(written))
        assert created.etag
        read = world.run(store.get(written.id))
        assert _ignoring_time(read) == _ignoring_time(written)
        assert read.canary_items[1].message_id is None and read.counts.skipped == 1
        assert operation_document(read)["selector"]["entity"] == "all-events"
        assert read.etag == created.etag
        with pytest.raises(NotFoundError):
            world.run(store.get(str(uuid.uuid4())))

    def test_a_write_made_from_an_old_read_is_refused(self, world: StoreWorld) -> None:
        """Two hosts read the operation and each write itself its owner: one wins."""
        store = self._store(world)
        created = world.run(store.create(_operation(owner=None)))
        first = world.run(store.write(dataclasses.replace(created, owner="a")))
        assert first.owner == "a" and first.etag != created.etag
        with pytest.raises(PreconditionFailedError):
            world.run(store.write(dataclasses.replace(created, owner="b")))
        assert world.run(store.get(created.id)).owner == "a"
        changed = world.run(store.change(created.id, lambda r: dataclasses.replace(r, note="n")))
        assert (changed.owner, changed.note) == ("a", "n")

    def test_the_open_operations_are_found_by_one_query_and_listed_newest_first(
        self, world: StoreWorld
    ) -> None:
        store = self._store(world)
        older = _operation(created_at="2026-11-24T21:00:00+00:00", state="running", batch=())
        paused = _operation(created_at="2026-11-24T21:10:00+00:00", state="paused", batch=())
        newer = _operation(
            created_at="2026-11-24T21:20:00+00:00", state="done", batch=(), audited=True
        )
        closing = _operation(created_at="2026-11-24T21:30:00+00:00", state="done", batch=())
        for record in (older, paused, newer, closing):
            world.run(store.create(record))
        mine = {r.id for r in (older, paused, newer, closing)}
        active = [r.id for r in world.run(store.active()) if r.id in mine]
        assert active == [older.id, closing.id]  # oldest first: running, done not yet audited
        recent = [r.id for r in world.run(store.recent(limit=50)) if r.id in mine]
        assert recent == [closing.id, newer.id, paused.id, older.id]

    def test_a_finished_operation_expires(self, world: StoreWorld) -> None:
        store = self._store(world)
        record = world.run(store.create(_operation(state="done", batch=(), audited=True)))
        [document] = [d for d in world.documents(OPERATIONS_PARTITION) if d["id"] == record.id]
        assert document["ttl"] > 0 and document["active"] is False
        open_one = world.run(store.create(_operation()))
        [document] = [d for d in world.documents(OPERATIONS_PARTITION) if d["id"] == open_one.id]
        assert document["ttl"] == -1 and document["active"] is True
        world.expire(OPERATIONS_PARTITION, record.id)
        with pytest.raises(NotFoundError):
            world.run(store.get(record.id))
