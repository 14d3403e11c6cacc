"""Ports: the small abstract classes the use cases depend on. Fakes subclass them in tests and
adapters in `infra/` implement them; one contract suite holds both to the same behaviour."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from domain.contact import Contact
from domain.events import DomainEvent


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


class ContactRepository(abc.ABC):
    """Contacts of one unit of work. Remembers the etag of every contact it loaded or wrote."""

    @abc.abstractmethod
    def add(self, contact: Contact) -> None:
        """Track a new contact; it is created on commit."""

    @abc.abstractmethod
    def get(self, contact_id: str) -> Contact:
        """Load a contact (deleted ones too). Raises ContactNotFoundError."""

    @abc.abstractmethod
    def etag(self, contact_id: str) -> str:
        """The etag of the contact as last read or written in this unit of work."""

    @abc.abstractmethod
    def list_page(self, *, page_size: int, continuation: str | None) -> Page:
        """One page of live (not deleted) contacts, and the token of the next page if any."""


class TrackingRepository(ContactRepository):
    """The bookkeeping every implementation shares: which contacts this unit of work loaded or
    added, and the etag each was read or written with. Subclasses only read and list."""

    def __init__(self) -> None:
        self.tracked: dict[str, Contact] = {}
        self.new: set[str] = set()
        self.etags: dict[str, str] = {}

    def add(self, contact: Contact) -> None:
        self.tracked[contact.id] = contact
        self.new.add(contact.id)

    def etag(self, contact_id: str) -> str:
        return self.etags[contact_id]

    def loaded(self, contact: Contact, etag: str) -> Contact:
        self.tracked[contact.id] = contact
        self.etags[contact.id] = etag
        return contact

    def pending(self) -> Iterator[tuple[Contact, list[DomainEvent], str | None]]:
        """Each contact to write, the events it raised, and the etag to condition on (None
        for a new contact). Unchanged contacts are skipped."""
        for contact_id, contact in self.tracked.items():
            events = contact.collect_events()
            if events or contact_id in self.new:
                yield contact, events, None if contact_id in self.new else self.etags[contact_id]

    def written(self, contact_id: str, etag: str) -> None:
        self.new.discard(contact_id)
        self.etags[contact_id] = etag

    def forget(self) -> None:
        for contact in self.tracked.values():
            contact.collect_events()
        self.tracked.clear()
        self.new.clear()


class UnitOfWork(abc.ABC):
    """Nothing is written unless `commit()` runs; a commit writes each changed contact and the
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
    def commit(self, *, traceparent: str | None = None) -> None:
        """Write the tracked changes atomically. Raises PreconditionFailedError when a contact
        changed since it was loaded, AlreadyExistsError on an id collision."""

    @abc.abstractmethod
    def rollback(self) -> None:
        """Forget every uncommitted change."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Check the store is reachable (health). Raises TransientStoreError if not."""


@dataclass(frozen=True)
class OutboxMessage:
    """One event as a broker message: MessageId = event id, SessionId = contact id."""

    message_id: str
    session_id: str
    subject: str
    version: int
    body: bytes
    application_properties: dict[str, str | int]
    content_type: str = "application/json"


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


class Quarantine(abc.ABC):
    """Keeps event documents that cannot become messages, with the reason. Idempotent."""

    @abc.abstractmethod
    def put(self, document: dict[str, Any], *, reason: str) -> None: ...
