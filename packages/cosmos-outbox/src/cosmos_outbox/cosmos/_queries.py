"""Paged cross-partition queries, the one way the adapters list documents."""

from __future__ import annotations

from typing import Any

from azure.cosmos import ContainerProxy

from cosmos_outbox.cosmos._errors import cosmos_errors


def query_page(
    container: ContainerProxy, query: str, page_size: int, continuation: str | None,
    **options: Any,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of a cross-partition query and the token of the next (None: last); the SDK's
    errors as they are. `options` go to `query_items` (a `response_hook`, for instance).

    The token is read from this query's own response headers. The SDK pager's
    `continuation_token` reads the client's last response headers instead, and those belong to
    whichever request on the client finished last. With requests on other threads (an app
    serves concurrent invocations on one client), that can be another request's, for example
    a point read's etag. A client then pages with a token that was never this query's."""
    paged = container.query_items(
        query, enable_cross_partition_query=True, max_item_count=page_size, **options
    )
    rows: list[dict[str, Any]] = list(next(paged.by_page(continuation), []))
    token = paged.get_response_headers().get("x-ms-continuation")
    return rows, str(token) if token else None


def one_page(
    container: ContainerProxy, query: str, page_size: int, continuation: str | None,
    **options: Any,
) -> tuple[list[dict[str, Any]], str | None]:
    """`query_page` with the store's failures translated into `cosmos_outbox.errors`."""
    with cosmos_errors():
        return query_page(container, query, page_size, continuation, **options)
