"""The Contact aggregate and its events. It records the events its changes raise; the unit of
work writes them with it. Its fields are its stored state: the stored document and the API view
are derived from them. The events keep the reference sample's actions (`ContactCreatedEvent`,
...), so its subscribers keep working; each carries the contact's values it names."""

from __future__ import annotations

from datetime import UTC, datetime

from cosmos_outbox.aggregates import Aggregate, Event
from domain.errors import ContactDeletedError
from domain.values import DESCRIPTION, EMAIL, Company, Description, EmailAddress, Name


class Contact(Aggregate):
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
        now = datetime.now(UTC)
        contact = cls.model_validate(
            {
                "name": name,
                "email": email,
                "description": description,
                "company": company,
                "created_at": now,
                "modified_at": now,
                **({"id": contact_id} if contact_id else {}),
            }
        )
        contact.record(ContactCreated, at=now)
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
        self.record(ContactNameUpdated)

    def change_email(self, email: str) -> None:
        email = EMAIL.validate_python(email)
        if self._unchanged(self.email, email):
            return
        self.email = email
        self.record(ContactEmailUpdated)

    def describe(self, description: str) -> None:
        description = DESCRIPTION.validate_python(description)
        if self._unchanged(self.description, description):
            return
        self.description = description
        self.record(ContactDescriptionUpdated)

    def move_to(self, company: Company) -> None:
        if self._unchanged(self.company, company):
            return
        self.company = company
        self.record(ContactCompanyUpdated)

    def delete(self) -> None:
        self._refuse_if_deleted()
        now = datetime.now(UTC)
        self.deleted = True
        self.deleted_at = now
        self.record(ContactDeleted, at=now)

    @property
    def live(self) -> bool:
        """A deleted contact is gone for its readers (404), though its document stays."""
        return not self.deleted

    def on_recorded(self, event: Event) -> None:
        self.modified_at = event.created_at

    def _unchanged(self, current: object, new: object) -> bool:
        self._refuse_if_deleted()
        return current == new

    def _refuse_if_deleted(self) -> None:
        if self.deleted:
            raise ContactDeletedError(self.id)


@Contact.event("ContactCreatedEvent")
class ContactCreated(Event):
    name: Name
    email: str
    description: str
    company: Company


@Contact.event("ContactNameUpdatedEvent")
class ContactNameUpdated(Event):
    name: Name


@Contact.event("ContactEmailUpdatedEvent")
class ContactEmailUpdated(Event):
    email: str


@Contact.event("ContactDescriptionUpdatedEvent")
class ContactDescriptionUpdated(Event):
    description: str


@Contact.event("ContactCompanyUpdatedEvent")
class ContactCompanyUpdated(Event):
    company: Company


@Contact.event("ContactDeletedEvent")
class ContactDeleted(Event):
    deleted_at: datetime
