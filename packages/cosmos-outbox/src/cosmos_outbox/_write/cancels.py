"""Cancelling a scheduled event: what both doors of the write path write for it (a transaction's
`cancel(event_id)`, an aggregate's `cancel_scheduled(event_id)` committed by the unit of work),
and how a batch refused at a cancel is read.

A cancel is the event document rewritten with `cancelledAt`, on the condition of the etag it was
read with; the event's release at its due time is written on the same condition
(`cosmos_outbox._relay.scheduled`), so of the two exactly one commits: a committed cancel means
the event is never sent; a release first means the cancel is refused (TooLateToCancelError),
and nothing of its batch is written."""

from __future__ import annotations

from cosmos_outbox._domain import utc_text
from cosmos_outbox._mapper import EVENT_TYPE, cancelled, schedule_of
from cosmos_outbox.errors import NotFoundError, TooLateToCancelError
from cosmos_outbox.ports import AsyncBatchStore, BatchOperation

__all__ = ["cancel_operation", "cancel_refused"]


async def cancel_operation(
    store: AsyncBatchStore, partition_key: str, event_id: str
) -> BatchOperation | None:
    """The write that cancels scheduled event `event_id` of `partition_key`, read now; None for
    one cancelled already (nothing to do). NotFoundError (no event of this id there: never
    published there, or expired), ValueError (not a scheduled event), TooLateToCancelError
    (released: it is being delivered)."""
    document = await store.read(partition_key, event_id)
    if document is None or document.get("type") != EVENT_TYPE:
        raise NotFoundError("scheduled event", event_id)
    schedule = schedule_of(document)
    if schedule is None:
        raise ValueError(
            f"event {event_id} is not scheduled (it is relayed once committed): only an event "
            "published with deliver_at or deliver_after can be cancelled"
        )
    if schedule.cancelled_at is not None:
        return None
    if schedule.released_at is not None:
        raise TooLateToCancelError(event_id, str(schedule.released_at))
    return BatchOperation("replace", cancelled(document, utc_text()), if_match=document["_etag"])


async def cancel_refused(store: AsyncBatchStore, partition_key: str, event_id: str) -> bool:
    """A batch was refused at its cancel of `event_id` (the event changed since it was read):
    TooLateToCancelError when it was released since, NotFoundError when it is gone; True when
    another batch cancelled it first (drop this cancel and send the rest again); False when it
    changed otherwise (the batch's own error stands)."""
    document = await store.read(partition_key, event_id)
    if document is None:
        raise NotFoundError("scheduled event", event_id) from None
    schedule = schedule_of(document)
    if schedule is None:
        return False
    if schedule.released_at is not None:
        raise TooLateToCancelError(event_id, str(schedule.released_at)) from None
    return schedule.cancelled_at is not None
