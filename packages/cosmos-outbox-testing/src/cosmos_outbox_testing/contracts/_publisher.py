"""The message publisher's suite: batches that take messages until full, a send that delivers
the whole batch (each message once, with its ids, subject, body and properties, in order per
session) or raises, and a publisher that sends again after a failed send."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from cosmos_outbox.ports import MessageBatch, OutboxMessage
from cosmos_outbox_testing.contracts._worlds import PublisherWorld, Suite, finished, unique


def message(session: str, version: int, body: bytes = b'{"n":1}', **options: Any) -> OutboxMessage:
    """An event's message in `session` (its aggregate), version `version`."""
    return OutboxMessage(
        message_id=str(uuid.uuid4()),
        session_id=session,
        subject="TicketRetitled",
        version=version,
        body=body,
        aggregate_type="ticket",
        source="/tickets",
        application_properties={
            "aggregateType": "ticket",
            "ticketId": session,
            "version": version,
            "action": "TicketRetitled",
            "outboxFormat": 2,
        },
        **options,
    )


class PublisherContract(Suite[PublisherWorld]):
    """A message publisher, sync or async (`PublisherWorld`), sending to a topic the world
    reads back."""

    @staticmethod
    def call(world: PublisherWorld, name: str, *args: Any) -> Any:
        """A publisher method, run to its end (awaited on the world's loop when async)."""
        return finished(world, getattr(world.publisher, name)(*args))

    def batch(self, world: PublisherWorld, *messages: OutboxMessage) -> MessageBatch:
        batch: MessageBatch = self.call(world, "create_batch")
        for each in messages:
            assert batch.try_add(each), "the batch took fewer messages than the suite sends"
        return batch

    def test_a_batch_takes_messages_until_it_is_full(self, world: PublisherWorld) -> None:
        batch: MessageBatch = self.call(world, "create_batch")
        assert len(batch) == 0 and batch.max_size_in_bytes > 0
        session = unique("s")
        body = b'{"text":"' + b"x" * 1000 + b'"}'
        added = 0
        while batch.try_add(message(session, added + 1, body)):
            added += 1
            assert len(batch) == added
            assert added * len(body) <= batch.max_size_in_bytes
        assert added >= 1
        assert not batch.try_add(message(session, added + 1, body))  # full stays full
        assert len(batch) == added

    def test_a_message_larger_than_a_batch_is_never_taken(self, world: PublisherWorld) -> None:
        batch: MessageBatch = self.call(world, "create_batch")
        huge = b'{"text":"' + b"x" * batch.max_size_in_bytes + b'"}'
        assert not batch.try_add(message("s", 1, huge))
        assert len(batch) == 0

    def test_a_sent_batch_arrives_whole_each_message_once_with_its_fields(
        self, world: PublisherWorld
    ) -> None:
        sessions = [unique("s") for _ in range(2)]
        sent = [message(sessions[i % 2], i // 2 + 1, b'{"n":%d}' % i) for i in range(6)]
        self.call(world, "send", self.batch(world, *sent))
        got = world.received(sessions, len(sent))
        assert sorted(r.message_id for r in got) == sorted(m.message_id for m in sent)
        by_id = {r.message_id: r for r in got}
        for each in sent:
            arrived = by_id[each.message_id]
            assert (arrived.session_id, arrived.subject, arrived.body) == (
                each.session_id,
                each.subject,
                each.body,
            )
            for name, value in each.application_properties.items():
                assert arrived.properties.get(name) == value, name

    def test_the_messages_of_a_session_arrive_in_the_order_sent(
        self, world: PublisherWorld
    ) -> None:
        session = unique("s")
        first = [message(session, v) for v in (1, 2, 3)]
        second = [message(session, v) for v in (4, 5)]
        self.call(world, "send", self.batch(world, *first))
        self.call(world, "send", self.batch(world, *second))
        got = world.received([session], 5)
        assert [r.message_id for r in got] == [m.message_id for m in first + second]

    def test_a_failed_send_raises_and_the_publisher_sends_again_after(
        self, world: PublisherWorld
    ) -> None:
        session = unique("s")
        with world.outage(), pytest.raises(Exception):  # noqa: B017
            self.call(world, "send", self.batch(world, message(session, 1)))
        after = message(session, 2)
        self.call(world, "send", self.batch(world, after))
        assert after.message_id in {r.message_id for r in world.received([session], 1)}

    def test_refresh_says_no_when_the_entity_has_nothing_more_to_give(
        self, world: PublisherWorld
    ) -> None:
        self.call(world, "send", self.batch(world, message(unique("s"), 1)))
        assert self.call(world, "refresh") is False
