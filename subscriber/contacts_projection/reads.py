"""Reading the projection: one contact's, and the projections a page at a time. The port
(`ProjectionReads`, async: the routes are `async def` functions), its adapter on the projection
container (cosmos-outbox's document store on the SDK's `aio` client: a point read; a page of the
query on the indexed `/type`) and the views a client gets. The
store's failures are cosmos-outbox's errors, translated once by its adapter and answered by its
HTTP layer (`TransientStoreError`: 429/503 with Retry-After; `InvalidContinuationError`: a
continuation the store refused)."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from contacts_projection.projection import PROJECTION_TYPE
from cosmos_outbox.http import Model, PageView
from cosmos_outbox.ports import AsyncDocumentStore, Page


class ProjectionView(Model):
    """What a client sees of a projection: the contact's data as projected, the version (of
    the last event applied), that event's id, and whether the contact is deleted."""

    id: str
    version: int | None
    last_event_id: str | None
    deleted: bool
    data: dict[str, Any]

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> ProjectionView:
        return cls(
            id=document["id"],
            version=document.get("version"),
            last_event_id=document.get("lastEventId"),
            deleted=bool(document.get("deleted")),
            data=dict(document.get("data") or {}),
        )


class ProjectionPage(PageView):
    """One page of the projections: `{items, continuationToken, hasMore}`."""

    items: list[ProjectionView]


class ProjectionReads(abc.ABC):
    """What the projection's HTTP routes read."""

    @abc.abstractmethod
    async def get(self, contact_id: str) -> ProjectionView | None:
        """The view of a contact's projection; None when there is none."""

    @abc.abstractmethod
    async def page(self, *, size: int, continuation: str | None) -> Page[ProjectionView]:
        """Up to `size` views and the store's token of the next page (None on the last)."""


class StoreProjectionReads(ProjectionReads):
    """The reads on the projection container
    (`cosmos_outbox.cosmos.AsyncCosmosDocumentStore`)."""

    def __init__(self, store: AsyncDocumentStore) -> None:
        self._store = store

    async def get(self, contact_id: str) -> ProjectionView | None:
        document = await self._store.read(contact_id, contact_id)
        if document is None or document.get("type") != PROJECTION_TYPE:
            return None
        return ProjectionView.of(document)

    async def page(self, *, size: int, continuation: str | None) -> Page[ProjectionView]:
        found = await self._store.page_of_type(
            PROJECTION_TYPE, page_size=size, continuation=continuation
        )
        return Page([ProjectionView.of(d) for d in found.items], found.continuation_token)
