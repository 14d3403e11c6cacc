"""The business rules a contact refuses a change by."""

from __future__ import annotations

from cosmos_outbox.aggregates import DomainError


class ContactDeletedError(DomainError):
    """A deleted contact refuses every change."""

    def __init__(self, contact_id: str) -> None:
        super().__init__(f"contact {contact_id} is deleted")
        self.contact_id = contact_id
