"""Command and query handlers for contacts. Each command runs in one unit of work and commits
at most one atomic batch; the write is conditional on the etag read (or the one the client sent)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from application.commands import (
    CreateContact,
    PatchContact,
    UpdateCompany,
    UpdateDescription,
    UpdateEmail,
    UpdateName,
)
from application.conditional import Outcome, Preconditions
from application.errors import ContactNotFoundError, PreconditionFailedError
from application.ports import Page, UnitOfWork
from domain.contact import Contact
from domain.values import Company, Name

MAX_PAGE_SIZE = 100

#: The preconditions of a write: parsed ones, or one etag as the store gave it (`If-Match`).
type Condition = Preconditions | str | None


@dataclass(frozen=True)
class Versioned:
    """A contact and the etag of the stored version it was read from or written as."""

    contact: Contact
    etag: str


class ContactService:
    def __init__(self, uow: Callable[[], UnitOfWork]) -> None:
        self._uow = uow

    def create(self, command: CreateContact, *, traceparent: str | None = None) -> Versioned:
        contact = Contact.create(
            name=Name(first_name=command.first_name, last_name=command.last_name),
            email=command.email,
            description=command.description,
            company=command.to_company(),
        )
        with self._uow() as uow:
            uow.contacts.add(contact)
            uow.commit(traceparent=traceparent)
            return Versioned(contact, uow.contacts.etag(contact.id))

    def get(self, contact_id: str) -> Versioned:
        with self._uow() as uow:
            contact = _live(uow, contact_id)
            return Versioned(contact, uow.contacts.etag(contact_id))

    def list_page(self, *, page_size: int, continuation: str | None) -> Page:
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page size must be 1..{MAX_PAGE_SIZE}")
        with self._uow() as uow:
            return uow.contacts.list_page(page_size=page_size, continuation=continuation)

    def patch(
        self,
        contact_id: str,
        command: PatchContact,
        *,
        if_match: Condition = None,
        traceparent: str | None = None,
    ) -> Versioned:
        def change(contact: Contact) -> None:
            if command.name is not None:
                contact.rename(command.name)
            if command.email is not None:
                contact.change_email(command.email)
            if command.description is not None:
                contact.describe(command.description)
            if command.company is not None:
                contact.move_to(command.company)

        return self._change(contact_id, change, if_match=if_match, traceparent=traceparent)

    def update_name(
        self, contact_id: str, command: UpdateName, *, if_match: Condition = None,
        traceparent: str | None = None,
    ) -> Versioned:
        name = Name(first_name=command.first_name, last_name=command.last_name)
        return self._change(
            contact_id, lambda c: c.rename(name), if_match=if_match, traceparent=traceparent
        )

    def update_email(
        self, contact_id: str, command: UpdateEmail, *, if_match: Condition = None,
        traceparent: str | None = None,
    ) -> Versioned:
        return self._change(
            contact_id,
            lambda c: c.change_email(command.email),
            if_match=if_match,
            traceparent=traceparent,
        )

    def update_description(
        self, contact_id: str, command: UpdateDescription, *, if_match: Condition = None,
        traceparent: str | None = None,
    ) -> Versioned:
        return self._change(
            contact_id,
            lambda c: c.describe(command.description),
            if_match=if_match,
            traceparent=traceparent,
        )

    def update_company(
        self, contact_id: str, command: UpdateCompany, *, if_match: Condition = None,
        traceparent: str | None = None,
    ) -> Versioned:
        company = Company.model_validate(command.model_dump())
        return self._change(
            contact_id, lambda c: c.move_to(company), if_match=if_match, traceparent=traceparent
        )

    def delete(
        self, contact_id: str, *, if_match: Condition = None, traceparent: str | None = None
    ) -> Versioned:
        return self._change(
            contact_id, lambda c: c.delete(), if_match=if_match, traceparent=traceparent
        )

    def _change(
        self,
        contact_id: str,
        change: Callable[[Contact], None],
        *,
        if_match: Condition,
        traceparent: str | None,
    ) -> Versioned:
        conditions = Preconditions.matching(if_match) if isinstance(if_match, str) else if_match
        with self._uow() as uow:
            contact = _live(uow, contact_id)
            # The write itself stays conditional on the etag read here (the unit of work), so a
            # request without preconditions still cannot overwrite a concurrent change.
            if conditions is not None and conditions.evaluate(
                uow.contacts.etag(contact_id), safe=False
            ) is not Outcome.PROCEED:
                raise PreconditionFailedError(f"contact {contact_id}: a precondition failed")
            change(contact)
            uow.commit(traceparent=traceparent)
            return Versioned(contact, uow.contacts.etag(contact_id))


def _live(uow: UnitOfWork, contact_id: str) -> Contact:
    contact = uow.contacts.get(contact_id)
    if contact.deleted:
        raise ContactNotFoundError(contact_id)
    return contact
