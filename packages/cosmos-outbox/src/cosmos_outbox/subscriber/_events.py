"""One event as a subscriber reads it: a CloudEvent in the AMQP binding's binary content mode,
read with the official CloudEvents SDK (`cloudevents.core.bindings.amqp`), and checked to be an
outbox event (a version, and a subject that is the id of its aggregate).

A message of the claim check (the `dataref` attribute, `cloudEvents_dataref`, and an empty body)
has its data fetched from the payload store first (`payloads`), so what a handler gets is the
same event as if it had travelled in the message."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cosmos_outbox._mapper import (
    AGGREGATE_TYPE_PROPERTY,
    DELIVER_AT_PROPERTY,
    DISCARD_NOTICE_SUBJECT,
    QUARANTINE_NOTICE_SUBJECT,
    TARGET_PROPERTY,
    TRACEPARENT_PROPERTY,
    event_envelope,
    message_envelope,
)

__all__ = [
    "DISCARD_NOTICE",
    "NOTICES",
    "QUARANTINE_NOTICE",
    "IncomingEvent",
    "UnreadableEventError",
    "dataref_of",
    "from_message",
]

#: The claim check's attribute, in the binding's two spellings.
_DATAREF_KEYS = ("cloudEvents_dataref", "cloudEvents:dataref")

#: The type (Subject) of the notice the outbox publishes, in the aggregate's session, where an
#: event it set aside (quarantined) would have been; `version` in its data is that event's.
QUARANTINE_NOTICE = QUARANTINE_NOTICE_SUBJECT
#: The type of the notice that an operator gave a version up (discarded its event at the outbox,
#: discarded its dead letter at a subscription, or released the versions held behind it): in the
#: aggregate's session, `version` in its data; the library's projector records an accepted gap
#: and applies the versions held after it.
DISCARD_NOTICE = DISCARD_NOTICE_SUBJECT
#: The notices' types: what the outbox says of an event, not an event of the app.
NOTICES = frozenset({QUARANTINE_NOTICE, DISCARD_NOTICE})


class UnreadableEventError(ValueError):
    """A message that is not an outbox event at all (not a CloudEvent, no version, a subject
    that is not its aggregate): it fails, and is dead-lettered after MaxDeliveryCount."""


@dataclass(frozen=True)
class IncomingEvent:
    """What a handler needs of one event: its id, its aggregate's type and id, its type (the
    action), version, time and trace context (the envelope), and its data: what the app
    published, nothing added (messages of format 1, whose body held the envelope too, read the
    same: their envelope taken out of the data)."""

    event_id: str
    aggregate_id: str
    type: str
    version: int
    data: Mapping[str, Any]
    aggregate_type: str
    time: datetime | None = None
    source: str = ""
    #: where its data was fetched from, when it came by claim check
    dataref: str | None = None
    #: the W3C trace context of the request that caused it, when it carried one
    traceparent: str | None = None
    #: a scheduled event: when it was due (it was published with `deliver_at`/`deliver_after`
    #: and sent then). It takes no place in its aggregate's order: its `version` is 0, it is
    #: never held behind a missing version and never holds the versions after it
    deliver_at: datetime | None = None
    #: the one subscription (or queue) the message was sent to (`outboxTarget`: a dead
    #: letter's resubmission, a targeted re-drive or discard notice); None: to every one
    target: str | None = None

    @property
    def scheduled(self) -> bool:
        """Whether it is a scheduled event (`deliver_at`)."""
        return self.deliver_at is not None

    def envelope_and_data(self) -> dict[str, Any]:
        """The event's data with its envelope, camelCase, as `Aggregate.parse_event` reads an
        event (`Order.parse_event(incoming.envelope_and_data())`)."""
        time = self.time.isoformat() if self.time is not None else None
        due = self.deliver_at.isoformat() if self.deliver_at is not None else None
        identity = (self.event_id, self.aggregate_type, self.aggregate_id, self.version, self.type)
        envelope = event_envelope(identity, (time, self.traceparent or None, due))
        return {**self.data, **envelope}


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def dataref_of(application_properties: Mapping[Any, Any] | None) -> str | None:
    """The claim check's reference a message carries (`cloudEvents_dataref`), if any."""
    for key, value in (application_properties or {}).items():
        if _text(key) in _DATAREF_KEYS:
            return str(_text(value))
    return None


def _cloud_event(body: bytes, content_type: str | None, properties: dict[str, Any]) -> Any:
    """The message as a CloudEvent (the AMQP binding's binary content mode), with the official
    SDK; UnreadableEventError when it is none. The SDK (with dateutil) is imported by the first
    message, not at import: an app that imports the subscriber's module only to read its status
    (the operators' routes) never loads it (12 ms of each worker's start)."""
    from cloudevents.core.bindings.amqp import AMQPMessage, from_binary
    from cloudevents.core.formats.json import JSONFormat

    amqp = AMQPMessage(
        properties={"content-type": content_type or "application/json"},
        application_properties=properties,
        application_data=body,
    )
    try:
        return from_binary(amqp, JSONFormat())
    except Exception as exc:  # the SDK raises several kinds for a message that is no CloudEvent
        raise UnreadableEventError(f"not a CloudEvent: {exc}") from None


def from_message(
    body: bytes,
    *,
    content_type: str | None,
    application_properties: Mapping[Any, Any] | None,
    default_aggregate_type: str | None = None,
    payloads: Callable[[str], bytes] | None = None,
) -> IncomingEvent:
    """Read one Service Bus message as a CloudEvent and check it is an outbox event: a version,
    and the subject is the id of its aggregate (`<aggregateType>Id` in its properties; in its
    data for a message of format 1, without `outboxFormat`). A message
    without the `aggregateType` property is of `default_aggregate_type` (messages sent before
    the outbox set it; none: unreadable). A claim-check message's data is fetched with
    `payloads(dataref)` (its errors propagate: the message is retried, then dead-lettered);
    without `payloads` it is unreadable."""
    properties = {_text(k): _text(v) for k, v in (application_properties or {}).items()}
    dataref = dataref_of(properties)
    if dataref is not None:
        if payloads is None:
            raise UnreadableEventError(
                "the event's data is in a payload store (dataref) and this reader has none"
            )
        body = payloads(dataref)
    aggregate_type = properties.get(AGGREGATE_TYPE_PROPERTY, default_aggregate_type)
    if not isinstance(aggregate_type, str) or not aggregate_type:
        raise UnreadableEventError("the aggregateType property is not a name")
    event = _cloud_event(body, content_type, properties)
    data = event.get_data()
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except ValueError:
            raise UnreadableEventError("event data is not JSON") from None
    if not isinstance(data, Mapping):
        raise UnreadableEventError("event data is not a JSON object")
    subject = event.get_subject()
    # the envelope in the properties (format 2) or in the data, with the app's fields (format 1)
    version, aggregate_id, own, where, deliver_at = message_envelope(
        properties, data, aggregate_type
    )
    if event.get_type() in NOTICES and version is None:
        version = 0  # a notice of an event whose version could not be read: nothing to mark
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise UnreadableEventError(f"event {where} have no integer version")
    if (
        where == "properties"
        and DELIVER_AT_PROPERTY in properties
        and (deliver_at is None or version)
    ):
        raise UnreadableEventError(
            "a scheduled event's deliverAt is not a time with its offset, or it has a version"
        )
    if version == 0 and event.get_type() not in NOTICES and deliver_at is None:
        raise UnreadableEventError(f"event {where} have no positive integer version")
    if not subject or aggregate_id != subject:
        raise UnreadableEventError(f"event subject is not the {aggregate_type} id of its {where}")
    traceparent = properties.get(TRACEPARENT_PROPERTY)
    target = properties.get(TARGET_PROPERTY)
    return IncomingEvent(
        event_id=str(event.get_id()),
        aggregate_id=str(subject),
        type=str(event.get_type()),
        version=version,
        data=own,
        time=event.get_time(),
        source=str(event.get_source()),
        aggregate_type=aggregate_type,
        dataref=dataref,
        traceparent=traceparent if isinstance(traceparent, str) and traceparent else None,
        deliver_at=deliver_at,
        target=target if isinstance(target, str) and target else None,
    )
