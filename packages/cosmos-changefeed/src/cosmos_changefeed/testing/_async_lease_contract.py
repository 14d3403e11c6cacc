"""The async lease store's contract (``AsyncLeaseStoreContract``, exported by
``cosmos_changefeed.testing``): its own module, imported when it is first asked for, because its
tests carry pytest-asyncio's mark, and ``pytest.mark.asyncio`` in a run without pytest-asyncio is
a warning (``PytestUnknownMarkWarning``, once per test) or, with ``--strict-markers``, an error:
every run that imported ``cosmos_changefeed.testing`` for its in-memory feed (the outbox's test
kit does) paid for it. A suite that subclasses this contract has pytest-asyncio."""

from __future__ import annotations

import pytest

from cosmos_changefeed._store import NotFoundError, PreconditionFailedError
from cosmos_changefeed.aio._store_async import LeaseStore as AsyncLeaseStore
from cosmos_changefeed.testing import _Documents

__all__ = ["AsyncLeaseStoreContract"]


class AsyncLeaseStoreContract:
    """What every ``cosmos_changefeed.aio.LeaseStore`` does. Subclass it with an async
    ``store`` fixture (pytest-asyncio)."""

    supports_ttl = True

    @pytest.fixture
    def store(self) -> AsyncLeaseStore:
        raise NotImplementedError("subclass AsyncLeaseStoreContract with a `store` fixture")

    async def _docs(self, store: AsyncLeaseStore) -> _Documents:
        return _Documents(await store.partition_key_path())

    @pytest.mark.asyncio
    async def test_a_lease_container_is_partitioned_on_id_or_partition_key(
        self, store: AsyncLeaseStore
    ) -> None:
        assert await store.partition_key_path() in {"/id", "/partitionKey"}

    @pytest.mark.asyncio
    async def test_a_created_document_is_read_back_with_an_etag_and_a_time(
        self, store: AsyncLeaseStore
    ) -> None:
        body, key = (await self._docs(store)).doc("a", Owner=None, properties={"k": "v"})
        created = await store.create(body, key)
        assert created is not None
        read = await store.read(body["id"], key)
        assert read is not None
        assert {k: v for k, v in read.items() if not k.startswith("_")} == body
        assert read["_etag"] == created["_etag"]

    @pytest.mark.asyncio
    async def test_creating_an_existing_id_is_refused_and_leaves_it(
        self, store: AsyncLeaseStore
    ) -> None:
        body, key = (await self._docs(store)).doc("a", Owner="first")
        assert await store.create(body, key) is not None
        assert await store.create({**body, "Owner": "second"}, key) is None
        read = await store.read(body["id"], key)
        assert read is not None and read["Owner"] == "first"

    @pytest.mark.asyncio
    async def test_a_replace_on_a_stale_etag_is_refused_and_changes_nothing(
        self, store: AsyncLeaseStore
    ) -> None:
        body, key = (await self._docs(store)).doc("a", Owner=None)
        created = await store.create(body, key)
        assert created is not None
        replaced = await store.replace({**body, "Owner": "first"}, key, created["_etag"])
        assert replaced["_etag"] != created["_etag"]
        with pytest.raises(PreconditionFailedError):
            await store.replace({**body, "Owner": "second"}, key, created["_etag"])
        read = await store.read(body["id"], key)
        assert read is not None and read["Owner"] == "first"

    @pytest.mark.asyncio
    async def test_replacing_or_reading_a_missing_document(self, store: AsyncLeaseStore) -> None:
        body, key = (await self._docs(store)).doc("missing")
        assert await store.read(body["id"], key) is None
        with pytest.raises(NotFoundError):
            await store.replace(body, key, None)

    @pytest.mark.asyncio
    async def test_deletes_are_conditioned_on_the_etag(self, store: AsyncLeaseStore) -> None:
        body, key = (await self._docs(store)).doc("a")
        created = await store.create(body, key)
        assert created is not None
        await store.replace({**body, "x": 1}, key, None)
        assert await store.delete(body["id"], key, created["_etag"]) is False
        assert await store.delete(body["id"], key) is True
        assert await store.read(body["id"], key) is None
        assert await store.delete(body["id"], key) is False

    @pytest.mark.asyncio
    async def test_documents_are_listed_by_the_prefix_of_their_id(
        self, store: AsyncLeaseStore
    ) -> None:
        docs = await self._docs(store)
        for name in ("1", "2"):
            body, key = docs.doc(name)
            await store.create(body, key)
        body, key = _Documents(docs.path).doc("1")
        await store.create(body, key)
        listed = sorted(d["id"] for d in await store.list_documents(f"{docs.prefix}.."))
        assert listed == [f"{docs.prefix}..1", f"{docs.prefix}..2"]
