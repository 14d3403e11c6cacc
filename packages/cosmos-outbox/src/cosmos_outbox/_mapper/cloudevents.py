"""The message's CloudEvents form, pure (the Service Bus adapter puts it on the wire; the
operations' dead-letter notices and the test kit read it): CloudEvents 1.0 on the wire, the
AMQP protocol binding's binary content mode.

The body stays the event's data (the CloudEvent `data`), the AMQP `content-type` is its
`datacontenttype`, and every other attribute is one application property named
`cloudEvents_<attribute>`:

- `specversion` `1.0`; `id` the event id (= MessageId, but for a re-drive's message, whose
  MessageId is its own); `source` the aggregate type's source
  (`CLOUDEVENTS_SOURCE_BASE` + `/<collection>`: `/orders`); `type` the action (= Subject);
  `subject` the aggregate id (= SessionId); `time` the event's creation
  (RFC 3339, UTC), when known; `dataschema` when the stored event names one; `dataref`
  (the extension attribute) when the body was offloaded by the claim check: the body is then
  empty and the data is at that URL (the spec: the data "accessed via data or dataref MUST be
  identical"; the official SDK reads such a message as an event with no data and `dataref`).

Values are the attributes' canonical strings, which the binding allows for every type (a reader
must accept them as well as native AMQP types). `id` + `source` are unique per event, as the
spec asks: the event id is a UUID.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cosmos_outbox._records import OutboxMessage
from cosmos_outbox._subscription_rules import Facts
from cosmos_outbox.ports import Outgoing

SPECVERSION = "1.0"
#: The application property of the claim check's reference (the `dataref` extension).
DATAREF = "cloudEvents_dataref"


def rfc3339(moment: datetime) -> str:
    """A timestamp in RFC 3339 (UTC, `Z`); naive times are UTC, as the store writes them."""
    if moment.tzinfo is UTC:  # the store's times: formatted naive (half the cost), then Z
        return f"{moment.replace(tzinfo=None).isoformat()}Z"
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.isoformat().replace("+00:00", "Z")


def cloudevent_properties(
    message: OutboxMessage, *, base: str = "", into: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The CloudEvents context attributes of one message as AMQP application properties (binary
    content mode), added to `into` (a new mapping by default): all but `datacontenttype` (the
    AMQP content-type carries it); the source is `base` + the message's source path."""
    properties = {} if into is None else into
    properties["cloudEvents_specversion"] = SPECVERSION
    properties["cloudEvents_id"] = message.event_id or message.message_id
    properties["cloudEvents_source"] = f"{base}{message.source}"
    properties["cloudEvents_type"] = message.subject
    properties["cloudEvents_subject"] = message.session_id
    if message.created_at is not None:
        properties["cloudEvents_time"] = rfc3339(message.created_at)
    if message.dataschema:
        properties["cloudEvents_dataschema"] = message.dataschema
    if message.dataref is not None:
        properties[DATAREF] = message.dataref
    return properties


def application_properties(message: OutboxMessage, *, base: str = "") -> dict[str, Any]:
    """The outbox's application properties, then the CloudEvents attributes (this order is on
    the wire)."""
    return cloudevent_properties(message, base=base, into=dict(message.application_properties))


def outgoing(message: OutboxMessage, *, base: str = "") -> Outgoing:
    """`message` as it goes on the wire, nothing left to add: its fields and its application
    properties (`application_properties`)."""
    return Outgoing(
        body=message.body,
        message_id=message.message_id,
        session_id=message.session_id,
        subject=message.subject,
        content_type=message.content_type,
        application_properties=application_properties(message, base=base),
    )


def message_facts(message: OutboxMessage, *, base: str = "") -> Facts:
    """What a subscription's rules see of `message` as the relay sends it
    (`cosmos_outbox.servicebus.to_amqp_message`): its system properties and its application
    properties, the CloudEvents attributes included."""
    return sent_facts(outgoing(message, base=base))


def sent_facts(sent: Outgoing) -> Facts:
    """What a subscription's rules see of a message sent as it is."""
    return Facts.sent(
        message_id=sent.message_id,
        subject=sent.subject,
        session_id=sent.session_id,
        content_type=sent.content_type,
        correlation_id=sent.correlation_id,
        properties=sent.application_properties,
    )
