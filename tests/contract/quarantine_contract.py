"""The quarantine and event-store contract, written once: run on the in-memory fakes
(tests/contract/test_in_memory.py) and on the Cosmos adapters through the real SDK
(tests/integration/test_cosmos_quarantine.py)."""

from __future__ import annotations

import abc
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from application.errors import NotFoundError
from application.outbox.ports import EventStore, Quarantine
from application.outbox.records import OutboxRecord, Unreadable
from domain.contact import Contact
from domain.values import Company, Name
from infra.cosmos.documents import event_documents, outbox_record, unreadable


class QuarantineWorld(abc.ABC):
    quarantine: Quarantine
    events: EventStore

    @abc.abstractmethod
    def plant(self, document: dict[str, Any]) -> None:
        """Write a raw document as the unit of work would have."""


def stored_events(changes: int, *, created: datetime | None = None) -> list[dict[str, Any]]:
    contact = Contact.create(name=Name(first_name="Q", last_name="R"), email="q@example.com",
                             company=Company(company_name="C"))
    for i in range(changes):
        contact.describe(f"change {i}")
    docs = event_documents(contact, ttl_seconds=600)
    if created is not None:
        for doc in docs:
            doc["data"]["createdAt"] = created.isoformat()
    return docs


def record(doc: dict[str, Any]) -> OutboxRecord:
    return outbox_record(doc)


class QuarantineContract:
    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> QuarantineWorld: ...

    def test_a_put_event_reads_back_with_its_reason_once(self, world: QuarantineWorld) -> None:
        doc = stored_events(1)[1]
        world.quarantine.put(record(doc), reason="too large")
        world.quarantine.put(record(doc), reason="too large")
        entry = world.quarantine.get(doc["id"])
        assert (entry.event_id, entry.aggregate_id, entry.action, entry.version) == (
            doc["id"], doc["partitionKey"], "ContactDescriptionUpdatedEvent", 2)
        assert (entry.reason, entry.replays, entry.resolved) == ("too large", 0, False)
        assert entry.quarantined_at is not None
        assert isinstance(entry.event, OutboxRecord) and entry.event.body == record(doc).body
        assert world.quarantine.count() == 1

    def test_an_unreadable_event_keeps_what_can_be_read(self, world: QuarantineWorld) -> None:
        doc = stored_events(0)[0]
        doc["data"].pop("action")
        world.quarantine.put(unreadable(doc, "no action"), reason="no action")
        entry = world.quarantine.get(doc["id"])
        assert isinstance(entry.event, Unreadable)
        assert (entry.aggregate_id, entry.version, entry.action) == (doc["partitionKey"], 1, None)

    def test_an_unknown_event_is_not_found(self, world: QuarantineWorld) -> None:
        with pytest.raises(NotFoundError):
            world.quarantine.get("no-such-event")

    def test_pages_list_every_record_once(self, world: QuarantineWorld) -> None:
        ids = set()
        for _ in range(5):
            doc = stored_events(0)[0]
            ids.add(doc["id"])
            world.quarantine.put(record(doc), reason="r")
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
        self, world: QuarantineWorld
    ) -> None:
        first, second = stored_events(0)[0], stored_events(0)[0]
        for doc in (first, second):
            world.quarantine.put(record(doc), reason="too large")
        failed = world.quarantine.replayed(world.quarantine.get(first["id"]), resolved=False,
                                           reason="still too large", ttl_seconds=60)
        assert (failed.reason, failed.replays, failed.resolved) == ("still too large", 1, False)
        entry = world.quarantine.get(second["id"])
        done = world.quarantine.replayed(entry, resolved=True, reason="", ttl_seconds=60)
        assert (done.replays, done.resolved) == (1, True)
        assert done.quarantined_at == entry.quarantined_at
        assert world.quarantine.get(second["id"]).resolved
        assert world.quarantine.count() == 1

    def test_set_aside_again_it_keeps_its_history_and_is_quarantined_again(
        self, world: QuarantineWorld
    ) -> None:
        doc = stored_events(0)[0]
        world.quarantine.put(record(doc), reason="too large")
        first = world.quarantine.get(doc["id"])
        world.quarantine.replayed(first, resolved=True, reason="", ttl_seconds=60)
        world.quarantine.put(record(doc), reason="too large again")  # a re-drive, still failing
        again = world.quarantine.get(doc["id"])
        assert (again.reason, again.replays, again.resolved) == ("too large again", 1, False)
        assert again.quarantined_at == first.quarantined_at
        assert world.quarantine.count() == 1

    def test_a_discarded_record_is_gone(self, world: QuarantineWorld) -> None:
        doc = stored_events(0)[0]
        world.quarantine.put(record(doc), reason="r")
        entry = world.quarantine.get(doc["id"])
        world.quarantine.discard(entry)
        with pytest.raises(NotFoundError):
            world.quarantine.get(doc["id"])
        with pytest.raises(NotFoundError):
            world.quarantine.discard(entry)
        assert world.quarantine.count() == 0

    def test_events_since_selects_by_creation_time_and_aggregate(
        self, world: QuarantineWorld
    ) -> None:
        t = datetime.now(UTC) - timedelta(minutes=10)
        old = stored_events(1, created=t - timedelta(seconds=1))
        at_t = stored_events(1, created=t)
        new = stored_events(2)
        for doc in old + at_t + new:
            world.plant(doc)
        found = {e.event_id for e in world.events.events_since(t)}
        assert {d["id"] for d in at_t + new} <= found
        assert not {d["id"] for d in old} & found
        one = world.events.events_since(t, aggregate_id=new[0]["partitionKey"])
        assert sorted(e.event_id for e in one) == sorted(d["id"] for d in new)
