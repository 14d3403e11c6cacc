"""The one contact-specific port: the list of live contacts (a query the store answers from its
index; every other read and write goes through the generic unit of work)."""

from __future__ import annotations

import abc
from dataclasses import dataclass

from cosmos_outbox.ports import Page


@dataclass(frozen=True)
class ContactSummary:
    id: str
    email: str
    full_name: str
    company_name: str


class ContactList(abc.ABC):
    """Live (not deleted) contacts, one page at a time. Awaited, as the outbox's ports are: an
    adapter on a sync client completes without suspending (the app's sync shape runs it in its
    function's thread)."""

    @abc.abstractmethod
    async def list_page(self, *, page_size: int, continuation: str | None) -> Page[ContactSummary]:
        """One page of live contacts, and the store's token of the next page if any. Raises
        InvalidContinuationError for a token the store does not accept."""
