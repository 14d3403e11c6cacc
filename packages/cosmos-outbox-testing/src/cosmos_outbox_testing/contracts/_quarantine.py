"""The quarantine's suite, over a store: put, get, list, replays, discard; and the stored events
a re-drive reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cosmos_outbox.documents import (
    QUARANTINE_TYPE,
    event_documents,
    outbox_record,
    quarantine_id,
    unreadable,
)
from cosmos_outbox.errors import NotFoundError
from cosmos_outbox.relay import OutboxRecord, Unreadable
from cosmos_outbox_testing.contracts._worlds import AggregateExample, AggregateSuite, StoreWorld


def _stored(
    example: AggregateExample, *, changed: bool = False, created: datetime | None = None
) -> list[dict[str, Any]]:
    """The event documents of a new aggregate, changed once if `changed` (creation time
    overridden when `created` is given)."""
    aggregate = example.new()
    if changed:
        example.change(aggregate)
    docs = event_documents(aggregate, ttl_seconds=600)
    if created is not None:
        for doc in docs:
            doc["createdAt"] = created.isoformat()
    return docs


def _quarantined(world: StoreWorld, doc: dict[str, Any], reason: str = "too large") -> Any:
    """`doc`'s event put in the quarantine for `reason`: its entry, read back."""
    world.quarantine.put(outbox_record(doc), reason=reason)
    return world.quarantine.get(doc["id"])


class QuarantineContract(AggregateSuite):
    """The quarantine (put, get, list, replays, discard) and the stored events a re-drive
    reads."""

    def test_a_put_event_reads_back_with_its_reason_once(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        doc = _stored(example, changed=True)[1]
        world.quarantine.put(outbox_record(doc), reason="too large")
        entry = _quarantined(world, doc)  # put twice: one record
        assert (entry.event_id, entry.aggregate_id, entry.action, entry.version) == (
            doc["id"],
            doc["partitionKey"],
            example.actions[1],
            2,
        )
        assert entry.aggregate_type == example.type().aggregate_type
        assert (entry.reason, entry.replays, entry.resolved) == ("too large", 0, False)
        assert entry.quarantined_at is not None
        assert isinstance(entry.event, OutboxRecord)
        assert entry.event.body == outbox_record(doc).body
        assert world.quarantine.count() == 1

    def test_an_unreadable_event_keeps_what_can_be_read(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        doc = _stored(example)[0]
        doc.pop("action")
        world.quarantine.put(unreadable(doc, "no action"), reason="no action")
        entry = world.quarantine.get(doc["id"])
        assert isinstance(entry.event, Unreadable)
        assert (entry.aggregate_id, entry.version, entry.action) == (doc["partitionKey"], 1, None)

    def test_an_unknown_event_is_not_found(self, world: StoreWorld) -> None:
        with pytest.raises(NotFoundError):
            world.quarantine.get("no-such-event")

    def test_pages_list_every_record_once(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        ids = set()
        for _ in range(5):
            doc = _stored(example)[0]
            ids.add(doc["id"])
            world.quarantine.put(outbox_record(doc), reason="r")
        seen: list[str] = []
        token = None
        for _ in range(10):
            page = world.quarantine.list_page(page_size=2, continuation=token)
            assert len(page.items) <= 2
            seen += [e.event_id for e in page.items]
            token = page.continuation_token
            if token is None:
                break
        assert sorted(seen) == sorted(ids)

    def test_a_replay_resolves_or_keeps_the_record_and_counts(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        first, second = _stored(example)[0], _stored(example)[0]
        entry = _quarantined(world, second)
        failed = world.quarantine.replayed(
            _quarantined(world, first), resolved=False, reason="still too large", ttl_seconds=60
        )
        assert (failed.reason, failed.replays, failed.resolved) == ("still too large", 1, False)
        done = world.quarantine.replayed(entry, resolved=True, reason="", ttl_seconds=60)
        assert (done.replays, done.resolved) == (1, True)
        assert done.quarantined_at == entry.quarantined_at
        assert world.quarantine.get(second["id"]).resolved
        assert world.quarantine.count() == 1

    def test_set_aside_again_it_keeps_its_history_and_is_quarantined_again(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        doc = _stored(example)[0]
        first = _quarantined(world, doc)
        world.quarantine.replayed(first, resolved=True, reason="", ttl_seconds=60)
        again = _quarantined(world, doc, "too large again")  # still failing
        assert (again.reason, again.replays, again.resolved) == ("too large again", 1, False)
        assert again.quarantined_at == first.quarantined_at
        assert world.quarantine.count() == 1

    def test_the_count_is_of_the_records_neither_resolved_nor_discarded_with_or_without_a_status(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        """A record written before the operators' API has no status: it counts as quarantined;
        a resolved or a discarded one does not."""
        for doc, status in (
            (_stored(example)[0], None),
            (_stored(example)[0], "resolved"),
            (_stored(example)[0], "discarded"),
        ):
            record = {
                "id": quarantine_id(doc["id"]),
                "partitionKey": doc["partitionKey"],
                "type": QUARANTINE_TYPE,
                "reason": "set aside before the operators' API",
                "data": doc,
            }
            world.plant(record if status is None else {**record, "status": status})
        assert world.quarantine.count() == 1

    def test_a_discarded_record_is_kept_as_discarded_and_no_longer_counted(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        doc = _stored(example)[0]
        entry = _quarantined(world, doc)
        assert world.quarantine.count() == 1
        gone = world.quarantine.discard(
            entry, by="admin key", reason="typed by hand", ttl_seconds=60
        )
        assert (gone.status, gone.discarded_by, gone.discard_reason) == (
            "discarded",
            "admin key",
            "typed by hand",
        )
        assert world.quarantine.get(doc["id"]).discarded
        assert world.quarantine.count() == 0
        world.expire(entry.aggregate_id, f"quarantine-{doc['id']}")
        with pytest.raises(NotFoundError):
            world.quarantine.get(doc["id"])
        with pytest.raises(NotFoundError):
            world.quarantine.discard(entry, by="admin key", reason="again", ttl_seconds=60)

    def test_events_since_selects_by_creation_time_and_aggregate(
        self, world: StoreWorld, example: AggregateExample
    ) -> None:
        t = datetime.now(UTC) - timedelta(minutes=10)
        old = _stored(example, changed=True, created=t - timedelta(seconds=1))
        at_t = _stored(example, changed=True, created=t)
        new = _stored(example, changed=True)
        for doc in old + at_t + new:
            world.plant(doc)
        found = {e.event_id for e in world.events_since(t)}
        assert {d["id"] for d in at_t + new} <= found
        assert not {d["id"] for d in old} & found
        one = world.events_since(t, aggregate_id=new[0]["partitionKey"])
        assert sorted(e.event_id for e in one) == sorted(d["id"] for d in new)
        typed = world.events_since(t, aggregate_type=example.type().aggregate_type)
        assert {d["id"] for d in at_t + new} <= {e.event_id for e in typed}
        assert world.events_since(t, aggregate_type="noSuchType") == []
