"""The mapper: the one owner of an outbox event's forms, both directions, both formats.

    event (an aggregate's `Event`, or what a transaction publishes)
        -> event document (stored in the container)  -> outbox record (what the relay reads)
        -> outbox message (what the relay sends)      -> envelope (what a subscriber reads)

One module per form, so that each form's fields are named in one place: `event` (the event,
written: event -> event document), `document` (the stored event document, read: -> outbox
record), `message` (record -> message, and a message's envelope read back, and the envelope a
subscriber's event gives an aggregate), `notices` (the quarantine and discard notices),
`release_message` (a scheduled event's release on the schedule queue), `properties` (the names a
message carries beside its body), `queries` (the SQL texts that read the stored documents) and
`operation` (an operators' bulk operation's document: not an event's form, but a stored form all
the same). This package's face re-exports them.

Written and read here and nowhere else: the write path makes event documents here
(`event_document`, `aggregate_event_document`, `stamp`); the relay, the quarantine, the operators,
the estimator and the test kit read them here (`read_feed`, `outbox_record`, `unreadable`,
`fields`, `envelope_and_data`, `created_at_of`); the relay makes its messages here (`to_message`,
`claim_check`, `quarantine_notice`); the subscriber reads a message's envelope here
(`message_envelope`). The values it maps between (`OutboxRecord`, `Unreadable`, `NotAnEvent`,
`OutboxMessage`, `LegacyEvents`) are `cosmos_outbox._records`' (a module without pydantic: the
settings and the ports import them at a cold start). An aggregate's partition is named once
(`aggregate_partition`).

The event document (format 2):

    {"id": <event id>, "partitionKey": <partition>, "type": "domainEvent",
     "aggregateType": "order", "aggregateId": <aggregate id | session id>, "source": "/orders",
     "action": "OrderPlaced", "version": 3, "createdAt": "2026-11-24T21:47:02.123456+00:00",
     "traceparent": "00-...", "body": "{"customerName":"Ada","totalCents":1200}",
     "subject"?: ..., "properties"?: "{"tenant":"t1"}", "dataschema"?: ..., "ttl": 864000,
     "deliverAt"?: "2026-11-24T22:02:02+00:00", "releasedAt"?: ..., "cancelledAt"?: ...}

- `body` is the message body as JSON text (compact, UTF-8 as is): the app's data exactly as it
  published it, nothing added. It is kept as a string because the Azure Functions host hands
  trigger documents to the worker through Newtonsoft.Json, which re-formats date-like string
  values (Azure/Azure-Functions#1399); a string that is JSON text is never read as a date, so the
  relay sends the bytes the app committed. The app's own application properties are kept as JSON
  text (`properties`) for the same reason.
- The envelope (event id, aggregate type and id, action, version, time, trace context, source,
  subject) is top-level; the relay sends it as application properties and CloudEvents
  attributes. It reads the time by parsing it (`createdAt`, which the Azure host may have
  re-formatted) and writes it in one form.
- A **scheduled** event (`deliverAt`: when it is due, UTC) has `version` 0: it takes no place in
  its stream's order (`cosmos_outbox._write.streams`), and its document is kept `ttl` = the
  event TTL counted from its due time. It is sent once released (`releasedAt`, written at its due
  time by `cosmos_outbox._relay.scheduled`), never once cancelled (`cancelledAt`, written by the
  app's `Transaction.cancel`): the relay reads which from the document (`OutboxRecord`).

Documents of the format before (format 1: `data` = the envelope and the app's fields in one
object, `<aggregateType>Id` for the aggregate id; the message body was that object) are still
read, and relayed as they were: `EventFields.format` tells them apart.

The message (format 2, the `outboxFormat` application property): body = the app's data as it
published it, MessageId = event id, SessionId = aggregate id, Subject = action (or the event's
own subject), application properties `aggregateType`, `<aggregateType>Id` (`orderId`),
`version`, `action`, `outboxFormat`, and `traceparent`/`Diagnostic-Id` when the event carries a
trace context; the broker adapter adds the CloudEvents attributes (`cosmos_outbox.servicebus`).
A scheduled event's message has `deliverAt` (when it was due, UTC, ISO 8601) and no `version`.
An event stored in format 1 is sent as it was: its data the body, no `outboxFormat`. The claim
check: a message too large for the topic travels with an empty body and the CloudEvents
`dataref` attribute, the reference of its body in the payload store, stored under
`payload_name(record)`.
"""

from __future__ import annotations

from cosmos_outbox._mapper.cloudevents import (
    application_properties as application_properties,
)
from cosmos_outbox._mapper.cloudevents import (
    message_facts as message_facts,
)
from cosmos_outbox._mapper.cloudevents import (
    outgoing as outgoing,
)
from cosmos_outbox._mapper.cloudevents import (
    sent_facts as sent_facts,
)
from cosmos_outbox._mapper.document import (
    EVENT_TYPE as EVENT_TYPE,
)
from cosmos_outbox._mapper.document import (
    FORMAT_1_ENVELOPE as FORMAT_1_ENVELOPE,
)
from cosmos_outbox._mapper.document import (
    EventFields as EventFields,
)
from cosmos_outbox._mapper.document import (
    Identifier as Identifier,
)
from cosmos_outbox._mapper.document import (
    StoredFields as StoredFields,
)
from cosmos_outbox._mapper.document import (
    created_at_of as created_at_of,
)
from cosmos_outbox._mapper.document import (
    document_created_at as document_created_at,
)
from cosmos_outbox._mapper.document import (
    envelope_and_data as envelope_and_data,
)
from cosmos_outbox._mapper.document import (
    event_envelope as event_envelope,
)
from cosmos_outbox._mapper.document import (
    fields as fields,
)
from cosmos_outbox._mapper.document import (
    named_aggregate as named_aggregate,
)
from cosmos_outbox._mapper.document import (
    outbox_record as outbox_record,
)
from cosmos_outbox._mapper.document import (
    parse_time as parse_time,
)
from cosmos_outbox._mapper.document import (
    plain_fields as plain_fields,
)
from cosmos_outbox._mapper.document import (
    read_feed as read_feed,
)
from cosmos_outbox._mapper.document import (
    reserved_property as reserved_property,
)
from cosmos_outbox._mapper.document import (
    selected as selected,
)
from cosmos_outbox._mapper.document import (
    stored_body as stored_body,
)
from cosmos_outbox._mapper.document import (
    unreadable as unreadable,
)
from cosmos_outbox._mapper.document import (
    without_system_keys as without_system_keys,
)
from cosmos_outbox._mapper.event import (
    ENVELOPE_FIELDS as ENVELOPE_FIELDS,
)
from cosmos_outbox._mapper.event import (
    MAX_TTL_SECONDS as MAX_TTL_SECONDS,
)
from cosmos_outbox._mapper.event import (
    Schedule as Schedule,
)
from cosmos_outbox._mapper.event import (
    aggregate_event_document as aggregate_event_document,
)
from cosmos_outbox._mapper.event import (
    aggregate_partition as aggregate_partition,
)
from cosmos_outbox._mapper.event import (
    body_text as body_text,
)
from cosmos_outbox._mapper.event import (
    cancelled as cancelled,
)
from cosmos_outbox._mapper.event import (
    due_text as due_text,
)
from cosmos_outbox._mapper.event import (
    event_document as event_document,
)
from cosmos_outbox._mapper.event import (
    event_documents as event_documents,
)
from cosmos_outbox._mapper.event import (
    released as released,
)
from cosmos_outbox._mapper.event import (
    schedule_of as schedule_of,
)
from cosmos_outbox._mapper.event import (
    scheduled as scheduled,
)
from cosmos_outbox._mapper.event import (
    scheduled_ttl as scheduled_ttl,
)
from cosmos_outbox._mapper.event import (
    stamp as stamp,
)
from cosmos_outbox._mapper.message import (
    Headers as Headers,
)
from cosmos_outbox._mapper.message import (
    MessageEnvelope as MessageEnvelope,
)
from cosmos_outbox._mapper.message import (
    SentFields as SentFields,
)
from cosmos_outbox._mapper.message import (
    claim_check as claim_check,
)
from cosmos_outbox._mapper.message import (
    headers_of as headers_of,
)
from cosmos_outbox._mapper.message import (
    message_envelope as message_envelope,
)
from cosmos_outbox._mapper.message import (
    payload_name as payload_name,
)
from cosmos_outbox._mapper.message import (
    sent_fields as sent_fields,
)
from cosmos_outbox._mapper.message import (
    to_message as to_message,
)
from cosmos_outbox._mapper.notices import (
    DISCARD_NAMESPACE as DISCARD_NAMESPACE,
)
from cosmos_outbox._mapper.notices import (
    DISCARD_NOTICE_SUBJECT as DISCARD_NOTICE_SUBJECT,
)
from cosmos_outbox._mapper.notices import (
    NOTICE_NAMESPACE as NOTICE_NAMESPACE,
)
from cosmos_outbox._mapper.notices import (
    QUARANTINE_NOTICE_SUBJECT as QUARANTINE_NOTICE_SUBJECT,
)
from cosmos_outbox._mapper.notices import (
    discard_notice as discard_notice,
)
from cosmos_outbox._mapper.notices import (
    discard_notice_id as discard_notice_id,
)
from cosmos_outbox._mapper.notices import (
    notice_id as notice_id,
)
from cosmos_outbox._mapper.notices import (
    quarantine_notice as quarantine_notice,
)
from cosmos_outbox._mapper.operation import (
    ACTIVE_QUERY as ACTIVE_QUERY,
)
from cosmos_outbox._mapper.operation import (
    OPERATION_TYPE as OPERATION_TYPE,
)
from cosmos_outbox._mapper.operation import (
    OPERATIONS_PARTITION as OPERATIONS_PARTITION,
)
from cosmos_outbox._mapper.operation import (
    RECENT_QUERY as RECENT_QUERY,
)
from cosmos_outbox._mapper.operation import (
    CanaryItem as CanaryItem,
)
from cosmos_outbox._mapper.operation import (
    OperationCounts as OperationCounts,
)
from cosmos_outbox._mapper.operation import (
    OperationRecord as OperationRecord,
)
from cosmos_outbox._mapper.operation import (
    OperationScope as OperationScope,
)
from cosmos_outbox._mapper.operation import (
    operation_document as operation_document,
)
from cosmos_outbox._mapper.operation import (
    operation_record as operation_record,
)
from cosmos_outbox._mapper.properties import (
    AGGREGATE_TYPE_PROPERTY as AGGREGATE_TYPE_PROPERTY,
)
from cosmos_outbox._mapper.properties import (
    DELIVER_AT_PROPERTY as DELIVER_AT_PROPERTY,
)
from cosmos_outbox._mapper.properties import (
    FORMAT as FORMAT,
)
from cosmos_outbox._mapper.properties import (
    FORMAT_PROPERTY as FORMAT_PROPERTY,
)
from cosmos_outbox._mapper.properties import (
    REDRIVE_PROPERTY as REDRIVE_PROPERTY,
)
from cosmos_outbox._mapper.properties import (
    RESUBMISSION_PROPERTY as RESUBMISSION_PROPERTY,
)
from cosmos_outbox._mapper.properties import (
    TARGET_PROPERTY as TARGET_PROPERTY,
)
from cosmos_outbox._mapper.properties import (
    TRACEPARENT_PROPERTY as TRACEPARENT_PROPERTY,
)
from cosmos_outbox._mapper.queries import (
    AGGREGATE_PARTITIONS as AGGREGATE_PARTITIONS,
)
from cosmos_outbox._mapper.queries import (
    SCHEDULED_WAITING as SCHEDULED_WAITING,
)
from cosmos_outbox._mapper.release_message import (
    RELEASE_SUBJECT as RELEASE_SUBJECT,
)
from cosmos_outbox._mapper.release_message import (
    release_body as release_body,
)
from cosmos_outbox._mapper.release_message import (
    release_of as release_of,
)
