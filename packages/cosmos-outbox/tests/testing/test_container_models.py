"""The test kit's in-memory container and cosmos-changefeed's agree: the kit's store
(`cosmos_outbox_testing.InMemoryStore`) keeps its documents in cosmos-changefeed's model of a
Cosmos DB container (`InMemoryFeed`), as the change feed processor's in-memory lease store
(`InMemoryDocuments`) does; the same scenario -- an etag and a `_ts` at each write, time to live
as Cosmos DB's: `ttl: -1` never, a positive `ttl` that many seconds after the last write, none
the container's default (-1: never) -- holds on all three."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import pytest

from cosmos_changefeed import InMemoryDocuments
from cosmos_changefeed.testing import InMemoryFeed, VirtualClock
from cosmos_outbox_testing import InMemoryStore

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Container(Protocol):
    """One model under test: write a document, read it back, let time pass."""

    def write(self, document: Mapping[str, Any]) -> dict[str, Any]: ...

    def read(self, item_id: str) -> dict[str, Any] | None: ...

    async def elapse(self, seconds: int) -> None: ...


class Kit:
    def __init__(self) -> None:
        self.now = START.timestamp()
        self.store = InMemoryStore(clock=lambda: self.now)

    def write(self, document: Mapping[str, Any]) -> dict[str, Any]:
        return self.store.upsert({**document, "partitionKey": "p"})

    def read(self, item_id: str) -> dict[str, Any] | None:
        return self.store.read("p", item_id)

    async def elapse(self, seconds: int) -> None:
        self.store.elapse(seconds)


class Feed:
    def __init__(self) -> None:
        self.now = START
        self.feed = InMemoryFeed(partition_key_path="/partitionKey", clock=lambda: self.now)

    def write(self, document: Mapping[str, Any]) -> dict[str, Any]:
        return self.feed.upsert({**document, "partitionKey": "p"})

    def read(self, item_id: str) -> dict[str, Any] | None:
        self.feed.expire()
        return self.feed.document(item_id, "p")

    async def elapse(self, seconds: int) -> None:
        self.now += dt.timedelta(seconds=seconds)


class LeaseDocuments:
    """The processor's lease store's documents, on the processor's clock: the scenario's
    virtual time (``VirtualClock``)."""

    def __init__(self) -> None:
        self.documents = InMemoryDocuments()

    def write(self, document: Mapping[str, Any]) -> dict[str, Any]:
        item_id = str(document["id"])
        current = self.documents.read(item_id, item_id)
        if current is None:
            written = self.documents.create(document, item_id)
        else:
            written = self.documents.replace(document, item_id, current["_etag"])
        assert written is not None
        return written

    def read(self, item_id: str) -> dict[str, Any] | None:
        return self.documents.read(item_id, item_id)

    async def elapse(self, seconds: int) -> None:
        await asyncio.sleep(seconds)


async def scenario(model: Container) -> None:
    first = model.write({"id": "never", "ttl": -1})
    again = model.write({"id": "never", "ttl": -1, "n": 2})
    assert first["_etag"] != again["_etag"] and type(again["_ts"]) is int
    model.write({"id": "short", "ttl": 10})
    model.write({"id": "default"})
    await model.elapse(9)
    assert model.read("short") is not None
    await model.elapse(1)
    assert model.read("short") is None
    await model.elapse(30 * 24 * 3600)  # a month
    kept = model.read("never")
    assert kept is not None and kept["n"] == 2 and kept["_etag"] == again["_etag"]
    assert model.read("default") is not None


@pytest.mark.parametrize("make", [Kit, Feed, LeaseDocuments], ids=["kit", "feed", "leases"])
def test_etags_and_time_to_live_as_cosmos_db_keeps_them_in_every_in_memory_model(
    make: Callable[[], Container],
) -> None:
    """Run under a virtual clock: the lease documents read the processor's clock, which it
    sets; the other two are given their time."""
    VirtualClock(START).run(scenario(make()))


def test_the_kit_and_the_processor_keep_their_documents_in_the_one_model() -> None:
    assert type(InMemoryStore().feed) is InMemoryFeed
    assert type(InMemoryDocuments().feed) is InMemoryFeed
