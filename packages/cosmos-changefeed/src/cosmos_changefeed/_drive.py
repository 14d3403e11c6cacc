"""Run a lease protocol flow (``_protocol``) against a sync lease store and feed source: each
operation the flow yields is done and its result sent back, or its error thrown into the flow
(an ``Exception``: the store's refusal, which the flow may handle, or any other, which the flow
raises after what it must undo: the initialisation lock deleted). A ``BaseException`` (an
interrupt; in aio, a cancel) closes the flow, which then yields nothing more, and is raised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from cosmos_changefeed._source import FeedSource
from cosmos_changefeed._store import LeaseStore

#: What a driver asks when an operation failed: the seconds to wait before it is done again
#: (None: the error goes to the flow), given the error and the failures of that operation so far.
Patience = Callable[[Exception, int], "float | None"]


def drive(
    flow: Flow,
    store: LeaseStore,
    reader: FeedSource,
    sleep: Callable[[float], object],
    patience: Patience | None = None,
) -> Any:
    """The flow's result (its return value). ``patience``: an operation that failed is done
    again after the wait it gives (the start waits through a throttled lease container)."""
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
                send = _perform(op, store, reader, sleep)
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
                sleep(wait)
            except BaseException:
                flow.close()
                raise


def _perform(
    op: Op, store: LeaseStore, reader: FeedSource, sleep: Callable[[float], object]
) -> Any:
    if isinstance(op, ListDocuments):
        return store.list_documents(op.prefix)
    if isinstance(op, Read):
        return store.read(op.item_id, op.partition_key)
    if isinstance(op, Create):
        return store.create(op.document, op.partition_key)
    if isinstance(op, Replace):
        return store.replace(op.document, op.partition_key, op.etag)
    if isinstance(op, Delete):
        return store.delete(op.item_id, op.partition_key, op.etag)
    if isinstance(op, ReadRanges):
        return reader.ranges(force_refresh=op.force_refresh)
    if isinstance(op, ReadPage):
        return reader.read(op.lease, op.position, op.start, mode=op.mode, max_items=op.max_items)
    if isinstance(op, Sleep):
        return sleep(op.seconds)
    if isinstance(op, ReadContainerRid):
        return reader.container_rid()
    if isinstance(op, StoreFacts):
        return store.partition_key_path(), store.expires_documents()
    raise TypeError(f"not a lease store operation: {op!r}")
