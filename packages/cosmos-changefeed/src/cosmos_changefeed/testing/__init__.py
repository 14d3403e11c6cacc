"""The test kit the package ships: the in-memory feed (``InMemoryFeed``: a container's change
feed in memory, which a test writes, deletes, splits and merges; ``InMemoryFeedSource`` and
``AsyncInMemoryFeedSource`` give it to a processor or an estimator in place of a container),
the feed source's contract suite (``FeedSourceContract``, ``FeedHarness``: ``_feed_contract``),
the lease store's, below, ``VirtualClock`` (``_virtual``): asyncio in virtual time, for aio
processors whose lease intervals pass in microseconds, and ``SimulatedFleet`` (``_simulation``):
aio processors in one process, in virtual time, over a lease container with a latency and a
budget of request units (what ``python -m bench.changefeed_scale`` measures).

The lease store's contract suite, shipped with the package (eventsourcing's habit): a store
proves itself by subclassing it. Both stores here pass it (the package's tests run it against
``InMemoryLeaseStore`` and against ``CosmosLeaseStore`` on a container partitioned on ``/id``
and on one on ``/partitionKey``); a store of your own does the same::

    from cosmos_changefeed.testing import LeaseStoreContract

    class TestMyStore(LeaseStoreContract):
        @pytest.fixture
        def store(self) -> LeaseStore:
            return MyStore(...)          # an empty store

``AsyncLeaseStoreContract`` is the same for a ``cosmos_changefeed.aio.LeaseStore`` (needs
pytest-asyncio). What it holds a store to is what the processor relies on: Cosmos DB's
semantics for documents -- an existing id refused, a replace only while the etag matches, a new
etag at every write, deletes conditioned on it, listing by id prefix, and a ``ttl`` honoured
(``supports_ttl = False`` for a store that keeps documents for ever, as a Cosmos DB container
without TTL does).

Needs pytest (``pip install cosmos-changefeed[testing]``).
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from cosmos_changefeed._memory_feed import InMemoryFeed, InMemoryFeedSource
from cosmos_changefeed._store import (
    ID_PATH,
    LeaseStore,
    NotFoundError,
    PreconditionFailedError,
)
from cosmos_changefeed.aio._memory_feed_async import InMemoryFeedSource as AsyncInMemoryFeedSource
from cosmos_changefeed.testing._feed_contract import FeedHarness, FeedSourceContract, blocking
from cosmos_changefeed.testing._lease_container import SimulatedLeaseContainer, SimulatedLeaseStore
from cosmos_changefeed.testing._simulation import SimulatedFleet, Timing
from cosmos_changefeed.testing._virtual import VirtualClock

if TYPE_CHECKING:  # imported when first asked for (its module says why): `__getattr__`
    from cosmos_changefeed.testing._async_lease_contract import AsyncLeaseStoreContract

__all__ = [
    "AsyncInMemoryFeedSource",
    "AsyncLeaseStoreContract",
    "FeedHarness",
    "FeedSourceContract",
    "InMemoryFeed",
    "InMemoryFeedSource",
    "LeaseStoreContract",
    "SimulatedFleet",
    "SimulatedLeaseContainer",
    "SimulatedLeaseStore",
    "Timing",
    "VirtualClock",
    "blocking",
]


class _Documents:
    """Documents for a store partitioned on ``path``, each under a fresh prefix."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.prefix = f"contract-{uuid.uuid4().hex[:8]}"

    def doc(self, name: str, **fields: Any) -> tuple[dict[str, Any], str]:
        item_id = f"{self.prefix}..{name}"
        body: dict[str, Any] = {"id": item_id, **fields}
        if self.path != ID_PATH:
            body["partitionKey"] = item_id
        return body, item_id


class LeaseStoreContract:
    """What every (sync) ``LeaseStore`` does. Subclass it with a ``store`` fixture."""

    supports_ttl = True

    @pytest.fixture
    def store(self) -> LeaseStore:
        raise NotImplementedError("subclass LeaseStoreContract with a `store` fixture")

    @pytest.fixture
    def docs(self, store: LeaseStore) -> _Documents:
        return _Documents(store.partition_key_path())

    def test_a_lease_container_is_partitioned_on_id_or_partition_key(
        self, store: LeaseStore
    ) -> None:
        assert store.partition_key_path() in {"/id", "/partitionKey"}

    def test_a_created_document_is_read_back_with_an_etag_and_a_time(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        body, key = docs.doc("a", Owner=None, properties={"k": "v"})
        created = store.create(body, key)
        assert created is not None
        read = store.read(body["id"], key)
        assert read is not None
        assert {k: v for k, v in read.items() if not k.startswith("_")} == body
        assert read["_etag"] == created["_etag"]
        assert abs(int(read["_ts"]) - time.time()) < 60

    def test_creating_an_existing_id_is_refused_and_leaves_it(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        body, key = docs.doc("a", Owner="first")
        assert store.create(body, key) is not None
        assert store.create({**body, "Owner": "second"}, key) is None
        read = store.read(body["id"], key)
        assert read is not None and read["Owner"] == "first"

    def test_reading_a_missing_document_gives_none(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        _, key = docs.doc("missing")
        assert store.read(key, key) is None

    def test_a_replace_on_the_current_etag_writes_and_gives_a_new_etag(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        body, key = docs.doc("a", Owner=None)
        created = store.create(body, key)
        assert created is not None
        replaced = store.replace({**body, "Owner": "me"}, key, created["_etag"])
        assert replaced["Owner"] == "me"
        assert replaced["_etag"] != created["_etag"]
        read = store.read(body["id"], key)
        assert read is not None and read["_etag"] == replaced["_etag"]

    def test_a_replace_on_a_stale_etag_is_refused_and_changes_nothing(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        body, key = docs.doc("a", Owner=None)
        created = store.create(body, key)
        assert created is not None
        store.replace({**body, "Owner": "first"}, key, created["_etag"])
        with pytest.raises(PreconditionFailedError):
            store.replace({**body, "Owner": "second"}, key, created["_etag"])
        read = store.read(body["id"], key)
        assert read is not None and read["Owner"] == "first"

    def test_replacing_a_missing_document_is_not_found(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        body, key = docs.doc("missing")
        with pytest.raises(NotFoundError):
            store.replace(body, key, None)

    def test_a_delete_on_a_stale_etag_keeps_the_document(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        body, key = docs.doc("a")
        created = store.create(body, key)
        assert created is not None
        store.replace({**body, "x": 1}, key, None)
        assert store.delete(body["id"], key, created["_etag"]) is False
        assert store.read(body["id"], key) is not None

    def test_a_delete_removes_the_document_and_a_second_finds_nothing(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        body, key = docs.doc("a")
        created = store.create(body, key)
        assert created is not None
        assert store.delete(body["id"], key, created["_etag"]) is True
        assert store.read(body["id"], key) is None
        assert store.delete(body["id"], key) is False

    def test_documents_are_listed_by_the_prefix_of_their_id(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        for name in ("1", "2"):
            body, key = docs.doc(name)
            store.create(body, key)
        other = _Documents(docs.path)
        body, key = other.doc("1")
        store.create(body, key)
        listed = sorted(d["id"] for d in store.list_documents(f"{docs.prefix}.."))
        assert listed == [f"{docs.prefix}..1", f"{docs.prefix}..2"]
        assert all("_etag" in d for d in store.list_documents(f"{docs.prefix}.."))

    def test_a_document_with_a_ttl_is_gone_after_it_and_one_of_minus_one_never(
        self, store: LeaseStore, docs: _Documents
    ) -> None:
        if not self.supports_ttl:
            pytest.skip("this store keeps documents for ever")
        body, key = docs.doc("lock", ttl=1)
        kept, kept_key = docs.doc("kept", ttl=-1)
        assert store.create(kept, kept_key) is not None
        assert store.create(body, key) is not None
        deadline = time.monotonic() + 10
        while store.read(body["id"], key) is not None:
            assert time.monotonic() < deadline, "the document outlived its ttl"
            time.sleep(0.2)
        assert store.create(body, key) is not None
        assert store.read(kept["id"], kept_key) is not None, "a ttl of -1 expired"


def __getattr__(name: str) -> Any:
    """``AsyncLeaseStoreContract``, imported when first asked for (its module says why)."""
    if name == "AsyncLeaseStoreContract":
        from cosmos_changefeed.testing._async_lease_contract import AsyncLeaseStoreContract

        return AsyncLeaseStoreContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
