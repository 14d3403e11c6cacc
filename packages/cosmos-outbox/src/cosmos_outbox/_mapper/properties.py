"""The names an outbox message carries beside its body: the application properties that
tell its format, its target, its resubmission, its re-drive, its due time (the message's form
and the stored event's checks share them)."""

from __future__ import annotations

#: The message format of an event stored in this module's format (the `outboxFormat`
#: application property); format 1 is the one before, without the property.
FORMAT = 2
#: The application property that tells a message's format (2: the body is the app's data and
#: the envelope is in the properties); a message without it is of format 1 (the body holds the
#: envelope too).
FORMAT_PROPERTY = "outboxFormat"
#: The application property naming the one subscription (or queue) a message is for: a dead
#: letter's resubmission, a targeted re-drive, the notice that gives a version up at one
#: subscriber. Each subscription's rule lets through what names no target or names it
#: (`NOT EXISTS(outboxTarget) OR outboxTarget = '<subscription>'`); the library's `Dispatcher`
#: skips what names another subscription when it is told its own (`subscription=`).
TARGET_PROPERTY = "outboxTarget"
#: The number of a dead letter's resubmission (1, 2, ...: one more each time it is resubmitted
#: after it was dead-lettered again); part of the resubmission's MessageId.
RESUBMISSION_PROPERTY = "outboxResubmission"
#: The id of the re-drive a message was sent by (part of its MessageId).
REDRIVE_PROPERTY = "outboxRedrive"
#: The application property of a scheduled event's message: when it was due.
DELIVER_AT_PROPERTY = "deliverAt"
#: The application property naming the event's aggregate type (its id is `<aggregateType>Id`).
AGGREGATE_TYPE_PROPERTY = "aggregateType"
#: The application property of the W3C trace context the event was published in.
TRACEPARENT_PROPERTY = "traceparent"
