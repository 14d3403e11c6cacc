"""The relay use case: outbox records in, broker messages out. Generic over aggregates.

Events are grouped per aggregate (session) and ordered by version inside it, then packed into
size-limited batches, a new batch whenever one is full. A send failure propagates, so the
trigger's retry policy redelivers the same documents (the topic drops the duplicates). An event
that cannot become a message is quarantined with its reason and skipped.
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
    def __init__(self, publisher: MessagePublisher, quarantine: Quarantine) -> None:
        self._publisher = publisher
        self._quarantine = quarantine

    def relay(self, items: Iterable[FeedItem]) -> RelayReport:
        report = RelayReport()
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
        for message, record in _in_session_order(messages.values()):
            if batch.try_add(message):
                continue
            if len(batch):
                self._send(batch, report)
                batch = self._publisher.create_batch()
            if not batch.try_add(message):
                self._put_aside(
                    record,
                    record.event_id,
                    f"message of {len(message.body)} bytes is larger than the entity's "
                    "message size limit",
                    report,
                )
        if len(batch):
            self._send(batch, report)
        logger.info(
            "relay invocation: received=%d sent=%d batches=%d skipped=%d quarantined=%d "
            "max_lag_ms=%s",
            report.received,
            report.sent,
            report.batches,
            report.skipped,
            len(report.quarantined),
            None if report.max_lag_ms is None else round(report.max_lag_ms),
        )
        return report

    def _send(self, batch: MessageBatch, report: RelayReport) -> None:
        self._publisher.send(batch)
        report.sent += len(batch)
        report.batches += 1

    def _put_aside(self, event: OutboxRecord | Unreadable, event_id: str, reason: str,
                   report: RelayReport) -> None:
        logger.error("relay quarantined event %s: %s", event_id, reason)
        self._quarantine.put(event, reason=reason)
        report.quarantined.append(event_id)


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
    at = record.created_at
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    lag = (datetime.now(UTC) - at).total_seconds() * 1000
    return lag if current is None else max(current, lag)
