"""The transactional session: the outbox for the app you have. Open one for a partition key of
the outbox's container, write your own documents in it (the operations of a Cosmos DB
transactional batch), publish events in it, and commit: your documents, the events and the
session's sequence, in ONE transactional batch, all or nothing, in one round trip.

    async with outbox.session("customer-42", entity="booking") as session:
        session.upsert({"id": "booking-7", "partitionKey": "customer-42", ...})
        session.publish("BookingConfirmed", {"bookingId": "booking-7"})
        await session.commit()

The events are relayed like an aggregate's: MessageId = event id, SessionId = the session id (the
partition key unless given), `aggregateType` = `entity`, CloudEvents attributes, claim check,
quarantine. Each event takes the next number of its session's sequence (`version`), kept in a
document of the partition (`type: outboxSequence`) written in the same batch, conditioned on the
etag it was known with: subscribers keep order and see gaps as for aggregates, and two sessions
racing on one partition never give two events one number. The sequence is known without a read
when this process wrote it last (a cache); otherwise the batch finds out (409 or 412 on the
sequence alone), the sequence is read, and the same batch is sent again, once more per race.

Limits of a transactional batch, checked before the round trip (BatchTooLargeError): at most 100
operations (your documents, the events, the sequence, the idempotency record) and 2 MB.

Idempotency: `replay(key, request)`, before the app's own work and checks, answers a retry with
the answer its first request recorded (None for a new key); `claim(key, request, answer)` records
the answer with the batch. A retry that races its first request past `replay` is answered from
the record at its commit (`Committed.replayed`: its batch, conflicting on the record, writes
nothing); the key with another request raises IdempotencyKeyReusedError.

A commit with nothing staged (no document operation, no event, no claim) writes nothing and makes
no round trip: it returns an empty `Committed` (no etags, no events, not replayed).

This is the async API's (`cosmos_outbox.aio.Session`); the sync one runs it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, NamedTuple, TypeAlias, cast

from pydantic import BaseModel

from cosmos_outbox._documents import idempotency_record, record_document
from cosmos_outbox._domain import new_id, utc_text
from cosmos_outbox._event_document import (
    EVENT_TYPE,
    body_text,
    event_document,
    stamp,
    stored_size,
)
from cosmos_outbox._idempotency import IdempotencyRecord, fingerprint, record_id
from cosmos_outbox._message_limits import (
    MAX_ID_LENGTH,
    refused_id,
    refused_properties,
    utf16_length,
)
from cosmos_outbox._records import reserved_property
from cosmos_outbox.errors import (
    AlreadyExistsError,
    BatchTooLargeError,
    IdempotencyKeyReusedError,
    NotFoundError,
    PreconditionFailedError,
    SessionIdTooLongError,
)
from cosmos_outbox.ports import AsyncDocumentStore, BatchOperation

#: A transactional batch's limits (Cosmos DB): operations, and bytes of the request.
MAX_OPERATIONS = 100
MAX_BATCH_BYTES = 2 * 1024 * 1024
SEQUENCE_TYPE = "outboxSequence"
#: How many sessions' sequences a process remembers.
_CACHED_SEQUENCES = 10_000
#: JSON as the SDK sends a batch: compact, a character outside ASCII escaped (`\u00e9`), its
#: default; what a batch's size is measured in. (A client made to send item writes as compact
#: UTF-8 sends no more than that.) NaN and the infinities are not JSON: Cosmos DB refuses them.
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _c_encoder() -> Callable[[Any, int], tuple[str, ...]] | None:
    """`_COMPACT`'s C encoder, built once, when the interpreter has one (`_COMPACT.encode`
    builds one per call: half the time of measuring a small document). Without the circular
    reference check: a document that holds itself fails with RecursionError instead."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    return cast(
        Callable[[Any, int], tuple[str, ...]],
        make(
            None,
            _COMPACT.default,
            json.encoder.encode_basestring_ascii,
            None,
            ":",
            ",",
            False,
            False,
            False,
        ),
    )


_C_ENCODER = _c_encoder()
#: What an outbox document (an event's envelope, the sequence) holds besides the strings of its
#: session, its event's type and subject and its body: the keys, two ids, a time, the numbers.
_ENVELOPE_BYTES = 512


def _json_bytes(value: Any, what: str, name: object = None) -> int:
    """How many bytes `value` is as the SDK sends it (compact JSON, in ASCII: a character a
    byte). A value that is not JSON is refused, naming `what` (and `name`)."""
    try:
        text = "".join(_C_ENCODER(value, 0)) if _C_ENCODER else _COMPACT.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        named = what if name is None else f"{what} {name!r}"
        raise TypeError(f"{named} is not JSON: {exc}") from None
    return len(text)


#: The most bytes a character of a string takes in the SDK's JSON: one outside the Basic
#: Multilingual Plane is two escapes (`\ud83d\ude00`).
_CHARACTER_BYTES = 12


def _escaped_at_most(text: str) -> int:
    """At most how many bytes `text` is in the SDK's JSON."""
    return _CHARACTER_BYTES * len(text)


def _claim_of(key: str, request: Mapping[str, Any] | str, scope: str) -> tuple[str, str]:
    """An Idempotency-Key's record id in `scope` and the fingerprint of its request."""
    return (
        record_id(scope, key),
        fingerprint(request if isinstance(request, Mapping) else {"request": request}),
    )


def sequence_id(entity: str, session_id: str) -> str:
    return f"outbox-sequence-{entity}-{session_id}"


class Committed(NamedTuple):
    """What a commit wrote: the etag each of your document operations left (in the order you
    staged them; None for a delete), the ids of the events published; or, for a retry of an
    idempotent request, the answer recorded the first time (`replayed`; `Session.replay` gives
    the same). Empty (no etags, no events) for a commit that had nothing to write. A named
    tuple: made on every commit, in half a frozen dataclass's time."""

    etags: Sequence[str | None] = ()
    events: Sequence[str] = ()
    replayed: bool = False
    answer: Any = None


#: An event published in a session, until its commit: its id and its document (made when it
#: is published; the commit gives it its number and time).
_Staged: TypeAlias = tuple[str, dict[str, Any]]


class _Sequences:
    """The sequence documents this process wrote last, by id: their number and etag. Emptied
    when it holds `_CACHED_SEQUENCES` (a session's next commit then finds its sequence again:
    one read). Without a lock: each call is one or two operations on a dict, and a lost race
    costs at most such a read; the etag keeps the sequence right."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], tuple[int, str]] = {}

    def get(self, key: tuple[str, str]) -> tuple[int, str] | None:
        return self._known.get(key)

    def put(self, key: tuple[str, str], value: tuple[int, str]) -> None:
        known = self._known
        if len(known) >= _CACHED_SEQUENCES and key not in known:
            known.clear()
        known[key] = value

    def forget(self, key: tuple[str, str]) -> None:
        self._known.pop(key, None)


class Session:
    """A transactional session on one partition of the outbox's container (see the module).
    Staging is in memory; `commit()` is the one round trip. Used as `async with`: leaving the
    block forgets what was not committed."""

    #: The claim staged, if any (`claim`).
    _claim: tuple[str, str, str, Any] | None = None
    #: At most how many bytes what is staged adds to the batch, and the claim's record: the
    #: limit is checked with them, and the batch measured only when it could be reached.
    _bytes = 0
    _claim_bytes = 0

    def __init__(
        self,
        store: AsyncDocumentStore,
        partition_key: str,
        *,
        entity: str,
        session_id: str | None = None,
        source: str | None = None,
        event_ttl_seconds: int,
        idempotency_ttl_seconds: int,
        sequences: _Sequences,
        traceparent: str | None = None,
    ) -> None:
        if not partition_key:
            raise ValueError("a session needs a partition key")
        if not entity or not entity.isidentifier():
            raise ValueError(
                f"entity must name what the events are about (an identifier, as "
                f"aggregateType on the wire), not {entity!r}"
            )
        self.partition_key = partition_key
        self.entity = entity
        self.session_id = session_id or partition_key
        refused = refused_id("SessionId", self.session_id)
        if refused is not None:
            raise SessionIdTooLongError(
                f"{refused}: a session's SessionId is its partition key unless it is given a "
                "session_id; give it a shorter one",
                length=utf16_length(self.session_id),
                limit=MAX_ID_LENGTH,
            )
        self.source = source or f"/{entity}s"
        self.traceparent = traceparent
        self._store = store
        self._event_ttl = event_ttl_seconds
        self._idempotency_ttl = idempotency_ttl_seconds
        self._sequences = sequences
        self._operations: list[BatchOperation] = []
        self._events: list[_Staged] = []
        #: At most how many bytes an outbox document of this session holds besides its event's
        #: type, subject and body.
        self._envelope = _ENVELOPE_BYTES + _CHARACTER_BYTES * (
            len(partition_key)
            + 2 * len(self.session_id)
            + 2 * len(entity)
            + len(self.source)
            + len(traceparent or "")
        )

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._operations or self._events or self._claim is not None:
            self.rollback()

    # -- your documents ------------------------------------------------------------------------

    def _document(self, document: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
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
                f"document {found.get('id')!r} is not in this session's partition "
                f"(partitionKey {self.partition_key!r})"
            )
        if not isinstance(found.get("id"), str) or not found["id"]:
            raise ValueError("a document needs a string id")
        if found.get("type") in (EVENT_TYPE, SEQUENCE_TYPE):
            raise ValueError(f"type {found['type']!r} is the outbox's")
        self._bytes += _json_bytes(found, "document", found["id"])
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
        self._bytes += _json_bytes(
            list(operations), "the patch of", document_id
        ) + _escaped_at_most(document_id)
        self._operations.append(
            BatchOperation("patch", id=document_id, patch=list(operations), if_match=if_match)
        )

    def delete(self, document_id: str, *, if_match: str | None = None) -> None:
        """Delete a document (NotFoundError when missing)."""
        self._bytes += _escaped_at_most(document_id)
        self._operations.append(BatchOperation("delete", id=document_id, if_match=if_match))

    async def read(self, document_id: str) -> dict[str, Any] | None:
        """A document of this partition as stored now (with its `_etag`), or None. A read, not
        part of the batch: condition a later write on its etag."""
        return await self._store.read(self.partition_key, document_id)

    # -- events --------------------------------------------------------------------------------

    def publish(
        self,
        event: str | BaseModel,
        data: Mapping[str, Any] | BaseModel | None = None,
        *,
        subject: str | None = None,
        properties: Mapping[str, str | int] | None = None,
    ) -> str:
        """Publish an event with the commit: `event` is its type (the `action` property and
        CloudEvents type; the message's Subject unless `subject` is given) and `data` its body,
        a JSON object or a pydantic model (by its aliases); or `event` is a pydantic model, its
        type the model's class name. `properties` are application properties of its message of
        your own (strings or integers, within Service Bus's limits: ValueError here for ones
        that could never be sent). The event's id. The body is written as the message body's
        JSON text here, nothing added to it (the envelope travels as properties): change it
        after this call and the event does not change. A body that is not JSON raises
        TypeError here."""
        if type(event) is str:
            action = event
        elif isinstance(event, BaseModel):
            if data is not None:
                raise TypeError("publish(model) takes its data from the model")
            action, data = type(event).__name__, event
        else:
            action = event
        if not action:
            raise ValueError("an event needs a type")
        if subject is not None and (not isinstance(subject, str) or not subject):
            raise ValueError("an event's subject is a non-empty string")
        # the body, whatever it is, is written once as the JSON text of the message body
        # (the event document keeps that text: see cosmos_outbox._event_document)
        body = (
            data.model_dump(mode="json", by_alias=True)
            if isinstance(data, BaseModel)
            else data
            if data is not None
            else {}
        )
        if not isinstance(body, Mapping):
            raise TypeError(
                f"an event's data is a JSON object or a pydantic model, not {type(body).__name__}"
            )
        try:
            text = body_text(body if type(body) is dict else dict(body))
        except (TypeError, ValueError, RecursionError) as exc:
            raise TypeError(f"the event's data is not JSON: {exc}") from None
        size = stored_size(text)
        own_text: str | None = None
        if properties:
            own = dict(properties)
            taken = sorted(name for name in own if reserved_property(name, self.entity))
            if taken:
                raise ValueError(f"application properties {taken} are the outbox's: rename them")
            wrong = sorted(
                name
                for name, value in own.items()
                if not isinstance(name, str) or type(value) not in (str, int)
            )
            if wrong:
                raise TypeError(f"application properties {wrong} are not a string or an integer")
            refused = refused_properties(own)
            if refused is not None:
                raise ValueError(f"{refused}: this event could never be sent")
            own_text = body_text(own)
            size += stored_size(own_text)
        self._bytes += (
            size
            + self._envelope
            + _escaped_at_most(action)
            + (_escaped_at_most(subject) if subject else 0)
        )
        event_id = new_id()
        document = event_document(
            event_id=event_id,
            partition_key=self.partition_key,
            aggregate_type=self.entity,
            aggregate_id=self.session_id,
            source=self.source,
            action=action,
            body=text,
            ttl=self._event_ttl,
            traceparent=self.traceparent,
            subject=subject,
            properties=own_text,
        )
        self._events.append((event_id, document))
        return event_id

    async def replay(
        self, key: str, *, request: Mapping[str, Any] | str, scope: str = ""
    ) -> Committed | None:
        """Look an Idempotency-Key up before doing the request's work: what the first request
        with this key and request recorded (`Committed(replayed=True, answer=...)`), or None
        for a key not seen yet (do the work, `claim` the key with its answer, commit). Call it
        first, before your own checks: a retry is answered as its first request was, whatever
        those checks would say now. IdempotencyKeyReusedError for the key with another request.
        One point read of the record (in this session's partition); nothing is staged."""
        record_key, printed = _claim_of(key, request, scope or self.entity)
        return await self._recorded(record_key, printed)

    def claim(
        self, key: str, *, request: Mapping[str, Any] | str, answer: Any = None, scope: str = ""
    ) -> None:
        """Record this request's Idempotency-Key with the commit: a retry with the same key and
        request commits nothing and answers `answer` as recorded (`Committed.replayed`); the
        key with another request raises IdempotencyKeyReusedError. `request` is what makes two
        requests the same (its fingerprint is kept, never the key); `scope` where the key is
        unique (the route, the caller). `replay` looks the key up before the work."""
        record_key, printed = _claim_of(key, request, scope or self.entity)
        self._claim = (
            record_key,
            printed,
            str(request)[:200] if isinstance(request, str) else "",
            answer,
        )
        self._claim_bytes = (
            _json_bytes(answer, "the answer")
            + self._envelope
            + _escaped_at_most(self._claim[0])
            + 2000
        )

    # -- the commit ------------------------------------------------------------------------------

    async def commit(self) -> Committed:
        """Write the staged documents, the events and the sequence in one transactional batch
        (see the module). Raises the store's errors (PreconditionFailedError on a document's
        etag, AlreadyExistsError on a create, NotFoundError on a replace, patch or delete of a
        missing one), BatchTooLargeError before the round trip; nothing is written then.
        With nothing staged it writes nothing and makes no round trip: an empty `Committed`."""
        # staged as they are until the batch is written: a failed commit leaves them staged
        operations, events = self._operations, self._events
        staged = len(operations)
        claim = self._claim
        bound = self._bytes_at_most()
        self._claim = None
        if not operations and not events and claim is None:
            return Committed()
        key = (self.entity, self.session_id)
        known = self._sequences.get(key) if events else None
        for _attempt in range(8):
            batch, sequence = self._batch(operations, events, known, claim, bound)
            try:
                etags = await self._store.execute_batch(self.partition_key, batch)
            except (AlreadyExistsError, PreconditionFailedError, NotFoundError) as exc:
                if sequence is not None and exc.operation_index == sequence:
                    known = await self._read_sequence(key)  # another session moved it on
                    continue
                self._sequences.forget(key)
                # refused: an earlier request with the same key may have done this already
                replayed = await self._replayed(claim) if claim is not None else None
                if replayed is None:
                    raise
                return replayed
            self._operations, self._events, self._bytes = [], [], 0
            if sequence is not None:
                number = (known[0] if known else 0) + len(events)
                etag = etags[sequence]
                if etag is not None:
                    self._sequences.put(key, (number, etag))
            return Committed(etags[:staged], [event_id for event_id, _ in events])
        raise PreconditionFailedError(
            f"the sequence of {self.entity} {self.session_id} kept moving: too many racing "
            "sessions; retry",
            aggregate_type=self.entity,
        )

    def _bytes_at_most(self) -> int:
        """At most how many bytes the batch of what is staged is, as its size is measured (its
        documents as one JSON list): what was counted as it was staged, the sequence's document
        when there are events, and the list's brackets and commas."""
        return (
            self._bytes
            + (self._envelope if self._events else 0)
            + (self._claim_bytes if self._claim is not None else 0)
            + len(self._operations)
            + len(self._events)
            + 4
        )

    def _batch(
        self,
        operations: list[BatchOperation],
        events: list[_Staged],
        known: tuple[int, str] | None,
        claim: tuple[str, str, str, Any] | None,
        bound: int,
    ) -> tuple[list[BatchOperation], int | None]:
        """The batch: your operations, then the sequence and the events, then the claim's
        record; the index of the sequence's operation."""
        batch = list(operations)
        sequence: int | None = None
        now = utc_text()
        if events:
            start = known[0] if known else 0
            document = {
                "id": sequence_id(self.entity, self.session_id),
                "partitionKey": self.partition_key,
                "type": SEQUENCE_TYPE,
                "entity": self.entity,
                "sessionId": self.session_id,
                "next": start + len(events) + 1,
                "ttl": -1,
            }
            sequence = len(batch)
            batch.append(
                BatchOperation("replace", document, if_match=known[1])
                if known
                else BatchOperation("create", document)
            )
            for number, (_, event) in enumerate(events, start=start + 1):
                stamp(event, number, now)
                batch.append(BatchOperation("create", event))
        if claim is not None:
            record_key, printed, request, answer = claim
            batch.append(
                BatchOperation(
                    "create",
                    record_document(
                        record_id=record_key,
                        partition_key=self.partition_key,
                        aggregate_type=self.entity,
                        request=request,
                        fingerprint=printed,
                        version=0,
                        answer={"status": 200, **({"body": answer} if answer is not None else {})},
                        created_at=now,
                        ttl_seconds=self._idempotency_ttl,
                    ),
                )
            )
        if len(batch) > MAX_OPERATIONS or bound > MAX_BATCH_BYTES:
            self._check_limits(batch)
        return batch, sequence

    @staticmethod
    def _check_limits(batch: list[BatchOperation]) -> None:
        """The batch's limits, when what was staged could be over them (`_batch`: at most how
        many bytes it is, counted as it was staged, is over the limit): its size measured."""
        if len(batch) > MAX_OPERATIONS:
            raise BatchTooLargeError(
                f"the batch holds {len(batch)} operations (your documents, the events, the "
                f"sequence, the idempotency record); a transactional batch takes at most "
                f"{MAX_OPERATIONS}: commit in smaller sessions"
            )
        # the documents as the SDK sends them (ASCII: a character a byte)
        size = len(
            _COMPACT.encode([op.document if op.document is not None else op.patch for op in batch])
        )
        if size > MAX_BATCH_BYTES:
            raise BatchTooLargeError(
                f"the batch is {size} bytes; a transactional batch takes at most "
                f"{MAX_BATCH_BYTES}: commit in smaller sessions"
            )

    async def _read_sequence(self, key: tuple[str, str]) -> tuple[int, str] | None:
        document = await self._store.read(self.partition_key, sequence_id(*key))
        if document is None:
            self._sequences.forget(key)
            return None
        known = (int(document["next"]) - 1, str(document["_etag"]))
        self._sequences.put(key, known)
        return known

    async def _replayed(self, claim: tuple[str, str, str, Any]) -> Committed | None:
        """The answer of the earlier request with the claim's key (what was staged is then
        dropped); None when there is none."""
        replayed = await self._recorded(claim[0], claim[1])
        if replayed is not None:
            self._operations, self._events, self._bytes = [], [], 0
        return replayed

    async def _recorded(self, record_key: str, printed: str) -> Committed | None:
        """The answer recorded under `record_key`, for a request of fingerprint `printed`."""
        stored = await self._store.read(self.partition_key, record_key)
        record: IdempotencyRecord | None = (
            idempotency_record(stored) if stored is not None else None
        )
        if record is None:
            return None
        if record.fingerprint != printed:
            raise IdempotencyKeyReusedError("this Idempotency-Key was used for another request")
        return Committed(replayed=True, answer=record.answer.body)

    def rollback(self) -> None:
        """Forget what was staged and not committed."""
        self._operations, self._events, self._claim, self._bytes = [], [], None, 0
