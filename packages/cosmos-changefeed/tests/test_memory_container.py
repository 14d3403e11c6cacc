"""The in-memory feed as a container's documents (what the outbox's test kit keeps its store on):
a transactional batch is all or none and one change (one LSN), a write refused with the service's
409, 404 or 412 names the operation, an etag changes at each write, and a document whose `ttl`
ran out is deleted as Cosmos DB's time to live deletes it (a delete the feed shows as expired)."""

from __future__ import annotations

import datetime as dt

import pytest

from cosmos_changefeed import ConflictError, NotFoundError, PreconditionFailedError
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
