"""The in-memory feed as a container's documents (what the outbox's test kit keeps its store on):
a transactional batch is all or none and one change (one LSN), a write refused with the service's
409, 404 or 412 names the operation, an etag changes at each write, and a document whose `ttl`
ran out is deleted as Cosmos DB's time to live deletes it (a delete the feed shows as expired) --
-1 never, absent the container's default, positive seconds; the in-memory lease store keeps its
documents in the same model."""

from __future__ import annotations

import datetime as dt

import pytest

from cosmos_changefeed import (
    ConflictError,
    EpkRange,
    InMemoryDocuments,
    Lease,
    NotFoundError,
    PreconditionFailedError,
    _clock,
)
from cosmos_changefeed.testing import InMemoryFeed


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now


def doc(item: str, **fields: object) -> dict[str, object]:
    return {"id": item, "pk": "p", **fields}


def test_a_batch_is_one_change_written_whole() -> None:
    feed = InMemoryFeed()
    first, second = feed.batch([("create", doc("a"), None), ("upsert", doc("b"), None)])
    assert first is not None and second is not None
    assert first["_etag"] != second["_etag"]
    assert [d["_lsn"] for d in feed.latest_since(0)] == [1, 1]
    assert [d["id"] for d in feed.documents()] == ["a", "b"]


@pytest.mark.parametrize(
    ("operation", "refusal"),
    [
        (("create", doc("a"), None), ConflictError),
        (("replace", doc("z"), None), NotFoundError),
        (("delete", doc("z"), None), NotFoundError),
        (("replace", doc("a"), '"not-its-etag"'), PreconditionFailedError),
        (("delete", doc("a"), '"not-its-etag"'), PreconditionFailedError),
    ],
)
def test_a_refused_operation_is_named_and_nothing_of_its_batch_written(
    operation: tuple[str, dict[str, object], str | None], refusal: type[Exception]
) -> None:
    feed = InMemoryFeed()
    [stored] = feed.batch([("create", doc("a", n=1), None)])
    assert stored is not None
    with pytest.raises(refusal) as raised:
        feed.batch([("upsert", doc("b"), None), operation])
    assert raised.value.operation_index == 1  # type: ignore[attr-defined]
    assert feed.documents() == [stored]
    assert feed.latest_since(0) == [stored | {"_lsn": 1}]


def test_a_write_conditioned_on_the_current_etag_goes_through() -> None:
    feed = InMemoryFeed()
    [stored] = feed.batch([("create", doc("a", n=1), None)])
    assert stored is not None
    [replaced] = feed.batch([("replace", doc("a", n=2), stored["_etag"])])
    assert replaced is not None and replaced["n"] == 2 and replaced["_etag"] != stored["_etag"]
    assert feed.batch([("delete", doc("a"), replaced["_etag"])]) == [None]
    assert feed.document("a", "p") is None


def test_a_document_whose_ttl_ran_out_is_deleted_as_expired() -> None:
    clock = Clock()
    feed = InMemoryFeed(clock=clock)
    feed.batch([("create", doc("short", ttl=10), None), ("create", doc("kept"), None)])
    clock.now += dt.timedelta(seconds=9)
    assert feed.expire() == 0
    feed.batch([("upsert", doc("short", ttl=10), None)])  # written again: ten seconds more
    clock.now += dt.timedelta(seconds=9)
    assert feed.expire() == 0 and feed.document("short", "p") is not None
    clock.now += dt.timedelta(seconds=1)
    assert feed.expire() == 1
    assert [d["id"] for d in feed.documents()] == ["kept"]
    page = feed.latest_since(0)
    assert [d["id"] for d in page] == ["kept"]


def test_time_to_live_is_cosmos_dbs_minus_one_never_absent_inherits_positive_seconds() -> None:
    clock = Clock()
    feed = InMemoryFeed(clock=clock, default_ttl=60)
    feed.batch(
        [
            ("create", doc("inherits"), None),  # the container's 60 s
            ("create", doc("never", ttl=-1), None),
            ("create", doc("short", ttl=10), None),
        ]
    )
    clock.now += dt.timedelta(seconds=10)
    assert feed.expire() == 1
    clock.now += dt.timedelta(seconds=50)
    assert feed.expire() == 1
    clock.now += dt.timedelta(days=365)
    assert feed.expire() == 0
    assert [d["id"] for d in feed.documents()] == ["never"]


def test_with_ttl_off_a_documents_ttl_is_ignored_and_on_without_default_minus_one_is_kept() -> None:
    clock = Clock()
    off, on = InMemoryFeed(clock=clock, default_ttl=None), InMemoryFeed(clock=clock)
    for feed in (off, on):
        feed.batch([("create", doc("short", ttl=1), None), ("create", doc("kept", ttl=-1), None)])
        feed.upsert(doc("plain"))
    clock.now += dt.timedelta(days=1)
    assert off.expire() == 0 and on.expire() == 1
    assert sorted(d["id"] for d in on.documents()) == ["kept", "plain"]


@pytest.mark.parametrize("ttl", [0, -2, 1.5, "10", True])
def test_a_ttl_cosmos_db_would_refuse_is_refused_naming_the_document(ttl: object) -> None:
    feed = InMemoryFeed()
    with pytest.raises(ValueError, match="'bad': ttl must be -1"):
        feed.upsert(doc("bad", ttl=ttl))
    with pytest.raises(ValueError, match="'bad': ttl must be -1"):
        feed.batch([("create", doc("bad", ttl=ttl), None)])
    with pytest.raises(ValueError, match="default_ttl"):
        InMemoryFeed(default_ttl=0)
    assert feed.documents() == []


def test_a_feed_of_latest_versions_only_does_not_grow_with_its_writes() -> None:
    """What the in-memory lease store keeps its documents in: a lease written again and again
    (renewals, checkpoints) keeps one version; the all-versions mode cannot read it."""
    feed = InMemoryFeed(all_versions=False)
    for n in range(1000):
        feed.upsert(doc("lease", n=n))
        feed.upsert(doc(f"gone-{n}"))
        feed.delete(f"gone-{n}", "p")
    assert len(feed._buckets["0"]) < 100
    assert [(d["id"], d["n"]) for d in feed.latest_since(0)] == [("lease", 999)]
    with pytest.raises(ValueError, match="all_versions=False"):
        feed.read(
            Lease(id="x..0", lease_token="0", feed_range=EpkRange.full()),
            None,
            "Beginning",
            mode="AllVersionsAndDeletes",
        )


def test_the_in_memory_lease_stores_documents_are_kept_in_the_same_model() -> None:
    """``InMemoryDocuments`` on ``InMemoryFeed``: one model of a container, so a ``ttl`` of -1
    is kept there too, and the etag and ``_ts`` are the feed's (its one writer of them)."""
    documents = InMemoryDocuments()
    assert isinstance(documents.feed, InMemoryFeed)
    clock = Clock()
    token = _clock.CLOCKS.set(_clock.Clocks(clock, lambda: 0.0))
    try:
        documents.create({"id": "kept", "ttl": -1}, "kept")
        lock = documents.create({"id": "lock", "ttl": 30}, "lock")
        assert lock is not None and lock["_ts"] == int(clock.now.timestamp())
        assert documents.feed.document("lock", "lock") == lock
        clock.now += dt.timedelta(seconds=30)
        assert documents.read("lock", "lock") is None
        assert documents.read("kept", "kept") is not None
        assert [d["id"] for d in documents.export()] == ["kept"]
    finally:
        _clock.CLOCKS.reset(token)
