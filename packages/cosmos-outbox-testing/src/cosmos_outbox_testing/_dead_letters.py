"""The dead-letter queues, in memory (`InMemoryDeadLetters`): what a test dead-letters
(`dead_letter`, or `dead_letter_message` for a message the relay sent), peeked and moved as the
Service Bus adapter does, held to the same suite (`DeadLetterContract`). What a move sends is
kept in `sent`, by entity; `fail_sends` makes every send fail while set."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cosmos_outbox.ports import (
    DeadLetter,
    DeadLetterEntity,
    DeadLetterQueues,
    MoveOutcome,
    OutboxMessage,
    Outgoing,
)

__all__ = ["InMemoryDeadLetters"]

NOT_FOUND = "not found (removed already, or locked by another receiver)"


class InMemoryDeadLetters(DeadLetterQueues):
    """Dead-letter queues by entity name; sequence numbers from 1, per queue, never reused."""

    def __init__(self, *, max_message_bytes: int = 1024 * 1024) -> None:
        self._lock = threading.Lock()
        #: the largest message a send takes (a Premium namespace's); a larger one is refused
        self.max_message_bytes = max_message_bytes
        self.queues: dict[str, dict[int, DeadLetter]] = {}
        self._numbers: dict[str, int] = {}
        #: what moves sent, in order: (the entity whose dead letter it was, the message)
        self.sent: list[tuple[DeadLetterEntity, Outgoing]] = []
        #: while True, every send fails (the broker refuses it)
        self.fail_sends = False

    def dead_letter(
        self,
        entity: str,
        body: bytes,
        *,
        message_id: str | None = None,
        session_id: str | None = None,
        subject: str | None = None,
        content_type: str | None = "application/json",
        application_properties: Mapping[str, Any] | None = None,
        reason: str | None = "MaxDeliveryCountExceeded",
        description: str | None = None,
        delivery_count: int = 10,
        enqueued_at: float | None = None,
    ) -> DeadLetter:
        """Put a message in `entity`'s dead-letter queue (as the broker does after its last
        delivery, or a receiver's dead-lettering); the dead letter."""
        with self._lock:
            number = self._numbers[entity] = self._numbers.get(entity, 0) + 1
            letter = DeadLetter(
                sequence_number=number,
                body=body,
                message_id=message_id,
                session_id=session_id,
                subject=subject,
                content_type=content_type,
                correlation_id=None,
                application_properties=dict(application_properties or {}),
                reason=reason,
                description=description,
                delivery_count=delivery_count,
                enqueued_at=time.time() if enqueued_at is None else enqueued_at,
            )
            self.queues.setdefault(entity, {})[number] = letter
            return letter

    def dead_letter_message(
        self,
        entity: str,
        message: OutboxMessage,
        *,
        reason: str | None = "MaxDeliveryCountExceeded",
        description: str | None = None,
        delivery_count: int = 10,
        base: str = "",
    ) -> DeadLetter:
        """Dead-letter a message the relay sent (`FakePublisher.messages`), with the properties
        it had on the wire (the outbox's and the CloudEvents attributes)."""
        from cosmos_outbox_testing._delivery import on_the_wire

        return self.dead_letter(
            entity,
            message.body,
            **on_the_wire(message, base=base),
            reason=reason,
            description=description,
            delivery_count=delivery_count,
        )

    def letters(self, entity: str) -> list[DeadLetter]:
        """What `entity`'s dead-letter queue holds, in order."""
        with self._lock:
            return [self.queues.get(entity, {})[n] for n in sorted(self.queues.get(entity, {}))]

    def peek(
        self, entity: DeadLetterEntity, *, from_sequence: int, max_count: int
    ) -> list[DeadLetter]:
        if max_count < 1:
            raise ValueError("max_count is at least 1")
        return [m for m in self.letters(entity.name) if m.sequence_number >= from_sequence][
            :max_count
        ]

    def send(self, entity: DeadLetterEntity, messages: Sequence[Outgoing]) -> None:
        for outgoing in messages:
            if self.fail_sends:
                raise ConnectionError("the broker refuses")
            if len(outgoing.body) > self.max_message_bytes:
                raise ValueError(
                    f"MessageSizeExceededError: {len(outgoing.body)} bytes, at most "
                    f"{self.max_message_bytes}"
                )
        with self._lock:
            self.sent += [(entity, outgoing) for outgoing in messages]

    def move(
        self, entity: DeadLetterEntity, moves: Mapping[int, Outgoing | None]
    ) -> dict[int, MoveOutcome]:
        outcomes: dict[int, MoveOutcome] = {}
        for number, outgoing in moves.items():
            with self._lock:
                letter = self.queues.get(entity.name, {}).get(number)
            if letter is None:
                outcomes[number] = NOT_FOUND
                continue
            if outgoing is not None:
                if self.fail_sends:
                    outcomes[number] = "the send was refused (ConnectionError); it stays"
                    continue
                if len(outgoing.body) > self.max_message_bytes:
                    outcomes[number] = (
                        f"the send was refused (MessageSizeExceededError: {len(outgoing.body)} "
                        f"bytes, at most {self.max_message_bytes}); it stays"
                    )
                    continue
                with self._lock:
                    self.sent.append((entity, outgoing))
            with self._lock:
                self.queues[entity.name].pop(number, None)
            outcomes[number] = None
        return outcomes
