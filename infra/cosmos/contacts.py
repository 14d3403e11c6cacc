"""The contact list on Cosmos DB: one indexed query (`deploy/indexing-policy.json` indexes
exactly the paths it filters on: /type and /data/deleted)."""

from __future__ import annotations

from azure.cosmos import ContainerProxy

from application.contacts.ports import ContactList, ContactSummary
from cosmos_outbox.cosmos import query_page
from cosmos_outbox.ports import Page

LIST_CONTACTS_QUERY = (
    "SELECT c.id, c.data.email, c.data.name, c.data.company.companyName FROM c "
    "WHERE c.type = 'contact' AND c.data.deleted = false"
)


class CosmosContactList(ContactList):
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def list_page(self, *, page_size: int,
                  continuation: str | None) -> Page[ContactSummary]:
        rows, token = query_page(self._container, LIST_CONTACTS_QUERY, page_size, continuation)
        items = [
            ContactSummary(
                id=row["id"],
                email=row.get("email", ""),
                full_name=f"{row['name']['firstName']} {row['name']['lastName']}",
                company_name=row.get("companyName", ""),
            )
            for row in rows
        ]
        return Page(items=items, continuation_token=token or None)
