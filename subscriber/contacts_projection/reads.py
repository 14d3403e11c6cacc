"""Reading the projection: one contact's, and the projections a page at a time. The port
(`ProjectionReads`), its Cosmos DB adapter (point read; a query on the indexed `/type`), the
view a client gets, and the errors of the store as the HTTP side answers them."""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import (
    CosmosClientTimeoutError,
    CosmosHttpResponseError,
    CosmosResourceNotFoundError,
)

from contacts_projection.projection import PROJECTION_TYPE
from cosmos_outbox.cosmos import query_page

# Served by the indexed `/type` path (deploy/modules/cosmos.bicep: `/type/?` only).
LIST_QUERY = ("SELECT c.id, c.version, c.lastEventId, c.deleted, c.data FROM c "
              "WHERE c.type = 'contactProjection'")


@dataclass(frozen=True)
class ProjectionPage:
    items: list[dict[str, Any]]
    #: the store's token of the next page; None on the last
    continuation: str | None


class StoreError(Exception):
    """The store failed: `status` 503 (unavailable, timed out) or 429 (throttled), with the
    seconds to wait; 400 for a continuation the store refused."""

    def __init__(self, status: int, retry_after: float = 1.0) -> None:
        super().__init__(f"the store answered {status}")
        self.status = status
        self.retry_after = retry_after


class ProjectionReads(abc.ABC):
    """What the projection's HTTP routes read."""

    @abc.abstractmethod
    def get(self, contact_id: str) -> dict[str, Any] | None:
        """The view of a contact's projection; None when there is none. Raises StoreError."""

    @abc.abstractmethod
    def page(self, *, size: int, continuation: str | None) -> ProjectionPage:
        """Up to `size` views and the store's token of the next page. Raises StoreError."""


def view(document: Mapping[str, Any]) -> dict[str, Any]:
    """What a client sees of a projection: the contact's data as projected, the version (of
    the last event applied), that event's id, and whether the contact is deleted."""
    return {
        "id": document["id"],
        "version": document.get("version"),
        "lastEventId": document.get("lastEventId"),
        "deleted": bool(document.get("deleted")),
        "data": dict(document.get("data") or {}),
    }


class CosmosProjectionReads(ProjectionReads):
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def get(self, contact_id: str) -> dict[str, Any] | None:
        with _store_errors():
            try:
                document = self._container.read_item(contact_id, partition_key=contact_id)
            except CosmosResourceNotFoundError:
                return None
        return view(document) if document.get("type") == PROJECTION_TYPE else None

    def page(self, *, size: int, continuation: str | None) -> ProjectionPage:
        with _store_errors():
            rows, token = query_page(self._container, LIST_QUERY, size, continuation)
        return ProjectionPage([view(r) for r in rows], token)


@contextmanager
def _store_errors() -> Iterator[None]:
    try:
        yield
    except CosmosClientTimeoutError:
        raise StoreError(503) from None
    except CosmosHttpResponseError as exc:
        status = int(exc.status_code or 503)
        if status == 429:
            retry = (exc.headers or {}).get("x-ms-retry-after-ms")
            raise StoreError(429, float(retry) / 1000 if retry and retry.isdigit() else 1.0) \
                from None
        raise StoreError(400 if status == 400 else 503) from None
    except (ServiceRequestError, ServiceResponseError):
        raise StoreError(503) from None
