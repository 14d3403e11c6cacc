"""The transaction: the outbox for the app you have. Open one for a partition key of the outbox's
container, write your own documents in it (the operations of a Cosmos DB transactional batch),
publish events in it, and commit: your documents, the events and their stream's sequence, in
ONE transactional batch, all or nothing, in one round trip.

    async with outbox.transaction("customer-42", entity="booking") as tx:
        tx.upsert({"id": "booking-7", "partitionKey": "customer-42", ...})
        tx.publish("BookingConfirmed", {"bookingId": "booking-7"})
        await tx.commit()

The events are relayed like an aggregate's: MessageId = event id, SessionId = the transaction's
`session_id` (the partition key unless given), `aggregateType` = `entity`, CloudEvents
attributes, claim check, quarantine. Its parts, each with one job:

- what is staged until the commit, and how many bytes it adds (`cosmos_outbox._write.staging`);
- the events' numbers: their stream's sequence, its head in the batch and the sequences this
  process knows (`cosmos_outbox._write.streams`);
- the batch's order and Cosmos DB's limits (`cosmos_outbox._write.batch`);
- the Idempotency-Key: `replay(key, request)` before the app's own work and checks answers a
  retry with what its first request recorded (None for a new key); `remember(key, request,
  answer)` writes the record with the batch; a retry racing its first request past `replay`
  is answered from the record at its commit (`Committed.replayed`: its batch, conflicting on
  the record, writes nothing); the key with another request raises IdempotencyKeyReusedError
  (`cosmos_outbox._write.idempotency`);
- the commit (`Transaction.commit`, here): the batch sent; refused at the head of its stream
  (another process numbered events since), the head read and the batch sent again;
- scheduled events: `publish(..., deliver_at=...)` or `deliver_after=` writes an event that is
  delivered when due (it takes no number: `cosmos_outbox._write.streams`); `cancel(event_id)` in a
  later transaction of its partition cancels it with that transaction's commit: the event
  document is rewritten with `cancelledAt`, on the etag read, so that of the cancel and the
  event's release at its due time (`cosmos_outbox._relay.scheduled`, on the same etag) exactly
  one commits. A committed cancel means the event is never sent; a release first means
  `TooLateToCancelError`, and nothing of the transaction is written.

A commit with nothing staged (no document operation, no event, no key) writes nothing and makes
no round trip: it returns an empty `Committed` (no etags, no events, not replayed).

This is the async API's (`cosmos_outbox.aio.Transaction`); the sync one runs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, TypedDict

from pydantic import BaseModel

from cosmos_outbox import clock
from cosmos_outbox._domain import due_time, new_id, utc_text
from cosmos_outbox._mapper import (
    body_text,
    due_text,
    event_document,
    reserved_property,
    scheduled_ttl,
)
from cosmos_outbox._message_limits import (
    MAX_ID_LENGTH,
    refused_id,
    refused_properties,
    utf16_length,
)
from cosmos_outbox._renamed import deprecated
from cosmos_outbox._write.batch import (
    CHARACTER_BYTES,
    ENVELOPE_BYTES,
    Batch,
    escaped_at_most,
    json_bytes,
    text_at_most,
)
from cosmos_outbox._write.cancels import cancel_operation, cancel_refused
from cosmos_outbox._write.idempotency import (
    Answer,
    IdempotencyKey,
    record_operation,
    recorded,
)
from cosmos_outbox._write.scope import Uncommitted
from cosmos_outbox._write.staging import Staging
from cosmos_outbox._write.streams import (
    Sequences,
    head_operation,
    numbered,
    read_head,
    sequence_document,
)
from cosmos_outbox.errors import (
    AlreadyExistsError,
    NotFoundError,
    OutboxError,
    PreconditionFailedError,
    SessionIdTooLongError,
)
from cosmos_outbox.ports import AsyncBatchStore, BatchOperation

__all__ = ["Committed", "Transaction"]

#: What a transaction's batch holds, and what to do when it is too large (the limits' error).
_WHAT = (
    "your documents, the events, the sequence, the idempotency record",
    "commit in smaller transactions",
)
#: How often a commit is sent again when its stream's head moved on since it was read.
_ATTEMPTS = 8
#: What a key's record holds besides its answer and its id: the request's text, the fingerprint.
_RECORD_BYTES = 2000


class Committed(NamedTuple):
    """What a commit wrote: the etag each of your document operations left (in the order you
    staged them; None for a delete), the ids of the events published; or, for a retry of an
    idempotent request, the answer recorded the first time (`replayed`; `Transaction.replay`
    gives the same). Empty (no etags, no events) for a commit that had nothing to write. A
    named tuple: made on every commit, in half a frozen dataclass's time."""

    etags: Sequence[str | None] = ()
    events: Sequence[str] = ()
    replayed: bool = False
    answer: Any = None


class TransactionOptions(TypedDict, total=False):
    """A transaction's options beside its partition key and entity, said once for each way one
    is opened (`Outbox.transaction`, the aio outbox's, the wiring's): `session_id`, its events'
    Service Bus SessionId (the partition key unless given); `source`, their CloudEvents source
    (`/<entity>s` unless given); `traceparent`, the W3C trace they continue."""

    session_id: str | None
    source: str | None
    traceparent: str | None


class Transaction(Staging, Uncommitted):
    """A transaction on one partition of the outbox's container (see the module). Staging is in
    memory (`Staging`: your documents, and what is staged with them); `commit()` is the one round
    trip. Used as `async with`: leaving the block forgets what was not committed."""

    def __init__(
        self,
        store: AsyncBatchStore,
        partition_key: str,
        *,
        entity: str,
        session_id: str | None = None,
        source: str | None = None,
        event_ttl_seconds: int,
        idempotency_ttl_seconds: int,
        sequences: Sequences,
        traceparent: str | None = None,
    ) -> None:
        if not partition_key:
            raise ValueError("a transaction needs a partition key")
        if not entity or not entity.isidentifier():
            raise ValueError(
                f"entity must name what the events are about (an identifier, as "
                f"aggregateType on the wire), not {entity!r}"
            )
        self.partition_key = partition_key
        self.entity = entity
        self.session_id = session_id = session_id or partition_key
        # (a string of 64 characters is at most 128 UTF-16 units: Service Bus's limit)
        if len(session_id) > 64 and (refused := refused_id("SessionId", session_id)):
            raise SessionIdTooLongError(
                f"{refused}: a transaction's SessionId is its partition key unless it is given "
                "a session_id; give it a shorter one",
                length=utf16_length(session_id),
                limit=MAX_ID_LENGTH,
            )
        self.source = source = source or f"/{entity}s"
        self.traceparent = traceparent
        self._store = store
        self._event_ttl = event_ttl_seconds
        self._idempotency_ttl = idempotency_ttl_seconds
        self._sequences = sequences
        self._operations = []
        self._events = []
        self._event_ids = []
        self._stream = (entity, session_id)
        #: At most how many bytes an outbox document of this transaction (an event, the
        #: sequence, the key's record) holds besides its own body, type and subject.
        # (`envelope_at_most` of them, written out: once per transaction, in a third of the time)
        self._envelope = ENVELOPE_BYTES + CHARACTER_BYTES * (
            len(partition_key)
            + 2 * len(session_id)
            + 2 * len(entity)
            + len(source)
            + len(traceparent or "")
        )

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
        deliver_at: datetime | None = None,
        deliver_after: timedelta | None = None,
    ) -> str:
        """Publish an event with the commit: `event` is its type (the `action` property and
        CloudEvents type; the message's Subject unless `subject` is given) and `data` its body,
        a JSON object or a pydantic model (by its aliases); or `event` is a pydantic model, its
        type the model's class name. `properties` are application properties of its message of
        your own (strings or integers, within Service Bus's limits: ValueError here for ones
        that could never be sent). The event's id. The body is written as the message body's
        JSON text here, nothing added to it (the envelope travels as properties): change it
        after this call and the event does not change. A body that is not JSON raises
        TypeError here.

        `deliver_at` (an aware datetime) or `deliver_after` (a timedelta from now) schedules
        the event: committed with the rest, delivered when it is due (at once when that is
        past), never once a later transaction `cancel`s it. It takes no number in the
        transaction's sequence (`version` 0) and holds no event published after it at a
        subscriber. A naive datetime, both, or a time further than its event document can be
        kept (the event TTL counts from the due time) is a ValueError here, nothing staged."""
        action, text = _published(event, data)
        if subject is not None and (not isinstance(subject, str) or not subject):
            raise ValueError("an event's subject is a non-empty string")
        ttl, due = self._event_ttl, None
        if deliver_at is not None or deliver_after is not None:
            at = due_time(deliver_at, deliver_after)
            assert at is not None
            ttl, due = scheduled_ttl(self._event_ttl, at, clock.now()), due_text(at)
        size = text_at_most(text)
        own_text: str | None = None
        if properties:
            own_text = self._own_properties(properties)
            size += text_at_most(own_text)
        self._bytes += (
            size
            + self._envelope
            + escaped_at_most(action)
            + (escaped_at_most(subject) if subject else 0)
        )
        event_id = new_id()
        self._events.append(
            event_document(
                event_id=event_id,
                partition_key=self.partition_key,
                aggregate_type=self.entity,
                aggregate_id=self.session_id,
                source=self.source,
                action=action,
                body=text,
                ttl=ttl,
                traceparent=self.traceparent,
                subject=subject,
                properties=own_text,
                deliver_at=due,
            )
        )
        self._event_ids.append(event_id)
        if due is not None:
            self._scheduled += 1
        return event_id

    async def cancel(self, event_id: str) -> bool:
        """Cancel a scheduled event of this partition with the commit: once it is committed,
        the event is never sent (whether the relay is up, behind or down, and whether its due
        time has passed). Its document is read now and rewritten at the commit on the condition
        of the etag read: the event's release at its due time is conditioned the same way, so
        exactly one of the two commits. Raises, nothing staged: NotFoundError (no event of this
        id in this partition: never published here, or expired), ValueError (the event is not
        scheduled: it was relayed when committed), TooLateToCancelError (its due time came and
        it was released: it is being delivered). An event cancelled already: nothing to do.

        Returns True when the commit cancels it (staged now, or earlier in this transaction),
        False when it was cancelled already: nothing happens, so that the app can tell (else an
        app that cancelled twice commits a second `HoldPaid` as if the cancel had done
        something). A cancel another transaction commits between this read and this commit is
        dropped from the batch at the commit (the rest commits)."""
        cancels = self._cancels if self._cancels is not None else {}
        if event_id in cancels:
            return True
        operation = await cancel_operation(self._store, self.partition_key, event_id)
        if operation is None:
            return False  # cancelled already
        assert operation.document is not None
        size = json_bytes(operation.document, "scheduled event", event_id)
        cancels[event_id] = operation
        self._cancels, self._bytes = cancels, self._bytes + size
        return True

    def _own_properties(self, properties: Mapping[str, str | int]) -> str:
        """The JSON text of an event's own application properties, refused (ValueError,
        TypeError) when they take the outbox's names, are not strings or integers, or could
        never be sent."""
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
        return body_text(own)

    # -- the Idempotency-Key -------------------------------------------------------------------

    def _key_of(
        self, key: str, request: Mapping[str, Any] | str, scope: str
    ) -> IdempotencyKey[Any]:
        return IdempotencyKey.of(key, request=request, scope=scope or self.entity)

    async def replay(
        self, key: str, *, request: Mapping[str, Any] | str, scope: str = ""
    ) -> Committed | None:
        """Look an Idempotency-Key up before doing the request's work: what the first request
        with this key and request recorded (`Committed(replayed=True, answer=...)`), or None
        for a key not seen yet (do the work, `remember` the key with its answer, commit). Call
        it first, before your own checks: a retry is answered as its first request was,
        whatever those checks would say now. IdempotencyKeyReusedError for the key with another
        request. One point read of the record (in this partition); nothing is staged."""
        return await self._replayed(self._key_of(key, request, scope))

    def remember(
        self, key: str, *, request: Mapping[str, Any] | str, answer: Any = None, scope: str = ""
    ) -> None:
        """Record this request's Idempotency-Key with the commit: a retry with the same key and
        request commits nothing and answers `answer` as recorded (`Committed.replayed`); the
        key with another request raises IdempotencyKeyReusedError. `request` is what makes two
        requests the same (its fingerprint is kept, never the key); `scope` where the key is
        unique (the route, the caller). `replay` looks the key up before the work."""
        remembered = self._key_of(key, request, scope)
        size = json_bytes(answer, "the answer")  # not JSON: refused, nothing staged
        self._key, self._answer = remembered, answer
        self._key_bytes = (
            size + self._envelope + escaped_at_most(remembered.record_id) + _RECORD_BYTES
        )

    def claim(
        self, key: str, *, request: Mapping[str, Any] | str, answer: Any = None, scope: str = ""
    ) -> None:
        """Deprecated (removed in 0.5): `remember`."""
        deprecated("Transaction.claim", "Transaction.remember")
        self.remember(key, request=request, answer=answer, scope=scope)

    async def _replayed(self, key: IdempotencyKey[Any]) -> Committed | None:
        """The answer an earlier request with `key` recorded here, or None."""
        record = await recorded(self._store, self.partition_key, key)
        return None if record is None else Committed(replayed=True, answer=record.answer.body)

    # -- the commit ------------------------------------------------------------------------------

    async def commit(self) -> Committed:
        """Write the staged documents, the events and their sequence in one transactional batch
        (see the module). Raises the store's errors (PreconditionFailedError on a document's
        etag, AlreadyExistsError on a create, NotFoundError on a replace, patch or delete of a
        missing one), BatchTooLargeError before the round trip; nothing is written then, and
        what was staged stays staged. With nothing staged it writes nothing and makes no round
        trip: an empty `Committed`."""
        operations, events, key = self._operations, self._events, self._key
        if not operations and not events and key is None and not self._cancels:
            return Committed()
        stream, sequences = self._stream, self._sequences
        numbered_events = len(events) - self._scheduled
        known = sequences.get(stream) if numbered_events else None
        for _attempt in range(_ATTEMPTS):
            batch = self._batch(known, numbered_events)
            batch.check()  # (`Batch.send`, without one more coroutine on a commit's path)
            try:
                etags = await self._store.execute_batch(self.partition_key, batch.operations)
            except (AlreadyExistsError, PreconditionFailedError, NotFoundError) as exc:
                if batch.at_head(exc):  # another process numbered events since
                    known = await read_head(self._store, self.partition_key, stream, sequences)
                    continue
                if await self._cancel_refused(exc, len(operations)):
                    continue  # another transaction cancelled it first: the rest sent again
                sequences.forget(stream)
                # refused: an earlier request with the same key may have done this already
                replayed = await self._replayed(key) if key is not None else None
                if replayed is None:
                    raise
                self.rollback()
                return replayed
            event_ids = self._event_ids
            self._operations, self._events, self._event_ids = [], [], []
            self._key, self._bytes, self._scheduled, self._cancels = None, 0, 0, None
            head = batch.head
            if head is not None and (etag := etags[head]) is not None:
                sequences.put(stream, ((known[0] if known else 0) + numbered_events, etag))
            return Committed(etags[: len(operations)], event_ids)
        raise PreconditionFailedError(
            f"the sequence of {self.entity} {self.session_id} kept moving: too many racing "
            "transactions; retry",
            aggregate_type=self.entity,
        )

    async def _cancel_refused(self, error: OutboxError, operations: int) -> bool:
        """A batch refused at one of its cancels (they follow your operations): the event was
        released (TooLateToCancelError) or is gone (NotFoundError) since it was read; True
        when another transaction cancelled it first (the cancel is dropped: send the rest
        again). False for a batch refused elsewhere."""
        cancels = self._cancels
        index = error.operation_index
        if not cancels or index is None or not operations <= index < operations + len(cancels):
            return False
        event_id = list(cancels)[index - operations]
        if not await cancel_refused(self._store, self.partition_key, event_id):
            return False
        del cancels[event_id]
        return True

    def _batch(self, known: tuple[int, str] | None, numbered_events: int | None = None) -> Batch:
        """The batch of what is staged: your operations and the cancels, then the sequence and
        the events (numbered after `known`, the sequence's head as last known; none when they
        are all scheduled), then the key's record."""
        head: BatchOperation | None = None
        events = self._events
        if numbered_events is None:
            numbered_events = len(events) - self._scheduled
        creates: list[BatchOperation] = []
        bound = self._bytes
        if events:
            last = known[0] if known else 0
            creates = numbered(events, last, utc_text())
            if numbered_events:
                head = head_operation(
                    sequence_document(self.partition_key, self._stream, last, numbered_events),
                    known[1] if known else None,
                )
            bound += self._envelope
        record: BatchOperation | None = None
        key = self._key
        if key is not None:
            record = record_operation(
                key.record_in(
                    self.partition_key,
                    aggregate_type=self.entity,
                    version=0,
                    answer=Answer(200, self._answer),
                ),
                ttl_seconds=self._idempotency_ttl,
            )
            bound += self._key_bytes
        operations = self._operations
        if self._cancels:
            operations = [*operations, *self._cancels.values()]
        return Batch.assemble(self.partition_key, operations, head, creates, record, bound, _WHAT)


def _published(
    event: str | BaseModel, data: Mapping[str, Any] | BaseModel | None
) -> tuple[str, str]:
    """What `publish(event, data)` publishes: the event's type, and its body's JSON text
    (written once, here: the event document keeps that text, `cosmos_outbox._mapper`)."""
    if type(event) is str and type(data) is dict:  # the common case first: no ABC's checks
        action, body = event, data
    else:
        action, body = _event_and_body(event, data)
    if not action:
        raise ValueError("an event needs a type")
    try:
        return action, body_text(body)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"the event's data is not JSON: {exc}") from None


def _event_and_body(
    event: str | BaseModel, data: Mapping[str, Any] | BaseModel | None
) -> tuple[str, dict[str, Any]]:
    """`_published`'s other cases: a pydantic model as the event or as its data (by its
    aliases), a mapping that is not a dict (copied), no data (an empty body)."""
    if isinstance(event, BaseModel):
        if data is not None:
            raise TypeError("publish(model) takes its data from the model")
        action, data = type(event).__name__, event
    else:
        action = event
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
    return action, body if type(body) is dict else dict(body)
