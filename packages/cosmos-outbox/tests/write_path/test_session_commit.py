"""A transaction's commit with nothing staged makes no round trip (the store is never called: a
failure armed for its next batch is still armed after it), sync and async."""

from __future__ import annotations

import asyncio

from cosmos_outbox import Outbox
from cosmos_outbox.aio import Outbox as AsyncOutbox
from cosmos_outbox.errors import StoreUnavailableError
from cosmos_outbox_testing import in_memory


def test_an_empty_commit_makes_no_round_trip() -> None:
    outbox = Outbox()
    with in_memory(outbox) as memory:
        memory.store.fail_next = StoreUnavailableError("down")
        with outbox.transaction("c-1", entity="customer") as tx:
            committed = tx.commit()
        assert (tuple(committed.etags), tuple(committed.events)) == ((), ())
        assert memory.store.batches == 0 and memory.store.fail_next is not None


def test_an_empty_async_commit_makes_no_round_trip() -> None:
    outbox = AsyncOutbox()

    async def commit() -> None:
        async with outbox.transaction("c-1", entity="customer") as tx:
            committed = await tx.commit()
        assert (tuple(committed.etags), tuple(committed.events)) == ((), ())

    with in_memory(outbox) as memory:
        memory.store.fail_next = StoreUnavailableError("down")
        asyncio.run(commit())
        assert memory.store.batches == 0 and memory.store.fail_next is not None
