"""What a store's event documents say, as a subscriber and a test read them: each stored event
mapped to its message as the relay maps it, then read back as the library's subscriber reads a
message (what a test asserts on is then what subscribers will get, whatever the stored form);
and the scheduled events among them, with their due times and where each is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from cosmos_outbox.documents import EVENT_TYPE, event_fields, parse_time, read_feed, schedule_of
from cosmos_outbox.ports import OutboxMessage
from cosmos_outbox.relay import OutboxRecord, to_message
from cosmos_outbox.subscriber import IncomingEvent, from_message
from cosmos_outbox_testing._fakes import InMemoryStore


class ScheduledEvent(NamedTuple):
    """A scheduled event as committed: its id, type, aggregate (session) id, when it is due,
    and where it is: `waiting` (its due time has not come, or its release has not been handed
    back yet), `released` (sent, or sent by the relay's next run) or `cancelled` (never
    sent)."""

    event_id: str
    type: str
    aggregate_id: str
    deliver_at: datetime
    state: str


def incoming(message: OutboxMessage) -> IncomingEvent:
    """A message the relay sent, as the library's subscriber reads it off the wire."""
    from cosmos_outbox.servicebus import application_properties  # the SDK's, on first use

    properties = application_properties(message)
    return from_message(
        message.body, content_type=message.content_type, application_properties=properties
    )


def committed_events(store: InMemoryStore, partition_key: str | None = None) -> list[IncomingEvent]:
    """The events in `store` (of one partition, when given), per session by version, then its
    scheduled events by due time; a cancelled scheduled event is left out (it is never
    sent)."""
    events = [
        incoming(to_message(record))
        for record in read_feed(store.of_type(EVENT_TYPE, partition_key=partition_key))
        # unreadable (the relay quarantines it) or cancelled: no subscriber reads it
        if isinstance(record, OutboxRecord) and record.cancelled_at is None
    ]
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


def changed_since(seen: set[Any], documents: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What a change-feed trigger hands over since its last read: each document not in `seen`
    (by partition, id and etag: one written again is new), added to it."""
    found = []
    for document in documents:
        key = (str(document.get("partitionKey")), str(document["id"]), document.get("_etag"))
        if key not in seen:
            seen.add(key)
            found.append(dict(document))
    return found


def scheduled_events(documents: Iterable[Mapping[str, Any]]) -> list[ScheduledEvent]:
    """The scheduled events among `documents`, soonest due first."""
    found = []
    for document in documents:
        schedule = schedule_of(document) if document.get("type") == EVENT_TYPE else None
        due = parse_time(schedule.deliver_at) if schedule is not None else None
        if schedule is not None and due is not None:
            event = event_fields(document)
            identity = (str(event.event_id), str(event.action), str(event.aggregate_id))
            found.append(ScheduledEvent(*identity, due, schedule.state))
    return sorted(found, key=lambda e: e.deliver_at)
