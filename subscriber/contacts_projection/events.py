"""One event as the subscriber reads it: a CloudEvent in the AMQP binding's binary content
mode, read with the official CloudEvents SDK (`cloudevents.core.bindings.amqp`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cloudevents.core.bindings.amqp import AMQPMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

#: The type (Subject) of the notice the outbox publishes, in the contact's session, where an
#: event it set aside (quarantined) would have been; `version` in its data is that event's.
QUARANTINE_NOTICE = "OutboxEventQuarantined"


class UnreadableEventError(ValueError):
    """A message that is not one of the contact events this subscriber understands."""


@dataclass(frozen=True)
class IncomingEvent:
    """What the projection needs of one event: id, contact, type (the action), version, data."""

    event_id: str
    contact_id: str
    type: str
    version: int
    data: Mapping[str, Any]
    time: datetime | None = None
    source: str = ""


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def from_message(
    body: bytes, *, content_type: str | None, application_properties: Mapping[Any, Any] | None
) -> IncomingEvent:
    """Read one Service Bus message as a CloudEvent and check it is a contact event."""
    amqp = AMQPMessage(
        properties={"content-type": content_type or "application/json"},
        application_properties={
            _text(k): _text(v) for k, v in (application_properties or {}).items()
        },
        application_data=body,
    )
    try:
        event = from_binary(amqp, JSONFormat())
    except Exception as exc:  # the SDK raises several kinds for a message that is no CloudEvent
        raise UnreadableEventError(f"not a CloudEvent: {exc}") from None
    data = event.get_data()
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except ValueError:
            raise UnreadableEventError("event data is not JSON") from None
    if not isinstance(data, Mapping):
        raise UnreadableEventError("event data is not a JSON object")
    version = data.get("version")
    subject = event.get_subject()
    if event.get_type() == QUARANTINE_NOTICE and version is None:
        version = 0  # a notice of an event whose version could not be read: nothing to mark
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise UnreadableEventError("event data has no integer version")
    if version == 0 and event.get_type() != QUARANTINE_NOTICE:
        raise UnreadableEventError("event data has no positive integer version")
    if not subject or data.get("contactId") != subject:
        raise UnreadableEventError("event subject is not the contact id of its data")
    return IncomingEvent(
        event_id=str(event.get_id()),
        contact_id=str(subject),
        type=str(event.get_type()),
        version=version,
        data=data,
        time=event.get_time(),
        source=str(event.get_source()),
    )
