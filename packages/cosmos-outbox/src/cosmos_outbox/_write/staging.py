"""What a transaction holds until its commit, and how much of the batch it is: the transaction's
staging (a part of `cosmos_outbox._write.transaction.Transaction`, its base).

- your document operations (`create`, `upsert`, `replace`, `patch`, `delete`: each checked
  when it is staged, its top level copied), in the order you staged them;
- the events published (their documents, made when published: the commit gives each its number
  and time; and their ids, in the same order), and how many of them are scheduled (they take no
  number);
- the scheduled events cancelled (the replace of each event's document, on the etag read);
- the Idempotency-Key remembered and the answer to record with it;
- at most how many bytes the documents and the events add to the batch (`_bytes`; the key's
  record apart, `_key_bytes`), in the SDK's JSON (`cosmos_outbox._write.batch`): the limit is
  checked with them, and the batch measured only when it could be reached.

A base class rather than an object the transaction holds: its state is the transaction's own
attributes, read on every call of a commit's path without one more object in between.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from cosmos_outbox._mapper import EVENT_TYPE
from cosmos_outbox._write.batch import escaped_at_most, json_bytes
from cosmos_outbox._write.idempotency import IdempotencyKey
from cosmos_outbox._write.streams import SEQUENCE_TYPE
from cosmos_outbox.ports import BatchOperation

__all__ = ["Staging"]


class Staging:
    """A transaction's staged work (see the module): its partition's documents, the events, the
    key, and their size. Nothing is sent from here."""

    partition_key: str
    _operations: list[BatchOperation]
    _events: list[dict[str, Any]]
    _event_ids: list[str]
    #: How many of `_events` are scheduled (no number), and the cancels staged, by event id.
    _scheduled = 0
    _cancels: dict[str, BatchOperation] | None = None
    #: The Idempotency-Key remembered, if any, and the answer recorded with it.
    _key: IdempotencyKey[Any] | None = None
    _answer: Any = None
    #: At most how many bytes what is staged adds to the batch, and the key's record.
    _bytes = 0
    _key_bytes = 0

    def _staged(self) -> bool:
        """Whether anything is staged (a document operation, an event, a key, a cancel)."""
        return bool(self._operations or self._events or self._key is not None or self._cancels)

    def rollback(self) -> None:
        """Forget what was staged and not committed (leaving a transaction's block after its
        commit finds nothing to forget: no new lists then)."""
        if self._operations or self._events or self._key is not None or self._cancels:
            self._operations, self._events, self._event_ids = [], [], []
            self._key, self._bytes, self._scheduled, self._cancels = None, 0, 0, None

    def _document(self, document: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
        """A document of yours as staged: a copy of its top level, in this partition, with a
        string id, not of the outbox's types; counted (TypeError when it is not JSON)."""
        if type(document) is dict:  # the common case first: no pydantic instance check
            found = dict(document)
        else:
            found = (
                document.model_dump(mode="json", by_alias=True)
                if isinstance(document, BaseModel)
                else dict(document)
            )
        if "partitionKey" in found and found["partitionKey"] != self.partition_key:
            raise ValueError(
                f"document {found.get('id')!r} is not in this transaction's partition "
                f"(partitionKey {self.partition_key!r})"
            )
        if not isinstance(found.get("id"), str) or not found["id"]:
            raise ValueError("a document needs a string id")
        if found.get("type") in (EVENT_TYPE, SEQUENCE_TYPE):
            raise ValueError(f"type {found['type']!r} is the outbox's")
        self._bytes += json_bytes(found, "document", found["id"])
        return found

    def create(self, document: Mapping[str, Any] | BaseModel) -> None:
        """Create a document (the commit fails, AlreadyExistsError, if its id is taken)."""
        self._operations.append(BatchOperation("create", self._document(document)))

    def upsert(self, document: Mapping[str, Any] | BaseModel) -> None:
        """Create or replace a document."""
        self._operations.append(BatchOperation("upsert", self._document(document)))

    def replace(
        self, document: Mapping[str, Any] | BaseModel, *, if_match: str | None = None
    ) -> None:
        """Replace a document (NotFoundError when missing), if its etag is still `if_match`
        (else PreconditionFailedError): nothing of the batch is written."""
        self._operations.append(
            BatchOperation("replace", self._document(document), if_match=if_match)
        )

    def patch(
        self,
        document_id: str,
        operations: Sequence[Mapping[str, Any]],
        *,
        if_match: str | None = None,
    ) -> None:
        """Change parts of a document (Cosmos DB's patch operations: `add`, `set`, `replace`,
        `remove`, `incr`, with a `path` and a `value`)."""
        if not operations:
            raise ValueError("a patch needs at least one operation")
        self._bytes += json_bytes(list(operations), "the patch of", document_id) + escaped_at_most(
            document_id
        )
        self._operations.append(
            BatchOperation("patch", id=document_id, patch=list(operations), if_match=if_match)
        )

    def delete(self, document_id: str, *, if_match: str | None = None) -> None:
        """Delete a document (NotFoundError when missing)."""
        self._bytes += escaped_at_most(document_id)
        self._operations.append(BatchOperation("delete", id=document_id, if_match=if_match))
