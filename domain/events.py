"""The contact's events: frozen, self-identifying (aggregate type, contact id, version, time),
named as in the reference sample so its subscribers keep working. Each registers itself in the
catalogue (`cosmos_outbox._domain.EVENTS`) under `contact` and its action when it is defined."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import ConfigDict

from cosmos_outbox._domain import DomainEvent, event_aliases
from domain.values import Company, Name


class ContactEvent(DomainEvent):
    """Something that happened to one contact; `contactId` on the wire."""

    model_config = ConfigDict(alias_generator=event_aliases("contact"))
    aggregate_type: ClassVar[str] = "contact"


class ContactCreated(ContactEvent):
    action: Literal["ContactCreatedEvent"] = "ContactCreatedEvent"
    name: Name
    email: str
    description: str
    company: Company


class ContactNameUpdated(ContactEvent):
    action: Literal["ContactNameUpdatedEvent"] = "ContactNameUpdatedEvent"
    name: Name


class ContactEmailUpdated(ContactEvent):
    action: Literal["ContactEmailUpdatedEvent"] = "ContactEmailUpdatedEvent"
    email: str


class ContactDescriptionUpdated(ContactEvent):
    action: Literal["ContactDescriptionUpdatedEvent"] = "ContactDescriptionUpdatedEvent"
    description: str


class ContactCompanyUpdated(ContactEvent):
    action: Literal["ContactCompanyUpdatedEvent"] = "ContactCompanyUpdatedEvent"
    company: Company


class ContactDeleted(ContactEvent):
    action: Literal["ContactDeletedEvent"] = "ContactDeletedEvent"
    deleted_at: datetime
