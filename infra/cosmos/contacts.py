"""The contact list on Cosmos DB: one indexed query (`deploy/indexing-policy.json` indexes the
paths it filters on, /type and /data/deleted, beside the library's: docs/indexing.md), on the
SDK's `aio` container (the app's) or its sync one (the app's sync shape,
`bootstrap(asynchronous=False)`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from azure.cosmos import ContainerProxy
from azure.cosmos.aio import ContainerProxy as AsyncContainerProxy

from application.contacts.ports import ContactList, ContactSummary
from cosmos_outbox.cosmos import query_page
from cosmos_outbox.cosmos.aio import query_page as async_query_page
from cosmos_outbox.ports import Page

LIST_CONTACTS_QUERY = (
    "SELECT c.id, c.data.email, c.data.name, c.data.company.companyName FROM c "
    "WHERE c.type = 'contact' AND c.data.deleted = false"
)


def _page(rows: Iterable[dict[str, Any]], token: str | None) -> Page[ContactSummary]:
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


class CosmosContactList(ContactList):
    """On the SDK's `aio` container."""

    def __init__(self, container: AsyncContainerProxy) -> None:
        self._container = container

    async def list_page(self, *, page_size: int, continuation: str | None) -> Page[ContactSummary]:
        return _page(
            *await async_query_page(self._container, LIST_CONTACTS_QUERY, page_size, continuation)
        )


class SyncCosmosContactList(ContactList):
    """On the SDK's sync container: `list_page` completes without suspending."""

    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    async def list_page(self, *, page_size: int, continuation: str | None) -> Page[ContactSummary]:
        return _page(*query_page(self._container, LIST_CONTACTS_QUERY, page_size, continuation))
