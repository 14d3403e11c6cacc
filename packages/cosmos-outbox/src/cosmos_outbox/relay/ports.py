"""The outbox's ports: the broker (a size-limited batch and its publisher), the payload store of
the claim check, the quarantine, the stored events (for a re-drive) and the backlog estimator.
Fakes subclass them in tests and adapters in `infra/` implement them; contract suites hold both
to the same behaviour."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from datetime import datetime

from cosmos_outbox.ports import Page
from cosmos_outbox.relay.records import OutboxMessage, OutboxRecord, Unreadable


class MessageBatch(abc.ABC):
    """A size-limited batch of messages."""

    @abc.abstractmethod
    def try_add(self, message: OutboxMessage) -> bool:
        """Add the message if it fits; False when the batch is full."""

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @property
    @abc.abstractmethod
    def max_size_in_bytes(self) -> int:
        """The most a batch (and so one message) may hold: a message whose body alone is as
        large can never fit this link's batches."""


class MessagePublisher(abc.ABC):
    """Sends message batches to the topic. `send` either sends the whole batch or raises."""

    @abc.abstractmethod
    def create_batch(self) -> MessageBatch: ...

    @abc.abstractmethod
    def send(self, batch: MessageBatch) -> None: ...

    def refresh(self) -> bool:
        """Forget what was learnt of the entity (a link's message size limit), so the next
        batch reads it again: a message too large for an empty batch is re-checked once
        against a fresh link before it is offloaded or quarantined (the limit may have been
        raised). False when a fresh link could not take more (nothing was forgotten): the
        default, for publishers with nothing to learn."""
        return False


class PayloadStore(abc.ABC):
    """Keeps event bodies too large for a message: the claim check. The relay, after the commit,
    stores a body under a name derived from its event (`records.payload_name`: aggregate type /
    aggregate id / event id) and sends a message that refers to it (CloudEvents `dataref`);
    subscribers fetch it by that reference. A retry stores the same bytes under the same name.

    Errors: `PayloadStoreError` (the store failed: retry), `PayloadNotFoundError` (nothing
    there), `PayloadReferenceError` (not one of this store's references: never fetched)."""

    @abc.abstractmethod
    def reference(self, name: str) -> str:
        """The reference (a URL) of what is stored under `name`: known before it is stored,
        the same for every retry."""

    @abc.abstractmethod
    def put(self, name: str, body: bytes, *, content_type: str) -> None:
        """Store `body` under `name`, replacing what is there (a retry writes the same bytes)."""

    @abc.abstractmethod
    def get(self, reference: str) -> bytes:
        """The body a reference of this store names."""


@dataclass(frozen=True)
class QuarantinedEvent:
    """A quarantine record: the event set aside (parsed as the relay parses it: `event` is what
    a replay sends again), why, when, how often it was replayed, and whether it is resolved."""

    event_id: str
    aggregate_type: str | None
    #: the event's partition: its aggregate's id
    aggregate_id: str
    action: str | None
    version: int | None
    reason: str
    quarantined_at: datetime | None
    replays: int
    resolved_at: datetime | None
    event: OutboxRecord | Unreadable = field(repr=False)

    @property
    def resolved(self) -> bool:
        return self.resolved_at is not None


class Quarantine(abc.ABC):
    """Keeps stored events that cannot become messages, with the reason; lists, replays'
    outcomes and discards them."""

    @abc.abstractmethod
    def put(self, event: OutboxRecord | Unreadable, *, reason: str) -> None:
        """Keep the event with the reason (idempotent: the same event is one record)."""

    @abc.abstractmethod
    def get(self, event_id: str) -> QuarantinedEvent:
        """The record of an event, resolved or not. Raises NotFoundError."""

    @abc.abstractmethod
    def list_page(self, *, page_size: int,
                  continuation: str | None) -> Page[QuarantinedEvent]:
        """One page of records (resolved ones too, until they expire), and the next token."""

    @abc.abstractmethod
    def count(self) -> int:
        """How many records are not resolved."""

    @abc.abstractmethod
    def replayed(self, entry: QuarantinedEvent, *, resolved: bool, reason: str,
                 ttl_seconds: int) -> QuarantinedEvent:
        """Record a replay of `entry` (as read before the replay): resolved (kept, expiring
        after `ttl_seconds`) or still quarantined with the new reason; replays + 1."""

    @abc.abstractmethod
    def discard(self, entry: QuarantinedEvent) -> None:
        """Delete the record. Raises NotFoundError when it is gone already."""


class EventStore(abc.ABC):
    """The event documents still stored (not yet expired), for a re-drive."""

    @abc.abstractmethod
    def events_since(
        self, since: datetime, *, aggregate_type: str | None = None,
        aggregate_id: str | None = None,
    ) -> list[OutboxRecord | Unreadable]:
        """Every stored event created at or after `since`, of one aggregate type and one
        aggregate if given (an aggregate id is read in its own partition)."""


@dataclass(frozen=True)
class LeaseBacklog:
    """One lease: the estimated number of changes after its checkpoint, and when the first of
    them was written (epoch seconds; None when nothing is pending)."""

    lease: str
    pending: int
    oldest_created_at: float | None
    #: the instance holding the lease, and when it last wrote it (ISO 8601), when known
    owner: str | None = None
    checkpoint_at: str | None = None


class BacklogEstimator(abc.ABC):
    """Estimates the change-feed backlog of the relay's leases the way the Cosmos DB change feed
    estimator does: from each lease's continuation, the position and creation time of the
    first unprocessed change, and the latest position of the range. Reads no more than that."""

    @abc.abstractmethod
    def estimate(self) -> list[LeaseBacklog]: ...
