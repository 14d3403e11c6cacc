"""The relay use case: change-feed documents in, broker messages out.

Events are grouped per contact (session) and ordered by version inside it, then packed into
size-limited batches, a new batch whenever one is full. A send failure propagates, so the
trigger's retry policy redelivers the same documents (the topic drops the duplicates). A
document that cannot become a message is quarantined with its reason and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from application.outbox import EVENT_TYPE, PoisonEventError, to_message
from application.ports import MessagePublisher, OutboxMessage, Quarantine

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

    def relay(self, documents: Iterable[Mapping[str, Any]]) -> RelayReport:
        report = RelayReport()
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
        for message, document in _in_session_order(messages.values()):
            if batch.try_add(message):
                continue
            if len(batch):
                self._send(batch, report)
                batch = self._publisher.create_batch()
            if not batch.try_add(message):
                self._put_aside(
                    document,
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

    def _send(self, batch: Any, report: RelayReport) -> None:
        self._publisher.send(batch)
        report.sent += len(batch)
        report.batches += 1

    def _put_aside(self, document: Mapping[str, Any], reason: str, report: RelayReport) -> None:
        doc_id = str(document.get("id"))
        logger.error("relay quarantined event %s: %s", doc_id, reason)
        self._quarantine.put(dict(document), reason=reason)
        report.quarantined.append(doc_id)


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
    data = document.get("data")
    created = data.get("createdAt") if isinstance(data, Mapping) else None
    if not isinstance(created, str):
        return current
    try:
        at = datetime.fromisoformat(created)
    except ValueError:
        return current
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    lag = (datetime.now(UTC) - at).total_seconds() * 1000
    return lag if current is None else max(current, lag)
