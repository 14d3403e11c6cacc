"""The relay à la carte, for tools, benchmarks and tests that drive it without a Functions host:
`Relay` (change-feed documents in, messages out through a publisher; `RelayReport` what one
invocation did), its `Quarantine` (stored events that cannot become messages) and
`RelayTelemetry`; the outbox record and message it sends (`OutboxRecord`, `OutboxMessage`,
`to_message`; `Unreadable` a document it could not read; `claim_check` a message whose body went
to blob storage, `payload_name` where its body is stored), scheduled events' releases at their
due time (`Releases`; `ReleaseOutcome` what one did) and the quarantine notice that takes a
set-aside event's place (`quarantine_notice`, `notice_id`, `QUARANTINE_NOTICE_SUBJECT`). An app
registers the relay with `Outbox.function_app` or `Outbox.relay_blueprint`."""

from __future__ import annotations

from cosmos_outbox._mapper import (
    QUARANTINE_NOTICE_SUBJECT,
    claim_check,
    notice_id,
    payload_name,
    quarantine_notice,
    to_message,
)
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._records import OutboxMessage, OutboxRecord, Unreadable
from cosmos_outbox._relay.forwarding import Relay, RelayReport
from cosmos_outbox._relay.releases import ReleaseOutcome, Releases
from cosmos_outbox.telemetry import RelayTelemetry

__all__ = [
    "QUARANTINE_NOTICE_SUBJECT",
    "OutboxMessage",
    "OutboxRecord",
    "Quarantine",
    "Relay",
    "RelayReport",
    "RelayTelemetry",
    "ReleaseOutcome",
    "Releases",
    "Unreadable",
    "claim_check",
    "notice_id",
    "payload_name",
    "quarantine_notice",
    "to_message",
]
