"""Run a lease protocol flow (``_protocol``) against an aio lease store and feed source. See
``cosmos_changefeed._drive``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from cosmos_changefeed._drive import Patience
from cosmos_changefeed._protocol import (
    Create,
    Delete,
    Flow,
    ListDocuments,
    Op,
    Read,
    ReadContainerRid,
    ReadPage,
    ReadRanges,
    Replace,
    Sleep,
    StoreFacts,
)
from cosmos_changefeed.aio._feed_async import FeedSource
from cosmos_changefeed.aio._store_async import LeaseStore


async def drive(
    flow: Flow,
    store: LeaseStore,
    reader: FeedSource,
    sleep: Callable[[float], Awaitable[object]],
    patience: Patience | None = None,
) -> Any:
    """The flow's result (its return value); ``patience``: see ``cosmos_changefeed._drive``."""
    send: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = flow.throw(error) if error is not None else flow.send(send)
        except StopIteration as done:
            return done.value
        send, error = None, None
        failures = 0
        while True:
            try:
                send = await _perform(op, store, reader, sleep)
            except Exception as exc:
                failures += 1
                wait = patience(exc, failures) if patience is not None else None
                if wait is None:
                    error = exc
                    break
            except BaseException:
                flow.close()
                raise
            else:
                break
            try:
                await sleep(wait)
            except BaseException:
                flow.close()
                raise


async def _perform(
    op: Op, store: LeaseStore, reader: FeedSource, sleep: Callable[[float], Awaitable[object]]
) -> Any:
    if isinstance(op, ListDocuments):
        return await store.list_documents(op.prefix)
    if isinstance(op, Read):
        return await store.read(op.item_id, op.partition_key)
    if isinstance(op, Create):
        return await store.create(op.document, op.partition_key)
    if isinstance(op, Replace):
        return await store.replace(op.document, op.partition_key, op.etag)
    if isinstance(op, Delete):
        return await store.delete(op.item_id, op.partition_key, op.etag)
    if isinstance(op, ReadRanges):
        return await reader.ranges(force_refresh=op.force_refresh)
    if isinstance(op, ReadPage):
        return await reader.read(
            op.lease, op.position, op.start, mode=op.mode, max_items=op.max_items
        )
    if isinstance(op, Sleep):
        return await sleep(op.seconds)
    if isinstance(op, ReadContainerRid):
        return await reader.container_rid()
    if isinstance(op, StoreFacts):
        return await store.partition_key_path(), await store.expires_documents()
    raise TypeError(f"not a lease store operation: {op!r}")
