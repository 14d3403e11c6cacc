"""Tolerant dispatch: one Service Bus message in, handled if it is an event of the aggregate type
this subscriber projects, recorded and skipped otherwise, so a new event type (or a missing
subscription filter) never stalls a session.

- not an outbox event at all (not a CloudEvent, no version, a subject that is not its
  aggregate's id): `UnreadableEventError` propagates, the host abandons the message and
  dead-letters it after the subscription's MaxDeliveryCount; given the means to settle
  (`handle(message, settle=...)`: `_settlement`), the dispatcher dead-letters it itself at once,
  and any message whose handling failed on its last delivery (`max_delivery_count`), with the
  exception's type and message as the dead-letter reason and description;
- an event of another aggregate type: acknowledged, logged (warning) and counted
  (`subscriber.events.ignored`, reason `other aggregate type`);
- an action the projection does not handle: its version is taken as applied (the projector's
  inbox record says `ignored`), logged (info when the app lists it in `ignored_actions`, a
  warning otherwise: an app deployed with a new event type before this subscriber knew it) and
  counted;
- a message sent to another subscription (`outboxTarget`: a dead letter's resubmission, a
  targeted re-drive or discard notice), when the dispatcher knows its own (`subscription=`):
  acknowledged, logged and counted (reason `another subscription's`): its rule should have
  kept it out (`NOT EXISTS(outboxTarget) OR outboxTarget = '<subscription>'`); without
  `subscription=` the subscription's rule is trusted;
- anything else: projected (`Projector.handle`), logged with its outcome.

A claim-check message (`cloudEvents_dataref`) has its data fetched from the payload store
before anything else (`payloads`; by default the store the app settings name,
OutboxPayloadStorage or AzureWebJobsStorage, built on the first such message). A payload that
cannot be fetched (missing, expired, the store down, a reference outside the store) raises: the
message is abandoned, redelivered, and dead-lettered after MaxDeliveryCount; each failed
delivery logs an error with the reason (`outcome` `payload-unavailable`, `reason`, `dataref`,
`messageId`, `deliveryCount`).

Every log line carries the values as fields (`extra`): `eventId`, `aggregateType`,
`aggregateId` (and `<aggregateType>Id`), `action`, `version`, `deliveryCount`, `outcome`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypedDict

from cosmos_outbox._sync_over_async import as_async
from cosmos_outbox.errors import PayloadStoreError
from cosmos_outbox.ports import AsyncPayloadStore, PayloadStore
from cosmos_outbox.settings import SettingsError
from cosmos_outbox.subscriber import _settlement
from cosmos_outbox.subscriber import _telemetry as telemetry
from cosmos_outbox.subscriber._events import (
    IncomingEvent,
    UnreadableEventError,
    dataref_of,
    from_message,
)
from cosmos_outbox.subscriber._projector import AsyncProjector, Outcome, Result
from cosmos_outbox.subscriber._settlement import DEFAULT_MAX_DELIVERY_COUNT, Incoming, incoming

__all__ = ["AsyncDispatcher", "settings_payloads"]

logger = logging.getLogger("cosmos_outbox.subscriber")


class DispatcherOptions(TypedDict, total=False):
    """A dispatcher's options beside its aggregate type, projector and payload store, said once
    for both flavours: the actions it acknowledges without handling (`ignored_actions`), the
    aggregate type of events that name none (`default_aggregate_type`), the subscription (or
    queue) it reads (`subscription`: a message targeted at another is skipped), and its
    MaxDeliveryCount (`max_delivery_count`: a failure on that delivery is the last one)."""

    ignored_actions: Iterable[str]
    default_aggregate_type: str | None
    subscription: str | None
    max_delivery_count: int


class AsyncDispatcher:
    """Handles messages of `aggregate_type` with `projector()` (built on first use); fetches
    claim-check payloads with `payloads()` (built on first use; by default from the settings,
    on the SDK's `aio` client). `cosmos_outbox.aio.Dispatcher`; the sync `Dispatcher` runs
    it."""

    def __init__(
        self,
        aggregate_type: str,
        projector: Callable[[], AsyncProjector],
        *,
        ignored_actions: Iterable[str] = (),
        default_aggregate_type: str | None = None,
        payloads: Callable[[], AsyncPayloadStore | PayloadStore] | None = None,
        subscription: str | None = None,
        max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT,
    ) -> None:
        if max_delivery_count < 1:
            raise ValueError(f"max_delivery_count: at least 1, not {max_delivery_count}")
        self.aggregate_type = aggregate_type
        #: the subscription's MaxDeliveryCount: a failure on that delivery is the last one
        self.max_delivery_count = max_delivery_count
        #: the subscription (or queue) it reads: a message targeted at another is skipped
        self.subscription = subscription
        self._projector = projector
        self._ignored = frozenset(ignored_actions)
        self._default_type = default_aggregate_type
        self._payloads = payloads or settings_payloads(asynchronous=True)

    async def handle(self, message: Any, *, settle: Any = None) -> Result | None:
        """Handle one message (a Functions trigger's, or an azure-servicebus receiver's); None
        when it was not for this subscriber, or when it failed and was dead-lettered. With
        `settle` (`_settlement`: the function's message actions, or the receiver), it settles
        the message too: completed when handled; on a failure, abandoned and the error raised
        while a later delivery may succeed, dead-lettered with the exception's type and message
        when none will (the last delivery, or a message that is not an outbox event)."""
        read = incoming(message)
        if settle is None:
            return await self._handle(read)
        try:
            result = await self._handle(read)
        except Exception as exc:
            last = read.delivery_count is not None and (
                read.delivery_count >= self.max_delivery_count
            )
            if not (last or isinstance(exc, UnreadableEventError)):
                await _settlement.settle(settle, "abandon", message)
                raise
            reason, description = _settlement.dead_letter_words(exc)
            await _settlement.settle(
                settle, "dead-letter", message, reason=reason, description=description
            )
            _dead_lettered(read, reason, description, last=last)
            return None
        await _settlement.settle(settle, "complete", message)
        return result

    async def _handle(self, message: Incoming) -> Result | None:
        try:
            dataref = dataref_of(message.application_properties)
            fetched = await as_async(self._payloads()).get(dataref) if dataref is not None else None
            event = from_message(
                message.body,
                content_type=message.content_type,
                application_properties=message.application_properties,
                default_aggregate_type=self._default_type,
                payloads=lambda _: fetched or b"",
            )
        except (PayloadStoreError, SettingsError) as exc:
            _payload_unavailable(message, exc)
            raise
        fields = _fields(event, message.delivery_count)
        if event.aggregate_type != self.aggregate_type:
            _ignored(
                event,
                fields,
                "other aggregate type",
                logging.WARNING,
                "event %s of %s %s ignored: this subscriber projects %s (is the "
                "subscription's aggregateType filter missing?)",
                event.event_id,
                event.aggregate_type,
                event.aggregate_id,
                self.aggregate_type,
            )
            return None
        if self.subscription is not None and event.target not in (None, self.subscription):
            _ignored(
                event,
                fields,
                "another subscription's",
                logging.WARNING,
                "event %s (%s %s, version %d) was sent to subscription %s, not this one (%s): "
                "skipped (add NOT EXISTS(outboxTarget) OR outboxTarget = '%s' to this "
                "subscription's rule)",
                event.event_id,
                event.aggregate_type,
                event.aggregate_id,
                event.version,
                event.target,
                self.subscription,
                self.subscription,
            )
            return None
        result = await self._projector().handle(event)
        if result.outcome is Outcome.IGNORED:
            reason = "ignored action" if event.type in self._ignored else "unknown action"
            _ignored(
                event,
                {**fields, "outcome": result.outcome.value},
                reason,
                logging.INFO if reason == "ignored action" else logging.WARNING,
                "event %s (%s %s, version %d): action %s is not projected (%s); its version "
                "is taken as applied",
                event.event_id,
                event.aggregate_type,
                event.aggregate_id,
                event.version,
                event.type,
                reason,
            )
            return result
        logger.info(
            "event %s (%s %s, version %d, delivery %s): %s",
            event.event_id,
            event.aggregate_type,
            event.aggregate_id,
            event.version,
            message.delivery_count,
            result.outcome.value,
            extra={**fields, "outcome": result.outcome.value, "applied": result.applied},
        )
        return result


def _dead_lettered(message: Incoming, reason: str, description: str, *, last: bool) -> None:
    """Said when the dispatcher dead-lettered a message itself (`handle(settle=...)`)."""
    why = (
        "its last delivery failed"
        if last
        else "it is not an outbox event: no delivery will read it"
    )
    logger.error(
        "message %s (delivery %s): dead-lettered, %s: %s: %s",
        message.message_id,
        message.delivery_count,
        why,
        reason,
        description,
        extra={
            "messageId": message.message_id,
            "deliveryCount": message.delivery_count,
            "outcome": "dead-lettered",
            "reason": reason,
            "error.type": reason,
        },
    )


def _payload_unavailable(message: Incoming, exc: Exception) -> None:
    """Said when a claim-check message's payload could not be fetched (it is abandoned)."""
    dataref = dataref_of(message.application_properties)
    logger.error(
        "message %s (delivery %s): its payload could not be fetched from %s: %s; "
        "abandoned (dead-lettered after the subscription's MaxDeliveryCount)",
        message.message_id,
        message.delivery_count,
        dataref,
        exc,
        extra={
            "messageId": message.message_id,
            "eventId": message.message_id,
            "deliveryCount": message.delivery_count,
            "dataref": dataref,
            "outcome": "payload-unavailable",
            "reason": str(exc),
            "error.type": type(exc).__name__,
        },
    )


def settings_payloads(*, asynchronous: bool) -> Callable[[], AsyncPayloadStore | PayloadStore]:
    """The payload store the app settings name, built once, on the first claim-check message
    (never at indexing: azure-storage-blob is imported then)."""
    lock = threading.Lock()
    built: list[AsyncPayloadStore | PayloadStore] = []

    def payloads() -> AsyncPayloadStore | PayloadStore:
        with lock:
            if not built:
                from cosmos_outbox.blob import BlobPayloadStore
                from cosmos_outbox.blob.aio import BlobPayloadStore as AsyncBlobPayloadStore
                from cosmos_outbox.settings import load_payload_settings

                connection = load_payload_settings().payload_storage()
                if connection is None:
                    raise SettingsError(
                        "invalid settings: a message's data is in the outbox's payload store "
                        "(dataref): set OutboxPayloadStorage (or AzureWebJobsStorage) and "
                        "OUTBOX_PAYLOAD_CONTAINER to read it"
                    )
                kind = AsyncBlobPayloadStore if asynchronous else BlobPayloadStore
                if connection.connection_string is not None:
                    built.append(
                        kind.from_connection_string(
                            connection.connection_string.get_secret_value(), connection.container
                        )
                    )
                else:
                    assert connection.service_uri is not None
                    built.append(
                        kind.from_service_uri(connection.service_uri, connection.container)
                    )
            return built[0]

    return payloads


def _ignored(
    event: IncomingEvent,
    fields: dict[str, Any],
    reason: str,
    level: int,
    message: str,
    *args: object,
) -> None:
    """An event acknowledged without a projection change: counted by `reason`, and logged
    (`message`, `args`) as its caller's line, its fields `fields` with the outcome and reason."""
    telemetry.ignored(event.type, reason, event.aggregate_type)
    logger.log(
        level,
        message,
        *args,
        extra={"outcome": "ignored", **fields, "reason": reason},
        stacklevel=2,
    )


def _fields(event: IncomingEvent, delivery_count: int | None) -> dict[str, Any]:
    return {
        "eventId": event.event_id,
        "aggregateType": event.aggregate_type,
        "aggregateId": event.aggregate_id,
        f"{event.aggregate_type}Id": event.aggregate_id,
        "action": event.type,
        "version": event.version,
        "deliveryCount": delivery_count,
    }
