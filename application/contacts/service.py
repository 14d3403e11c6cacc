"""Command and query handlers for contacts. Each command runs in one unit of work and commits
at most one atomic batch; the write is conditional on the etag read (or the one the client sent)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from application.conditional import Outcome, Preconditions
from application.contacts.commands import CreateContact, PatchContact
from application.contacts.ports import ContactList, ContactSummary
from application.errors import NotFoundError, PreconditionFailedError
from application.ports import Page, UnitOfWork
from domain.contact import Contact

MAX_PAGE_SIZE = 100

#: The preconditions of a write: parsed ones, or one etag as the store gave it (`If-Match`).
type Condition = Preconditions | str | None


@dataclass(frozen=True)
class Versioned:
    """A contact and the etag of the stored version it was read from or written as."""

    contact: Contact
    etag: str


class ContactService:
    def __init__(self, uow: Callable[[], UnitOfWork], contacts: Callable[[], ContactList]) -> None:
        self._uow = uow
        self._contacts = contacts

    def create(self, command: CreateContact, *, traceparent: str | None = None) -> Versioned:
        contact = Contact.create(**command.fields())
        with self._uow() as uow:
            contacts = uow.repository(Contact)
            contacts.add(contact)
            uow.commit(traceparent=traceparent)
            return Versioned(contact, contacts.etag(contact.id))

    def get(self, contact_id: str) -> Versioned:
        with self._uow() as uow:
            contact = _live(uow, contact_id)
            return Versioned(contact, uow.repository(Contact).etag(contact_id))

    def list_page(self, *, page_size: int, continuation: str | None) -> Page[ContactSummary]:
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page size must be 1..{MAX_PAGE_SIZE}")
        return self._contacts().list_page(page_size=page_size, continuation=continuation)

    def patch(
        self,
        contact_id: str,
        command: PatchContact,
        *,
        preconditions: Condition = None,
        traceparent: str | None = None,
    ) -> Versioned:
        """Change the aspects sent (one event per changed aspect, all in one batch)."""
        return self._change(contact_id, lambda c: c.change(**command.changes()),
                            preconditions=preconditions, traceparent=traceparent)

    def delete(
        self, contact_id: str, *, preconditions: Condition = None,
        traceparent: str | None = None,
    ) -> Versioned:
        return self._change(contact_id, lambda c: c.delete(), preconditions=preconditions,
                            traceparent=traceparent)

    def _change(
        self,
        contact_id: str,
        change: Callable[[Contact], None],
        *,
        preconditions: Condition,
        traceparent: str | None,
    ) -> Versioned:
        conditions = (Preconditions.matching(preconditions) if isinstance(preconditions, str)
                      else preconditions)
        with self._uow() as uow:
            contact = _live(uow, contact_id)
            contacts = uow.repository(Contact)
            # The write itself stays conditional on the etag read here (the unit of work), so a
            # request without preconditions still cannot overwrite a concurrent change.
            if conditions is not None and conditions.evaluate(
                contacts.etag(contact_id), safe=False
            ) is not Outcome.PROCEED:
                raise PreconditionFailedError(f"contact {contact_id}: a precondition failed",
                                              aggregate_type=Contact.aggregate_type)
            change(contact)
            uow.commit(traceparent=traceparent)
            return Versioned(contact, contacts.etag(contact_id))


def _live(uow: UnitOfWork, contact_id: str) -> Contact:
    contact = uow.repository(Contact).get(contact_id)
    if contact.deleted:
        raise NotFoundError(Contact.aggregate_type, contact_id)
    return contact
