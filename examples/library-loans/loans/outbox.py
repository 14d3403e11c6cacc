"""The library's outbox: its container (COSMOS_CONTAINER, partitioned on /memberId) on the `aio`
SDKs, built from the app settings on first use (no I/O at import); point reads and the app's own
SQL queries through the outbox's store, so that the test kit's in-memory store serves them too."""

from __future__ import annotations

from typing import Any

from cosmos_outbox.aio import Outbox

outbox = Outbox()


async def read(member_id: str, document_id: str) -> dict[str, Any] | None:
    return await outbox.store.read(member_id, document_id)


async def query(
    sql: str, parameters: list[dict[str, Any]] | None = None, *, member_id: str | None = None
) -> list[dict[str, Any]]:
    """The results of one of the app's queries: a member's partition, or every member's."""
    return await outbox.store.query(sql, parameters, partition_key=member_id)
