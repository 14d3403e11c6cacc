"""The Contact aggregate. It records the events its changes raise; the unit of work drains them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from domain.errors import ContactDeletedError
from domain.events import (
    ContactCompanyUpdated,
    ContactCreated,
    ContactDeleted,
    ContactDescriptionUpdated,
    ContactEmailUpdated,
    ContactNameUpdated,
    DomainEvent,
    utcnow,
)
from domain.values import DESCRIPTION, EMAIL, Company, Name


@dataclass(eq=False)
class Contact:
    id: str
    name: Name
    email: str
    description: str
    company: Company
    created_at: datetime
    modified_at: datetime
    version: int = 1
    deleted: bool = False
    deleted_at: datetime | None = None
    events: list[DomainEvent] = field(default_factory=list, repr=False)

    @classmethod
    def create(
        cls,
        *,
        name: Name,
        email: str,
        company: Company,
        description: str = "",
        contact_id: str | None = None,
    ) -> Contact:
        email = EMAIL.validate_python(email)
        description = DESCRIPTION.validate_python(description)
        now = utcnow()
        contact = cls(
            id=contact_id or str(uuid.uuid4()),
            name=name,
            email=email,
            description=description,
            company=company,
            created_at=now,
            modified_at=now,
        )
        contact.events.append(
            ContactCreated(
                contact_id=contact.id,
                version=contact.version,
                created_at=now,
                name=name,
                email=email,
                description=description,
                company=company,
            )
        )
        return contact

    def rename(self, name: Name) -> None:
        if self._unchanged(self.name, name):
            return
        self.name = name
        self._raise(ContactNameUpdated, name=name)

    def change_email(self, email: str) -> None:
        email = EMAIL.validate_python(email)
        if self._unchanged(self.email, email):
            return
        self.email = email
        self._raise(ContactEmailUpdated, email=email)

    def describe(self, description: str) -> None:
        description = DESCRIPTION.validate_python(description)
        if self._unchanged(self.description, description):
            return
        self.description = description
        self._raise(ContactDescriptionUpdated, description=description)

    def move_to(self, company: Company) -> None:
        if self._unchanged(self.company, company):
            return
        self.company = company
        self._raise(ContactCompanyUpdated, company=company)

    def delete(self) -> None:
        self._refuse_if_deleted()
        now = utcnow()
        self.deleted = True
        self.deleted_at = now
        self._raise(ContactDeleted, deleted_at=now, at=now)

    def collect_events(self) -> list[DomainEvent]:
        """Hand over the recorded events (in the order they happened) and forget them."""
        drained, self.events = self.events, []
        return drained

    def _unchanged(self, current: object, new: object) -> bool:
        self._refuse_if_deleted()
        return current == new

    def _refuse_if_deleted(self) -> None:
        if self.deleted:
            raise ContactDeletedError(self.id)

    def _raise(
        self, kind: type[DomainEvent], *, at: datetime | None = None, **changes: object
    ) -> None:
        now = at or utcnow()
        self.version += 1
        self.modified_at = now
        self.events.append(
            kind.model_validate(
                {"contact_id": self.id, "version": self.version, "created_at": now, **changes}
            )
        )
