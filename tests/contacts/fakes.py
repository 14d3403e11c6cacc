"""The in-memory fake of the Contacts app's own port (the contact list), held to the same
contract as its Cosmos DB adapter (tests/contacts/store/unit_of_work_contract.py). The fakes
of the outbox's ports are cosmos-outbox's (`cosmos_outbox_testing`)."""

from __future__ import annotations

from application.contacts.ports import ContactList, ContactSummary
from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.ports import Page
from cosmos_outbox_testing import InMemoryStore
from domain.contact import Contact


class InMemoryContactList(ContactList):
    """The live contacts of an in-memory store, by id, as the Cosmos query lists them."""

    def __init__(self, store: InMemoryStore) -> None:
        self._store = store

    async def list_page(self, *, page_size: int, continuation: str | None) -> Page[ContactSummary]:
        live = sorted(
            (d for d in self._store.of_type(Contact.aggregate_type) if not d["data"]["deleted"]),
            key=lambda d: d["id"],
        )
        start = 0
        if continuation is not None:
            if not continuation.startswith("mem:") or not continuation[4:].isdigit():
                raise InvalidContinuationError("bad continuation token")
            start = int(continuation[4:])
        rows = live[start : start + page_size]
        end = start + len(rows)
        items = [
            ContactSummary(
                id=d["id"],
                email=d["data"]["email"],
                full_name=f"{d['data']['name']['firstName']} {d['data']['name']['lastName']}",
                company_name=d["data"]["company"]["companyName"],
            )
            for d in rows
        ]
        return Page(items=items, continuation_token=f"mem:{end}" if end < len(live) else None)
