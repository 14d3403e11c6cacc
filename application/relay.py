"""The relay use case: outbox records in, broker messages out. Generic over aggregates.

Events are grouped per aggregate (session) and ordered by version inside it, then packed into
size-limited batches, a new batch whenever one is full. A send failure propagates, so the
trigger's retry policy redelivers the same documents (the topic drops the duplicates). An event
that cannot become a message is quarantined with its reason and skipped.

Every invocation writes one structured log line (fields in `extra`), on failure too, and
records its metrics and a PRODUCER span per batch through `application.telemetry`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from application.outbox import (
    FeedItem,
    NotAnEvent,
    OutboxMessage,
    OutboxRecord,
    Unreadable,
    to_message,
)
from application.ports import MessageBatch, MessagePublisher, Quarantine
from application.telemetry import RelayTelemetry, SentEvent, error_type

logger = logging.getLogger(__name__)


@dataclass
class RelayReport:
    received: int = 0
    sent: int = 0
    batches: int = 0
    skipped: int = 0
    quarantined: list[str] = field(default_factory=list)
    max_lag_ms: float | None = None


class Relay:
    def __init__(
        self,
        publisher: MessagePublisher,
        quarantine: Quarantine,
        telemetry: RelayTelemetry | None = None,
    ) -> None:
        self._publisher = publisher
        self._quarantine = quarantine
        self._telemetry = telemetry or RelayTelemetry(destination="unknown")

    def relay(self, items: Iterable[FeedItem]) -> RelayReport:
        report = RelayReport()
        try:
            self._relay(items, report)
        except Exception as exc:
            self._telemetry.failed(exc)
            _log(report, exc)
            raise
        _log(report, None)
        return report

    def _relay(self, items: Iterable[FeedItem], report: RelayReport) -> None:
        messages: dict[str, tuple[OutboxMessage, OutboxRecord]] = {}
        for item in items:
            report.received += 1
            match item:
                case NotAnEvent():
                    report.skipped += 1
                case Unreadable():
                    self._put_aside(item, item.event_id, item.reason, report)
                case OutboxRecord():
                    messages[item.event_id] = (to_message(item), item)
                    report.max_lag_ms = _max_lag(report.max_lag_ms, item)

        batch = self._publisher.create_batch()
        in_batch: list[SentEvent] = []
        for message, record in _in_session_order(messages.values()):
            if batch.try_add(message):
                in_batch.append(_sent_event(record))
                continue
            if len(batch):
                self._send(batch, in_batch, report)
                batch, in_batch = self._publisher.create_batch(), []
            if batch.try_add(message):
                in_batch.append(_sent_event(record))
            else:
                self._put_aside(
                    record,
                    record.event_id,
                    f"message of {len(message.body)} bytes is larger than the entity's "
                    "message size limit",
                    report,
                )
        if len(batch):
            self._send(batch, in_batch, report)

    def _send(self, batch: MessageBatch, events: list[SentEvent], report: RelayReport) -> None:
        self._telemetry.send(events, lambda: self._publisher.send(batch))
        report.sent += len(batch)
        report.batches += 1

    def _put_aside(
        self, event: OutboxRecord | Unreadable, event_id: str, reason: str, report: RelayReport
    ) -> None:
        logger.error("relay quarantined event %s: %s", event_id, reason)
        self._quarantine.put(event, reason=reason)
        self._telemetry.quarantined()
        report.quarantined.append(event_id)


def _sent_event(record: OutboxRecord) -> SentEvent:
    created = None if record.created_at is None else _aware(record.created_at).timestamp()
    return SentEvent(record.traceparent, created)


def _log(report: RelayReport, exc: Exception | None) -> None:
    """One line per invocation, text for humans and the same values as fields (`extra`), so
    Application Insights keeps them as custom dimensions; written on failure too."""
    lag = None if report.max_lag_ms is None else round(report.max_lag_ms)
    fields: dict[str, object] = {
        "outbox.outcome": "failed" if exc else "ok",
        "outbox.received": report.received,
        "outbox.sent": report.sent,
        "outbox.batches": report.batches,
        "outbox.skipped": report.skipped,
        "outbox.quarantined": len(report.quarantined),
        "outbox.max_lag_ms": lag,
    }
    if exc is not None:
        fields["error.type"] = error_type(exc)
    logger.log(
        logging.ERROR if exc else logging.INFO,
        "relay invocation %s: received=%d sent=%d batches=%d skipped=%d quarantined=%d "
        "max_lag_ms=%s%s",
        fields["outbox.outcome"], report.received, report.sent, report.batches, report.skipped,
        len(report.quarantined), lag, f" error.type={fields['error.type']}" if exc else "",
        extra=fields,
    )


def _in_session_order(
    items: Iterable[tuple[OutboxMessage, OutboxRecord]],
) -> list[tuple[OutboxMessage, OutboxRecord]]:
    """Sessions in order of first appearance; versions ascending inside each session."""
    first_seen: dict[str, int] = {}
    listed = list(items)
    for message, _ in listed:
        first_seen.setdefault(message.session_id, len(first_seen))
    return sorted(listed, key=lambda item: (first_seen[item[0].session_id], item[0].version))


def _max_lag(current: float | None, record: OutboxRecord) -> float | None:
    if record.created_at is None:
        return current
    at = _aware(record.created_at)
    lag = (datetime.now(UTC) - at).total_seconds() * 1000
    return lag if current is None else max(current, lag)


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
