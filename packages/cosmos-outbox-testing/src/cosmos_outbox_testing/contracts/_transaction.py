"""The transaction's part of the write path's suite, over a store: your documents (every
operation of a transactional batch), the events and their sequence in one batch, all or nothing;
an etag conflict refuses the whole batch; racing transactions on one partition keep every event
once and in order; the batch limits are refused before the round trip; an idempotent commit is
answered from its record, and a retry is answered by `replay` before the app's own checks; an
empty commit writes nothing."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from cosmos_outbox.documents import EVENT_TYPE, SEQUENCE_TYPE, read_feed
from cosmos_outbox.documents import event_fields as fields
from cosmos_outbox.errors import (
    AlreadyExistsError,
    BatchTooLargeError,
    IdempotencyKeyReusedError,
    NotFoundError,
    PreconditionFailedError,
)
from cosmos_outbox.relay import OutboxRecord, to_message
from cosmos_outbox_testing.contracts._worlds import StoreWorld, Suite, plain, types_in, unique


def _booking(partition: str, booking_id: str = "b1", **fields: Any) -> dict[str, Any]:
    booking = {"id": booking_id, "partitionKey": partition, "type": "booking", "status": "held"}
    return booking | fields


def _events(world: StoreWorld, partition: str) -> list[dict[str, Any]]:
    return sorted(
        (d for d in world.documents(partition) if d.get("type") == EVENT_TYPE),
        key=lambda d: d["version"],
    )


def _body(event: dict[str, Any]) -> dict[str, Any]:
    """What an event's message body is: the data the app published."""
    data = fields(event).data
    assert data is not None
    return dict(data)


def _borrow(tx: Any, key: str, book: str, *, attempt: int = 1) -> dict[str, Any]:
    """The library's borrow, in the order the README shows: the key looked up first, then the
    quota checked (its etag conditions the write), the loan, its event and the key."""
    request = {"book": book}
    replayed = tx.replay(key, request=request)
    if replayed is not None:
        answer: dict[str, Any] = replayed.answer
        return answer
    quota = tx.read("quota")
    if quota["used"] >= quota["limit"]:
        return {"status": 409, "body": {"detail": "loan quota exhausted"}}
    tx.replace({**plain(quota), "used": quota["used"] + 1}, if_match=quota["_etag"])
    tx.create({"id": f"loan-{book}", "type": "loan", "book": book})
    tx.publish("BookBorrowed", {"book": book})
    answer = {"status": 201, "body": {"loan": f"loan-{book}", "attempt": attempt}}
    tx.remember(key, request=request, answer=answer)
    committed = tx.commit()
    return committed.answer if committed.replayed else answer


class TransactionContract(Suite[StoreWorld]):
    """Your documents and the events you publish, committed as one transactional batch."""

    def test_a_commit_writes_your_documents_the_events_and_the_sequence_in_one_batch(
        self, world: StoreWorld
    ) -> None:
        partition = unique("customer")
        with world.transaction(partition, entity="customer") as tx:
            tx.create(_booking(partition))
            first = tx.publish("BookingHeld", {"bookingId": "b1", "seats": 2})
            second = tx.publish(
                "BookingNoted", {"note": "window"}, subject="b1", properties={"channel": "web"}
            )
            committed = tx.commit()
        assert committed.events == [first, second] and len(committed.etags) == 1
        assert types_in(world, partition) == sorted(
            ["booking", EVENT_TYPE, EVENT_TYPE, SEQUENCE_TYPE]
        )
        events = _events(world, partition)
        assert [e["version"] for e in events] == [1, 2]
        assert [e["action"] for e in events] == ["BookingHeld", "BookingNoted"]
        held, noted = read_feed(events)
        assert isinstance(held, OutboxRecord) and isinstance(noted, OutboxRecord)
        for record in (held, noted):
            assert (record.aggregate_type, record.aggregate_id) == ("customer", partition)
            assert record.event_source == "/customers"
        assert noted.properties == {"channel": "web"}
        assert (to_message(held).subject, to_message(noted).subject) == ("BookingHeld", "b1")
        assert to_message(noted).application_properties["action"] == "BookingNoted"
        stored = world.documents(partition)
        if all("_lsn" in d for d in stored):  # one transaction: one change-feed position
            assert len({d["_lsn"] for d in stored}) == 1

    def test_the_sequence_goes_on_across_transactions_and_processes(
        self, world: StoreWorld
    ) -> None:
        partition = unique("customer")
        for process in ("a", "a", "b", "a"):
            with world.transaction(partition, process=process) as tx:
                tx.publish("BookingNoted", {"by": process})
                tx.commit()
        assert [e["version"] for e in _events(world, partition)] == [1, 2, 3, 4]

    def test_a_document_of_yours_without_partition_key_is_written_in_the_transactions_partition(
        self, world: StoreWorld
    ) -> None:
        """Your documents keep your fields: one without `partitionKey` is written in the
        transaction's partition (at the container's partition key path); one with another
        partition's is refused before anything is sent."""
        partition = unique("customer")
        with world.transaction(partition, entity="customer") as tx:
            tx.create({"id": "b1", "type": "booking", "status": "held"})
            tx.publish("BookingHeld", {"bookingId": "b1"})
            tx.commit()
        [booking] = [d for d in world.documents(partition) if d.get("type") == "booking"]
        assert (booking["id"], booking["status"]) == ("b1", "held")
        with (
            world.transaction(partition, entity="customer") as tx,
            pytest.raises(ValueError, match="not in this transaction's partition"),
        ):
            tx.create(_booking("another-customer", "b2"))

    def test_every_operation_of_a_batch_on_your_documents(self, world: StoreWorld) -> None:
        partition = unique("customer")
        with world.transaction(partition) as tx:
            tx.create(_booking(partition, "b1"))
            tx.create(_booking(partition, "b2"))
            tx.create(_booking(partition, "b3", seats=1))
            created = tx.commit()
        with world.transaction(partition) as tx:
            tx.upsert(_booking(partition, "b4"))
            tx.replace(_booking(partition, "b1", status="confirmed"), if_match=created.etags[0])
            tx.patch(
                "b3",
                [
                    {"op": "incr", "path": "/seats", "value": 2},
                    {"op": "set", "path": "/status", "value": "grown"},
                ],
            )
            tx.delete("b2")
            tx.publish("BookingsChanged", {"count": 4})
            tx.commit()
        kept = {d["id"]: d for d in world.documents(partition) if d.get("type") == "booking"}
        assert sorted(kept) == ["b1", "b3", "b4"]
        assert kept["b1"]["status"] == "confirmed"
        assert (kept["b3"]["seats"], kept["b3"]["status"]) == (3, "grown")

    def test_a_failing_operation_leaves_nothing_of_the_transaction_written(
        self, world: StoreWorld
    ) -> None:
        partition = unique("customer")
        world.plant(_booking(partition, "taken"))
        before = types_in(world, partition)
        with world.transaction(partition) as tx:
            tx.create(_booking(partition, "new"))
            tx.create(_booking(partition, "taken"))  # fails the batch
            tx.publish("BookingHeld", {"bookingId": "new"})
            with pytest.raises(AlreadyExistsError):
                tx.commit()
        assert types_in(world, partition) == before
        with world.transaction(partition) as tx:
            tx.delete("missing")
            tx.publish("BookingCancelled", {"bookingId": "missing"})
            with pytest.raises(NotFoundError):
                tx.commit()
        assert types_in(world, partition) == before

    def test_an_etag_conflict_refuses_the_whole_batch(self, world: StoreWorld) -> None:
        partition = unique("customer")
        with world.transaction(partition) as tx:
            tx.create(_booking(partition))
            etag = tx.commit().etags[0]
        with world.transaction(partition) as tx:
            tx.replace(_booking(partition, status="confirmed"), if_match=etag)
            tx.commit()
        with world.transaction(partition) as tx:
            tx.replace(_booking(partition, status="late"), if_match=etag)  # stale
            tx.publish("BookingChanged", {"status": "late"})
            with pytest.raises(PreconditionFailedError):
                tx.commit()
        [booking] = [d for d in world.documents(partition) if d.get("type") == "booking"]
        assert booking["status"] == "confirmed"
        assert _events(world, partition) == []

    def test_racing_transactions_on_one_partition_keep_every_event_once_and_in_order(
        self, world: StoreWorld
    ) -> None:
        partition = unique("customer")
        rounds, racers = 4, 3
        start = threading.Barrier(racers, timeout=60)

        def race(racer: int) -> list[str]:
            published = []
            start.wait()
            for n in range(rounds):
                with world.transaction(partition, process=racer) as tx:
                    published.append(tx.publish("SeatTaken", {"racer": racer, "n": n}))
                    tx.commit()
            return published

        with ThreadPoolExecutor(racers) as pool:
            ids = [i for published in pool.map(race, range(racers)) for i in published]
        events = _events(world, partition)
        assert sorted(e["id"] for e in events) == sorted(ids)  # every one, once
        assert [e["version"] for e in events] == list(range(1, rounds * racers + 1))
        for racer in range(racers):  # each racer's events in the order it committed them
            mine = [body["n"] for body in map(_body, events) if body["racer"] == racer]
            assert mine == sorted(mine)

    def test_the_batch_limits_are_refused_before_the_round_trip(self, world: StoreWorld) -> None:
        partition = unique("customer")
        with world.transaction(partition) as tx:
            for n in range(98):
                tx.create(_booking(partition, f"b{n}"))
            tx.publish("ManyHeld", {"count": 98})
            tx.publish("ManyNoted", {"count": 98})  # 98 + 2 + the sequence: 101
            with pytest.raises(BatchTooLargeError, match="101 operations"):
                tx.commit()
        with world.transaction(partition) as tx:
            tx.create(_booking(partition, "large", blob="x" * (2 * 1024 * 1024)))
            with pytest.raises(BatchTooLargeError, match="bytes"):
                tx.commit()
        with world.transaction(partition) as tx:
            tx.create(_booking(partition))
            tx.publish("Noted", {"note": "x" * (2 * 1024 * 1024)})
            with pytest.raises(BatchTooLargeError, match="bytes"):
                tx.commit()
        assert world.documents(partition) == []

    def test_a_batch_near_the_limit_is_measured_and_written_when_it_fits(
        self, world: StoreWorld
    ) -> None:
        """A document 4 KB under the 2 MB limit on a partition key of 250 characters: counted as
        it is staged as more than 2 MB (each character of the key as its longest escape, 12
        bytes, in the event's and the sequence's documents), so measured, and written."""
        partition = f"{unique('customer')}-{'k' * 230}"
        # (a tx id is at most 128 characters: Service Bus's SessionId)
        with world.transaction(partition, session_id="s1") as tx:
            tx.create(_booking(partition, "wide", note="x" * (2 * 1024 * 1024 - 4000)))
            tx.publish("BookingNoted", {"note": "wide"})
            tx.commit()
        stored = {d["id"]: d for d in world.documents(partition)}
        assert len(stored["wide"]["note"]) == 2 * 1024 * 1024 - 4000
        assert [e["action"] for e in _events(world, partition)] == ["BookingNoted"]

    def test_an_idempotent_commit_is_answered_from_its_record(self, world: StoreWorld) -> None:
        partition = unique("customer")
        request = {"seats": 2}
        with world.transaction(partition) as tx:
            tx.create(_booking(partition))
            tx.publish("BookingHeld", {"bookingId": "b1"})
            tx.remember("key-1", request=request, answer={"id": "b1"})
            first = tx.commit()
        assert not first.replayed
        with world.transaction(partition) as tx:
            tx.create(_booking(partition))
            tx.publish("BookingHeld", {"bookingId": "b1"})
            tx.remember("key-1", request=request, answer={"id": "other"})
            again = tx.commit()
        assert (again.replayed, again.answer) == (True, {"id": "b1"})
        assert len(_events(world, partition)) == 1
        with world.transaction(partition) as tx:
            tx.create(_booking(partition, "b2"))
            tx.remember("key-1", request={"seats": 3})
            with pytest.raises(IdempotencyKeyReusedError):
                tx.commit()

    def test_a_retry_is_answered_before_the_apps_checks_as_the_first_request_was(
        self, world: StoreWorld
    ) -> None:
        """Quota 1: the first borrow takes it (201); its retry with the same key is answered
        that 201 by `replay`, though the quota check would now say 409; one loan, one event.
        Another key is checked afresh (409), and the key with another request is refused."""
        member = unique("customer")
        world.plant({"id": "quota", "partitionKey": member, "type": "quota", "used": 0, "limit": 1})
        with world.transaction(member, entity="member") as tx:
            first = _borrow(tx, "key-1", "dune")
        with world.transaction(member, entity="member") as tx:
            again = _borrow(tx, "key-1", "dune", attempt=2)
        assert first == again == {"status": 201, "body": {"loan": "loan-dune", "attempt": 1}}
        with world.transaction(member, entity="member") as tx:
            assert _borrow(tx, "key-2", "emma")["status"] == 409
        with (
            world.transaction(member, entity="member") as tx,
            pytest.raises(IdempotencyKeyReusedError),
        ):
            tx.replay("key-1", request={"book": "emma"})
        assert [e["action"] for e in _events(world, member)] == ["BookBorrowed"]
        assert sorted(types_in(world, member)) == sorted(
            ["quota", "loan", "idempotencyRecord", EVENT_TYPE, SEQUENCE_TYPE]
        )

    def test_two_first_attempts_racing_with_one_key_end_with_one_effect(
        self, world: StoreWorld
    ) -> None:
        """Both look the key up before either commits (neither finds it) and both borrow: the
        second's batch fails on the quota's etag and on the key's record, and its commit is
        answered from the first's record."""
        member = unique("customer")
        world.plant({"id": "quota", "partitionKey": member, "type": "quota", "used": 0, "limit": 2})
        first = world.transaction(member, entity="member", process="a")
        second = world.transaction(member, entity="member", process="b")
        for attempt, tx in ((1, first), (2, second)):
            assert tx.replay("key-1", request={"book": "dune"}) is None
            quota = tx.read("quota")
            assert quota is not None
            tx.replace({**plain(quota), "used": quota["used"] + 1}, if_match=quota["_etag"])
            tx.publish("BookBorrowed", {"book": "dune"})
            tx.remember("key-1", request={"book": "dune"}, answer={"attempt": attempt})
        assert first.commit().replayed is False
        assert second.commit() == ((), (), True, {"attempt": 1})
        assert len(_events(world, member)) == 1
        [quota] = [d for d in world.documents(member) if d["id"] == "quota"]
        assert quota["used"] == 1

    def test_an_empty_commit_writes_nothing_and_returns_no_events(self, world: StoreWorld) -> None:
        partition = unique("customer")
        with world.transaction(partition) as tx:
            committed = tx.commit()
        assert (
            tuple(committed.etags),
            tuple(committed.events),
            committed.replayed,
            committed.answer,
        ) == ((), (), False, None)
        assert world.documents(partition) == []
