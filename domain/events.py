"""Domain events: frozen, self-identifying (contact id, version, time), named as in the
reference sample so its subscribers keep working."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from domain.values import Company, Name


def _new_id() -> str:
    return str(uuid.uuid4())


def utcnow() -> datetime:
    return datetime.now(UTC)


class DomainEvent(BaseModel):
    """Something that happened to one contact. `version` is the contact's version after it."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    id: str = Field(default_factory=_new_id)
    contact_id: str
    version: int = Field(ge=1)
    created_at: datetime = Field(default_factory=utcnow)
    traceparent: str | None = None


class ContactCreated(DomainEvent):
    action: Literal["ContactCreatedEvent"] = "ContactCreatedEvent"
    name: Name
    email: str
    description: str
    company: Company


class ContactNameUpdated(DomainEvent):
    action: Literal["ContactNameUpdatedEvent"] = "ContactNameUpdatedEvent"
    name: Name


class ContactEmailUpdated(DomainEvent):
    action: Literal["ContactEmailUpdatedEvent"] = "ContactEmailUpdatedEvent"
    email: str


class ContactDescriptionUpdated(DomainEvent):
    action: Literal["ContactDescriptionUpdatedEvent"] = "ContactDescriptionUpdatedEvent"
    description: str


class ContactCompanyUpdated(DomainEvent):
    action: Literal["ContactCompanyUpdatedEvent"] = "ContactCompanyUpdatedEvent"
    company: Company


class ContactDeleted(DomainEvent):
    action: Literal["ContactDeletedEvent"] = "ContactDeletedEvent"
    deleted_at: datetime


AnyContactEvent = Annotated[
    ContactCreated
    | ContactNameUpdated
    | ContactEmailUpdated
    | ContactDescriptionUpdated
    | ContactCompanyUpdated
    | ContactDeleted,
    Field(discriminator="action"),
]

EVENT_ADAPTER: TypeAdapter[AnyContactEvent] = TypeAdapter(AnyContactEvent)
ACTIONS: tuple[str, ...] = (
    "ContactCreatedEvent",
    "ContactNameUpdatedEvent",
    "ContactEmailUpdatedEvent",
    "ContactDescriptionUpdatedEvent",
    "ContactCompanyUpdatedEvent",
    "ContactDeletedEvent",
)
