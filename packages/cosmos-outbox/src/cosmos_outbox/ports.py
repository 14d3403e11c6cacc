"""The ports: what the outbox needs of the services it runs on, generic over aggregates. The
write path's unit of work and its repositories, one page of a listing; the broker (a
size-limited batch and its publisher), the claim check's payload store, the quarantine, the
stored events a re-drive reads, and the backlog estimator. The in-memory fakes
(`cosmos_outbox.testing`) and the Azure adapters (`cosmos_outbox.cosmos`, `.servicebus`,
`.blob`) implement them; one contract suite per port holds both to the same behaviour."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType

from cosmos_outbox._domain import Aggregate
from cosmos_outbox._idempotency import IdempotencyRecord
from cosmos_outbox._records import OutboxMessage, OutboxRecord, Unreadable


@dataclass(frozen=True)
class Page[T]:
    """One page of a listing, and the store's token of the next page (None on the last)."""

    items: list[T]
    continuation_token: str | None


class Repository[A: Aggregate](abc.ABC):
    """Aggregates of one type in one unit of work. Remembers the etag of each it loaded or wrote."""

    @abc.abstractmethod
    def add(self, aggregate: A) -> None:
        """Track a new aggregate; it is created on commit."""

    @abc.abstractmethod
    def get(self, aggregate_id: str) -> A:
        """Load an aggregate. Raises NotFoundError."""

    @abc.abstractmethod
    def etag(self, aggregate_id: str) -> str:
        """The etag of the aggregate as last read or written in this unit of work."""


class UnitOfWork(abc.ABC):
    """Nothing is written unless `commit()` runs; a commit writes each changed aggregate and the
    events it raised in one atomic batch, conditioned on the etag it was loaded with."""

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.rollback()

    @abc.abstractmethod
    def repository[A: Aggregate](self, kind: type[A]) -> Repository[A]:
        """The repository of one aggregate type (the same one for the whole unit of work)."""

    @abc.abstractmethod
    def commit(self, *, traceparent: str | None = None) -> None:
        """Write the tracked changes atomically, one batch per aggregate. Raises
        PreconditionFailedError when an aggregate changed since it was loaded,
        AlreadyExistsError on an id collision."""

    @abc.abstractmethod
    def claim(self, record: IdempotencyRecord) -> None:
        """Create `record` (an Idempotency-Key's) at the next commit, in the batch of its
        aggregate (`record.aggregate_id`), so it commits with the change or not at all; when
        that aggregate has nothing to write, the record is written alone. A record of the same
        id already there fails the batch: AlreadyExistsError, nothing written."""

    @abc.abstractmethod
    def recorded(self, aggregate_id: str, record_id: str) -> IdempotencyRecord | None:
        """The idempotency record `record_id` in the aggregate's partition; None when there is
        none (never written, or expired)."""

    @abc.abstractmethod
    def rollback(self) -> None:
        """Forget every uncommitted change."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Check the store is reachable and the container exists (health). Raises
        TransientStoreError if not."""


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
