"""Ports: the small abstract classes the use cases depend on. Fakes subclass them in tests and
adapters in `infra/` implement them; one contract suite holds both to the same behaviour.

The unit of work and its repositories are generic over aggregates (`domain.aggregate`); the
contact repository adds the one contact-specific query, the list."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType

from application.outbox import OutboxMessage, OutboxRecord, Unreadable
from domain.aggregate import Aggregate, DomainEvent
from domain.contact import Contact


@dataclass(frozen=True)
class ContactSummary:
    id: str
    email: str
    full_name: str
    company_name: str


@dataclass(frozen=True)
class Page:
    items: list[ContactSummary]
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


class ContactRepository(Repository[Contact]):
    """Contacts (deleted ones too, for `get`), and the list of live ones."""

    @abc.abstractmethod
    def list_page(self, *, page_size: int, continuation: str | None) -> Page:
        """One page of live (not deleted) contacts, and the token of the next page if any."""


class TrackingRepository[A: Aggregate](Repository[A]):
    """The bookkeeping every implementation shares: which aggregates this unit of work loaded or
    added, and the etag each was read or written with. Subclasses only read (and list)."""

    def __init__(self, kind: type[A]) -> None:
        self.kind = kind
        self.tracked: dict[str, A] = {}
        self.new: set[str] = set()
        self.etags: dict[str, str] = {}

    def add(self, aggregate: A) -> None:
        self.tracked[aggregate.id] = aggregate
        self.new.add(aggregate.id)

    def get(self, aggregate_id: str) -> A:
        aggregate, etag = self.read(aggregate_id)
        self.tracked[aggregate.id] = aggregate
        self.etags[aggregate.id] = etag
        return aggregate

    @abc.abstractmethod
    def read(self, aggregate_id: str) -> tuple[A, str]:
        """The stored aggregate and its etag. Raises NotFoundError."""

    def etag(self, aggregate_id: str) -> str:
        return self.etags[aggregate_id]

    def pending(self) -> Iterator[tuple[A, list[DomainEvent], str | None]]:
        """Each aggregate to write, the events it raised, and the etag to condition on (None
        for a new one). Unchanged aggregates are skipped."""
        for aggregate_id, aggregate in self.tracked.items():
            events = aggregate.collect_events()
            if events or aggregate_id in self.new:
                etag = None if aggregate_id in self.new else self.etags[aggregate_id]
                yield aggregate, events, etag

    def written(self, aggregate_id: str, etag: str) -> None:
        self.new.discard(aggregate_id)
        self.etags[aggregate_id] = etag

    def forget(self) -> None:
        for aggregate in self.tracked.values():
            aggregate.collect_events()
        self.tracked.clear()
        self.new.clear()


class UnitOfWork(abc.ABC):
    """Nothing is written unless `commit()` runs; a commit writes each changed aggregate and the
    events it raised in one atomic batch, conditioned on the etag it was loaded with."""

    contacts: ContactRepository

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
        """The repository of one aggregate type (`contacts` for Contact)."""

    @abc.abstractmethod
    def commit(self, *, traceparent: str | None = None) -> None:
        """Write the tracked changes atomically, one batch per aggregate. Raises
        PreconditionFailedError when an aggregate changed since it was loaded,
        AlreadyExistsError on an id collision."""

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


class MessagePublisher(abc.ABC):
    """Sends message batches to the topic. `send` either sends the whole batch or raises."""

    @abc.abstractmethod
    def create_batch(self) -> MessageBatch: ...

    @abc.abstractmethod
    def send(self, batch: MessageBatch) -> None: ...

    def refresh(self) -> None:  # noqa: B027  (optional: most publishers have nothing to do)
        """Forget what was learnt of the entity (a link's message size limit), so the next
        batch reads it again: a message too large for an empty batch is re-checked once
        against a fresh link before it is quarantined (the limit may have been raised)."""


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


@dataclass(frozen=True)
class QuarantinePage:
    items: list[QuarantinedEvent]
    continuation_token: str | None


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
    def list_page(self, *, page_size: int, continuation: str | None) -> QuarantinePage:
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
        self, since: datetime, *, aggregate_id: str | None = None
    ) -> list[OutboxRecord | Unreadable]:
        """Every stored event created at or after `since` (of one aggregate if given)."""


__all__ = [
    "ContactRepository", "ContactSummary", "EventStore", "MessageBatch", "MessagePublisher",
    "OutboxMessage", "Page", "Quarantine", "QuarantinePage", "QuarantinedEvent", "Repository",
    "TrackingRepository", "UnitOfWork",
]
