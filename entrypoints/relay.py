"""Relay glue: the trigger's documents parsed into typed outbox records at the store's boundary,
handed to the relay use case."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from application.backlog import Backlog, report_backlog
from application.relay import Relay, RelayReport
from entrypoints.bootstrap import Dependencies
from infra.cosmos.documents import read_feed


def relay_documents(documents: Iterable[Mapping[str, Any]], relay: Relay) -> RelayReport:
    """Relay one trigger invocation. Raises when a send fails, so the retry policy redelivers
    the same documents and the lease does not move."""
    return relay.relay(read_feed(documents))


def estimate_backlog(deps: Dependencies) -> Backlog:
    """One timer tick: estimate the backlog, record the gauges, apply the TTL guard."""
    return report_backlog(deps.backlog, deps.telemetry, event_ttl_seconds=deps.event_ttl_seconds)
