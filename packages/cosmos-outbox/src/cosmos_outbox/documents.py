"""The documents the outbox stores in the app's container, by kind (`EVENT_TYPE`, `SEQUENCE_TYPE`,
`IDEMPOTENCY_TYPE`, `QUARANTINE_TYPE`: each document's `type`), and the functions that make and
read them: an aggregate's document and its events' (`aggregate_document`,
`aggregate_event_document`, `event_documents`), the operations of one commit
(`commit_operations`), and the change feed read back as the relay reads it (`read_feed`;
`outbox_record` of one event document, `unreadable` of one it cannot relay,
`envelope_and_data`). What a stored event says, whatever its format (`event_fields`: an
`EventFields`; `scheduled`, whether it is a scheduled event's; `schedule_of`, its
`Schedule`: due, released, cancelled; `parse_time`, a stored time;
`document_created_at`, its creation time); where an event set aside is kept (`quarantine_id`);
the operators' bulk operations (`OPERATION_TYPE`, in their partition `OPERATIONS_PARTITION`:
`operation_document`, `operation_record`, kept by `OperationStore`); the failed messages kept
as data (`FAILED_MESSAGE_TYPE`, a `FailureRecord` read by `failure_record`, and their groups'
summaries, `FAILURE_GROUP_TYPE`: OUTBOX_FAILURE_INGEST).
For tools, test kits and stores of your own that look at what the outbox wrote. An event's forms
are the mapper's (`cosmos_outbox._mapper`), the other documents the write path's
(`cosmos_outbox._write`): each shape is written and read in one module."""

from __future__ import annotations

from cosmos_outbox._domain import new_id, utc_text
from cosmos_outbox._mapper import (
    EVENT_TYPE,
    OPERATION_TYPE,
    OPERATIONS_PARTITION,
    EventFields,
    Schedule,
    aggregate_event_document,
    document_created_at,
    envelope_and_data,
    event_documents,
    operation_document,
    operation_record,
    outbox_record,
    parse_time,
    read_feed,
    schedule_of,
    scheduled,
    unreadable,
)
from cosmos_outbox._mapper import fields as event_fields
from cosmos_outbox._mapper.failure import (
    FAILED_MESSAGE_TYPE,
    FAILURE_GROUP_TYPE,
    FailureRecord,
    failure_record,
)
from cosmos_outbox._quarantine import QUARANTINE_TYPE, quarantine_id
from cosmos_outbox._write.idempotency import IDEMPOTENCY_TYPE
from cosmos_outbox._write.streams import SEQUENCE_TYPE
from cosmos_outbox._write.unit_of_work import aggregate_document, commit_operations
from cosmos_outbox.operations._bulk._operation import OperationStore

__all__ = [
    "EVENT_TYPE",
    "FAILED_MESSAGE_TYPE",
    "FAILURE_GROUP_TYPE",
    "IDEMPOTENCY_TYPE",
    "OPERATIONS_PARTITION",
    "OPERATION_TYPE",
    "QUARANTINE_TYPE",
    "SEQUENCE_TYPE",
    "EventFields",
    "FailureRecord",
    "OperationStore",
    "Schedule",
    "aggregate_document",
    "aggregate_event_document",
    "commit_operations",
    "document_created_at",
    "envelope_and_data",
    "event_documents",
    "event_fields",
    "failure_record",
    "new_id",
    "operation_document",
    "operation_record",
    "outbox_record",
    "parse_time",
    "quarantine_id",
    "read_feed",
    "schedule_of",
    "scheduled",
    "unreadable",
    "utc_text",
]
