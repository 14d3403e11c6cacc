"""The subscriber the console's long walks count resubmissions with: at a session-enabled
subscription, every message of every session received; each resubmission (`outboxResubmission`)
counted once per message the topic accepted (its sequence number), by its event id and its
MessageId, then completed, or dead-lettered again when the walk asks it to refuse the event.

Service Bus is at least once to a subscriber: a message whose session lock is lost before its
settlement (a loaded machine) is given again, with the same sequence number. That is the broker
giving the same message again, counted in `redelivered`, never a second send: a second send is a
message of its own (a new sequence number), counted again, and fails the walk's "once each". So
that such a failure says what it saw, each event keeps what each of its messages was (`sightings`)
and `twice()` names them."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import Any

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient
from azure.servicebus.exceptions import OperationTimeoutError, SessionLockLostError


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else (str(value) if value else None)


def prop(message: Any, name: str) -> str | None:
    """An application property of a received message, as text (None when absent)."""
    properties = message.application_properties or {}
    return _text(properties.get(name.encode(), properties.get(name)))


@dataclass(frozen=True)
class Sighting:
    """One message of an event, as the subscriber received it first."""

    sequence_number: int
    message_id: str
    enqueued: str
    delivery_count: int


@dataclass(frozen=True)
class Refusal:
    """Which resubmissions the subscriber dead-letters again (`reason`, `description`): the
    events in `events`, once more than `canary` resubmissions were received (the canary's are
    never refused)."""

    events: frozenset[str]
    canary: int
    reason: str
    description: str


class Resubmissions(threading.Thread):
    """The subscriber at `topic`/`subscription` (see the module). Told to drain (`draining`),
    it ends once no session has a message left: nothing more to count."""

    def __init__(
        self, connection_string: str, topic: str, subscription: str, refusal: Refusal | None = None
    ) -> None:
        super().__init__(name=f"{subscription}-subscriber", daemon=True)
        self.connection_string, self.topic, self.subscription = (
            connection_string,
            topic,
            subscription,
        )
        self.refusal = refusal
        self.events: collections.Counter[str] = collections.Counter()
        self.message_ids: collections.Counter[str] = collections.Counter()
        self.sightings: dict[str, list[Sighting]] = collections.defaultdict(list)
        self.refused: set[str] = set()
        self.sequence_numbers: set[int] = set()
        self.redelivered = 0
        self.others = 0  # messages that are not resubmissions
        self.draining = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        with ServiceBusClient.from_connection_string(self.connection_string) as client:
            while True:
                try:
                    with client.get_subscription_receiver(
                        self.topic,
                        self.subscription,
                        session_id=NEXT_AVAILABLE_SESSION,
                        max_wait_time=2,
                    ) as receiver:
                        while batch := receiver.receive_messages(100, max_wait_time=1):
                            for message in batch:
                                if self.counted(message) and self.refusal is not None:
                                    receiver.dead_letter_message(
                                        message,
                                        reason=self.refusal.reason,
                                        error_description=self.refusal.description,
                                    )
                                else:
                                    receiver.complete_message(message)
                except OperationTimeoutError:  # no session has a message
                    if self.draining.is_set():
                        return
                except SessionLockLostError:  # its messages are given again
                    continue

    def counted(self, message: Any) -> bool:
        """`message` counted once per sequence number; whether to refuse it."""
        event = prop(message, "cloudEvents_id") or ""
        with self.lock:
            if not prop(message, "outboxResubmission"):
                self.others += 1
                return False
            if message.sequence_number in self.sequence_numbers:
                self.redelivered += 1
                return event in self.refused
            self.sequence_numbers.add(message.sequence_number)
            self.events[event] += 1
            self.message_ids[str(message.message_id)] += 1
            self.sightings[event].append(
                Sighting(
                    message.sequence_number,
                    str(message.message_id),
                    str(message.enqueued_time_utc),
                    int(message.delivery_count or 0),
                )
            )
            refusal = self.refusal
            if (
                refusal is not None
                and sum(self.events.values()) > refusal.canary
                and event in refusal.events
            ):
                self.refused.add(event)
                return True
            return False

    def seen(self) -> collections.Counter[str]:
        """The resubmissions received so far, by event id (once per message)."""
        with self.lock:
            return collections.Counter(self.events)

    def twice(self) -> dict[str, list[Sighting]]:
        """The events received as more than one message, with what each message was (a second
        send has a sequence number of its own; the same MessageId twice means the topic's
        duplicate detection let it through)."""
        with self.lock:
            return {e: list(s) for e, s in self.sightings.items() if len(s) != 1}

    def stop(self, timeout: float) -> None:
        """Drain the subscription and wait for the thread's end (up to `timeout` seconds)."""
        self.draining.set()
        self.join(timeout=timeout)
