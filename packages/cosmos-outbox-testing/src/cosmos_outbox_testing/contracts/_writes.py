"""The single writes' suite (`cosmos_outbox.ports.DocumentWrites`): one document at a time,
outside a batch, as the relay keeps its own records (its status, the backlog's last hour, the
quarantine) and a release marks a scheduled event: an upsert creates or replaces and answers what
is stored; a replace needs the document, and its etag when it is given; a delete removes it
once."""

from __future__ import annotations

from typing import Any

import pytest

from cosmos_outbox.errors import NotFoundError, PreconditionFailedError
from cosmos_outbox_testing.contracts._worlds import StoreWorld, Suite, unique

__all__ = ["DocumentWritesContract"]


class DocumentWritesContract(Suite[StoreWorld]):
    """One document at a time (`DocumentWrites`: `upsert`, `replace`, `delete`), each in the
    document's partition (`partitionKey`), with the store's etags."""

    def test_an_upsert_creates_then_replaces_and_answers_what_is_stored(
        self, world: StoreWorld
    ) -> None:
        document = _document()
        stored = world.run(world.async_store.upsert(document))
        assert (stored["id"], stored["text"]) == (document["id"], "first") and stored["_etag"]
        again = world.run(world.async_store.upsert({**document, "text": "second"}))
        assert again["text"] == "second" and again["_etag"] != stored["_etag"]
        assert _read(world, document)["text"] == "second"

    def test_a_replace_needs_the_document_and_its_current_etag_when_given(
        self, world: StoreWorld
    ) -> None:
        document = _document()
        with pytest.raises(NotFoundError):
            world.run(world.async_store.replace(document))
        stored = world.run(world.async_store.upsert(document))
        replaced = world.run(
            world.async_store.replace({**document, "text": "second"}, if_match=stored["_etag"])
        )
        assert replaced["text"] == "second" and replaced["_etag"] != stored["_etag"]
        with pytest.raises(PreconditionFailedError):
            world.run(
                world.async_store.replace({**document, "text": "stale"}, if_match=stored["_etag"])
            )
        unconditioned = world.run(world.async_store.replace({**document, "text": "third"}))
        assert unconditioned["text"] == _read(world, document)["text"] == "third"

    def test_a_delete_removes_the_document_once(self, world: StoreWorld) -> None:
        document = _document()
        world.run(world.async_store.upsert(document))
        world.run(world.async_store.delete(document["partitionKey"], document["id"]))
        assert world.run(world.async_store.read(document["partitionKey"], document["id"])) is None
        with pytest.raises(NotFoundError):
            world.run(world.async_store.delete(document["partitionKey"], document["id"]))


def _document() -> dict[str, Any]:
    """A document of one test's own, in a partition of its own."""
    suite = unique("suite")
    return {"id": f"note-{suite}", "partitionKey": f"p-{suite}", "type": "note", "text": "first"}


def _read(world: StoreWorld, document: dict[str, Any]) -> dict[str, Any]:
    found = world.run(world.async_store.read(document["partitionKey"], document["id"]))
    assert found is not None
    return dict(found)
