"""Errors the domain raises when a business rule refuses a change."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every business-rule violation."""


class ContactDeletedError(DomainError):
    """A deleted contact refuses every change."""

    def __init__(self, contact_id: str) -> None:
        super().__init__(f"contact {contact_id} is deleted")
        self.contact_id = contact_id
