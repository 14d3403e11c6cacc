"""The relay use case: change-feed documents in, broker messages out.

Events are grouped per contact (session) and ordered by version inside it, then packed into
size-limited batches, a new batch whenever one is full. A send failure propagates, so the
trigger's retry policy redelivers the same documents (the topic drops the duplicates). A
document that cannot become a message is quarantined with its reason and skipped.

Every invocation writes one structured log line (fields in `extra`), on failure too, and
records its metrics and a PRODUCER span per batch through `application.telemetry`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from application.outbox import EVENT_TYPE, PoisonEventError, to_message
from application.ports import MessageBatch, MessagePublisher, OutboxMessage, Quarantine
from application.telemetry import RelayTelemetry, SentEvent, created_at, error_type

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

    def relay(self, documents: Iterable[Mapping[str, Any]]) -> RelayReport:
        report = RelayReport()
        try:
            self._relay(documents, report)
        except Exception as exc:
            self._telemetry.failed(exc)
            _log(report, exc)
            raise
        _log(report, None)
        return report

    def _relay(self, documents: Iterable[Mapping[str, Any]], report: RelayReport) -> None:
        messages: dict[str, tuple[OutboxMessage, Mapping[str, Any]]] = {}
        for document in documents:
            report.received += 1
            if document.get("type") != EVENT_TYPE:
                report.skipped += 1
                continue
            try:
                message = to_message(document)
            except PoisonEventError as exc:
                self._put_aside(document, str(exc), report)
                continue
            messages[message.message_id] = (message, document)
            report.max_lag_ms = _max_lag(report.max_lag_ms, document)

        batch = self._publisher.create_batch()
        in_batch: list[SentEvent] = []
        for message, document in _in_session_order(messages.values()):
            if batch.try_add(message):
                in_batch.append(_sent_event(message, document))
                continue
            if len(batch):
                self._send(batch, in_batch, report)
                batch, in_batch = self._publisher.create_batch(), []
            if batch.try_add(message):
                in_batch.append(_sent_event(message, document))
            else:
                self._put_aside(
                    document,
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

    def _put_aside(self, document: Mapping[str, Any], reason: str, report: RelayReport) -> None:
        doc_id = str(document.get("id"))
        logger.error("relay quarantined event %s: %s", doc_id, reason)
        self._quarantine.put(dict(document), reason=reason)
        self._telemetry.quarantined()
        report.quarantined.append(doc_id)


def _sent_event(message: OutboxMessage, document: Mapping[str, Any]) -> SentEvent:
    traceparent = message.application_properties.get("traceparent")
    return SentEvent(traceparent if isinstance(traceparent, str) else None, created_at(document))


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
    items: Iterable[tuple[OutboxMessage, Mapping[str, Any]]],
) -> list[tuple[OutboxMessage, Mapping[str, Any]]]:
    """Sessions in order of first appearance; versions ascending inside each session."""
    first_seen: dict[str, int] = {}
    listed = list(items)
    for message, _ in listed:
        first_seen.setdefault(message.session_id, len(first_seen))
    return sorted(listed, key=lambda item: (first_seen[item[0].session_id], item[0].version))


def _max_lag(current: float | None, document: Mapping[str, Any]) -> float | None:
    at = created_at(document)
    if at is None:
        return current
    lag = (datetime.now(UTC).timestamp() - at) * 1000
    return lag if current is None else max(current, lag)
