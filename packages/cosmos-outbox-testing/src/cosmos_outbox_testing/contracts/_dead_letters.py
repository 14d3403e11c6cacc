"""The dead-letter queues' suite (`DeadLetterContract`) and its worlds: dead letters peeked in
order with what they were sent with and why they were dead-lettered; a move that sends a dead
letter's message and only then removes it; one that removes it without sending; an unknown one
said so; a dead letter whose send the broker refuses (larger than any namespace takes) stays,
and the others move."""

from __future__ import annotations

import abc
import json
import uuid
from typing import Any

from cosmos_outbox.ports import (
    AsyncDeadLetterQueues,
    DeadLetter,
    DeadLetterEntity,
    DeadLetterQueues,
    Outgoing,
)
from cosmos_outbox_testing._dead_letters import InMemoryDeadLetters
from cosmos_outbox_testing.contracts._worlds import Received, Suite, _Runs, finished, received

__all__ = ["DeadLetterContract", "DeadLetterWorld", "InMemoryDeadLetterWorld"]

#: A message larger than this is refused by any namespace (Premium's 1 MB and the fake's).
REFUSED_BYTES = 1024 * 1024


class DeadLetterWorld(_Runs, abc.ABC):
    """What the dead letters' suite needs: the queues (sync, or async: `run` awaits their
    coroutines), an entity whose dead-letter queue a test fills, what reaches that entity, and
    a way to make the broker fail."""

    queues: DeadLetterQueues | AsyncDeadLetterQueues
    entity: DeadLetterEntity

    @abc.abstractmethod
    def dead_letter(
        self, session: str, bodies: list[bytes], *, reason: str, description: str
    ) -> None:
        """Messages of `session` (one per body, application property `n` its index) put in the
        entity's dead-letter queue, in order, with that reason and description."""

    @abc.abstractmethod
    def received(self, session: str, count: int) -> list[Received]:
        """The messages of `session` that reached the entity since, in order: waits until
        `count` are there (fails past a deadline), then returns what arrived."""


class InMemoryDeadLetterWorld(DeadLetterWorld):
    """The test kit's `InMemoryDeadLetters`: what a move sends is what reached the entity."""

    def __init__(self) -> None:
        self.fake = InMemoryDeadLetters()
        self.queues = self.fake
        self.entity = DeadLetterEntity("subscription-a")

    def dead_letter(
        self, session: str, bodies: list[bytes], *, reason: str, description: str
    ) -> None:
        for n, body in enumerate(bodies):
            self.fake.dead_letter(
                self.entity.name,
                body,
                message_id=str(uuid.uuid4()),
                session_id=session,
                subject="TicketRetitled",
                application_properties={"n": n, "aggregateType": "ticket"},
                reason=reason,
                description=description,
                delivery_count=3,
            )

    def received(self, session: str, count: int) -> list[Received]:
        sent = [m for entity, m in self.fake.sent if entity == self.entity]
        return received(sent, [session], count)


def outgoing(letter: DeadLetter, **properties: Any) -> Outgoing:
    """The dead letter's message sent again with a MessageId of its own."""
    return Outgoing(
        body=letter.body,
        message_id=str(uuid.uuid4()),
        session_id=letter.session_id,
        subject=letter.subject,
        content_type=letter.content_type,
        application_properties={**letter.application_properties, **properties},
    )


class DeadLetterContract(Suite[DeadLetterWorld]):
    """A port of dead-letter queues, sync or async (`DeadLetterWorld`)."""

    @staticmethod
    def call(world: DeadLetterWorld, name: str, *args: Any, **kwargs: Any) -> Any:
        return finished(world, getattr(world.queues, name)(*args, **kwargs))

    def letters(self, world: DeadLetterWorld, session: str) -> list[DeadLetter]:
        found: list[DeadLetter] = []
        start = 0
        while True:
            page = self.call(world, "peek", world.entity, from_sequence=start, max_count=20)
            found += page
            if len(page) < 20:
                return [m for m in found if m.session_id == session]
            start = page[-1].sequence_number + 1

    def fill(self, world: DeadLetterWorld, count: int) -> tuple[str, list[DeadLetter]]:
        session = f"s-{uuid.uuid4().hex[:8]}"
        bodies = [json.dumps({"n": n}).encode() for n in range(count)]
        world.dead_letter(session, bodies, reason="HandlerFailed", description="boom: n")
        letters = self.letters(world, session)
        assert len(letters) == count
        return session, letters

    def test_dead_letters_are_peeked_in_order_with_what_they_were_sent_with_and_why(
        self, world: DeadLetterWorld
    ) -> None:
        session, letters = self.fill(world, 3)
        numbers = [m.sequence_number for m in letters]
        assert numbers == sorted(numbers) and len(set(numbers)) == 3
        for n, letter in enumerate(letters):
            assert json.loads(letter.body) == {"n": n}
            assert (letter.session_id, letter.subject) == (session, "TicketRetitled")
            assert (letter.reason, letter.description) == ("HandlerFailed", "boom: n")
            assert letter.application_properties.get("n") == n
            assert "DeadLetterReason" not in letter.application_properties
            assert letter.delivery_count >= 0 and letter.enqueued_at is not None
            assert letter.message_id

    def test_a_peek_starts_at_a_sequence_number_and_takes_at_most_max_count(
        self, world: DeadLetterWorld
    ) -> None:
        _, letters = self.fill(world, 3)
        later = self.call(
            world, "peek", world.entity, from_sequence=letters[1].sequence_number, max_count=1
        )
        assert [m.sequence_number for m in later] == [letters[1].sequence_number]

    def test_a_move_sends_the_message_then_removes_the_dead_letter(
        self, world: DeadLetterWorld
    ) -> None:
        session, letters = self.fill(world, 2)
        again = outgoing(letters[0], outboxResubmission=1)
        outcomes = self.call(world, "move", world.entity, {letters[0].sequence_number: again})
        assert outcomes == {letters[0].sequence_number: None}
        [arrived] = world.received(session, 1)
        assert (arrived.message_id, arrived.body) == (again.message_id, letters[0].body)
        assert arrived.properties.get("outboxResubmission") == 1
        assert arrived.properties.get("n") == 0
        # the other one stays, under its number
        assert [m.sequence_number for m in self.letters(world, session)] == [
            letters[1].sequence_number
        ]

    def test_a_send_goes_where_a_moves_send_goes_and_leaves_the_dead_letters(
        self, world: DeadLetterWorld
    ) -> None:
        session, letters = self.fill(world, 2)
        again = [outgoing(letter, outboxResubmission=1) for letter in letters]
        self.call(world, "send", world.entity, again)
        arrived = world.received(session, 2)
        assert sorted(a.message_id for a in arrived) == sorted(m.message_id for m in again)
        assert {a.properties.get("outboxResubmission") for a in arrived} == {1}
        assert [m.sequence_number for m in self.letters(world, session)] == [
            m.sequence_number for m in letters
        ]

    def test_a_move_without_a_message_removes_the_dead_letter_and_sends_nothing(
        self, world: DeadLetterWorld
    ) -> None:
        session, letters = self.fill(world, 1)
        outcomes = self.call(world, "move", world.entity, {letters[0].sequence_number: None})
        assert outcomes == {letters[0].sequence_number: None}
        assert self.letters(world, session) == []

    def test_an_unknown_dead_letter_is_said_so_and_the_others_are_moved(
        self, world: DeadLetterWorld
    ) -> None:
        session, letters = self.fill(world, 1)
        unknown = letters[0].sequence_number + 10_000
        outcomes = self.call(
            world, "move", world.entity, {unknown: None, letters[0].sequence_number: None}
        )
        assert outcomes[letters[0].sequence_number] is None
        assert outcomes[unknown] is not None and "not found" in outcomes[unknown]
        assert self.letters(world, session) == []

    def test_a_dead_letter_whose_send_is_refused_stays_and_the_others_move(
        self, world: DeadLetterWorld
    ) -> None:
        session, letters = self.fill(world, 2)
        sent = outgoing(letters[0])
        refused = Outgoing(
            body=b"x" * (REFUSED_BYTES + 1),
            message_id=sent.message_id,
            session_id=sent.session_id,
            subject=sent.subject,
            content_type=sent.content_type,
            application_properties=sent.application_properties,
        )
        outcomes = self.call(
            world,
            "move",
            world.entity,
            {letters[0].sequence_number: refused, letters[1].sequence_number: outgoing(letters[1])},
        )
        assert outcomes[letters[0].sequence_number] is not None
        assert outcomes[letters[1].sequence_number] is None
        left = self.letters(world, session)
        assert [m.sequence_number for m in left] == [letters[0].sequence_number], (left, letters)
