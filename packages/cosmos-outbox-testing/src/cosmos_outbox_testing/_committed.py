"""The events a store holds, as a subscriber reads them: each stored event mapped to its message
as the relay maps it, then read back as the library's subscriber reads a message. What a test
asserts on is then what subscribers will get, whatever the stored form."""

from __future__ import annotations

from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.relay import OutboxRecord, to_message
from cosmos_outbox.subscriber import IncomingEvent, from_message
from cosmos_outbox_testing._fakes import InMemoryStore


def committed_events(store: InMemoryStore, partition_key: str | None = None) -> list[IncomingEvent]:
    """The events in `store` (of one partition, when given), per session by version, then its
    scheduled events by due time; a cancelled scheduled event is left out (it is never
    sent)."""
    from cosmos_outbox.servicebus import application_properties  # the SDK's, on first use

    documents = [
        d
        for d in store.of_type(EVENT_TYPE)
        if partition_key is None or d.get("partitionKey") == partition_key
    ]
    events = []
    for record in read_feed(documents):
        if not isinstance(record, OutboxRecord) or record.cancelled_at is not None:
            continue  # unreadable (the relay quarantines it) or cancelled: no subscriber reads it
        message = to_message(record)
        events.append(
            from_message(
                message.body,
                content_type=message.content_type,
                application_properties=application_properties(message),
            )
        )
    return sorted(
        events,
        key=lambda e: (
            e.aggregate_type,
            e.aggregate_id,
            e.deliver_at is not None,
            e.version,
            e.deliver_at.timestamp() if e.deliver_at is not None else 0.0,
        ),
    )
