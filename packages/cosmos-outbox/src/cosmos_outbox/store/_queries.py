"""Paged cross-partition queries, the one way the adapters list documents."""

from __future__ import annotations

from typing import Any

from azure.cosmos import ContainerProxy

from cosmos_outbox.store._errors import cosmos_errors


def one_page(
    container: ContainerProxy, query: str, page_size: int, continuation: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of a cross-partition query and the SDK's token for the next (None: last)."""
    with cosmos_errors():
        pages: Any = container.query_items(
            query, enable_cross_partition_query=True, max_item_count=page_size
        ).by_page(continuation)
        rows: list[dict[str, Any]] = list(next(pages, []))
        token = pages.continuation_token
    return rows, token
