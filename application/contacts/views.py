"""What the contact routes answer. The contact as returned (`ContactView`) is derived from the
Contact model itself: a field added to the contact appears in the API without being listed
here."""

from __future__ import annotations

from application.contacts.ports import ContactSummary
from cosmos_outbox.http import Model, PageView, view_of
from cosmos_outbox.ports import Page
from domain.contact import Contact

ContactView = view_of(Contact, name="ContactView", hidden={"deleted", "deleted_at"})
"""A contact as returned: every field of the contact but its deletion marks."""


class ContactListItem(Model):
    id: str
    email: str
    full_name: str
    company_name: str

    @classmethod
    def of(cls, summary: ContactSummary) -> ContactListItem:
        return cls(
            id=summary.id,
            email=summary.email,
            full_name=summary.full_name,
            company_name=summary.company_name,
        )


class ContactPage(PageView):
    items: list[ContactListItem]

    @classmethod
    def of(cls, page: Page[ContactSummary]) -> ContactPage:
        return cls.of_items([ContactListItem.of(s) for s in page.items], page.continuation_token)
