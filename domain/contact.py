"""The Contact aggregate. It records the events its changes raise; the unit of work drains them.
Its fields are its stored state: the stored document and the API view are derived from them."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from cosmos_outbox._domain import Aggregate, utcnow
from domain.errors import ContactDeletedError
from domain.events import (
    ContactCompanyUpdated,
    ContactCreated,
    ContactDeleted,
    ContactDescriptionUpdated,
    ContactEmailUpdated,
    ContactNameUpdated,
)
from domain.values import DESCRIPTION, EMAIL, Company, Description, EmailAddress, Name


class Contact(Aggregate):
    aggregate_type: ClassVar[str] = "contact"
    collection: ClassVar[str] = "contacts"

    name: Name
    email: EmailAddress
    description: Description = ""
    company: Company
    created_at: datetime
    modified_at: datetime
    deleted: bool = False
    deleted_at: datetime | None = None

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
        now = utcnow()
        contact = cls.model_validate({
            "name": name, "email": email, "description": description, "company": company,
            "created_at": now, "modified_at": now, **({"id": contact_id} if contact_id else {}),
        })
        contact._record(
            ContactCreated, at=now, name=contact.name, email=contact.email,
            description=contact.description, company=contact.company,
        )
        return contact

    def change(
        self,
        *,
        name: Name | None = None,
        email: str | None = None,
        description: str | None = None,
        company: Company | None = None,
    ) -> None:
        """Change any of the aspects given, in this order; each one that differs raises its
        event, one that is unchanged raises nothing."""
        if name is not None:
            self.rename(name)
        if email is not None:
            self.change_email(email)
        if description is not None:
            self.describe(description)
        if company is not None:
            self.move_to(company)

    def rename(self, name: Name) -> None:
        if self._unchanged(self.name, name):
            return
        self.name = name
        self._change(ContactNameUpdated, name=name)

    def change_email(self, email: str) -> None:
        email = EMAIL.validate_python(email)
        if self._unchanged(self.email, email):
            return
        self.email = email
        self._change(ContactEmailUpdated, email=email)

    def describe(self, description: str) -> None:
        description = DESCRIPTION.validate_python(description)
        if self._unchanged(self.description, description):
            return
        self.description = description
        self._change(ContactDescriptionUpdated, description=description)

    def move_to(self, company: Company) -> None:
        if self._unchanged(self.company, company):
            return
        self.company = company
        self._change(ContactCompanyUpdated, company=company)

    def delete(self) -> None:
        self._refuse_if_deleted()
        now = utcnow()
        self.deleted = True
        self.deleted_at = now
        self._change(ContactDeleted, deleted_at=now, at=now)

    @property
    def live(self) -> bool:
        """A deleted contact is gone for its readers (404), though its document stays."""
        return not self.deleted

    def _touched(self, at: datetime) -> None:
        self.modified_at = at

    def _unchanged(self, current: object, new: object) -> bool:
        self._refuse_if_deleted()
        return current == new

    def _refuse_if_deleted(self) -> None:
        if self.deleted:
            raise ContactDeletedError(self.id)
