"""The backlog timer's last hour, kept for the operators' console's chart
(`cosmos_outbox._relay.backlog_history`): the last 60 readings in one document, what a failed
write does (moved from the console's tests: the history is the relay's)."""

from __future__ import annotations

from typing import Any

import pytest

from cosmos_outbox._relay.backlog_history import KEPT_READINGS, BacklogHistory
from cosmos_outbox._sync_over_async import as_async, run_sync
from cosmos_outbox_testing import InMemoryStore


def test_the_backlog_timer_keeps_the_last_hour_for_the_chart() -> None:
    store = InMemoryStore()
    now = [1_800_000_000.0]
    history = BacklogHistory(as_async(store), clock=lambda: now[0])
    for minute in range(KEPT_READINGS + 5):
        run_sync(history.record(minute, float(minute) if minute else None))
        now[0] += 60
    readings = run_sync(history.readings())
    assert len(readings) == KEPT_READINGS  # the last 60, an hour at one a minute
    assert [r.pending for r in readings][-3:] == [
        KEPT_READINGS + 2,
        KEPT_READINGS + 3,
        KEPT_READINGS + 4,
    ]
    now[0] += 30 * 60  # the timer stopped half an hour ago: half the hour is left
    assert len(run_sync(history.readings())) == KEPT_READINGS - 30
    [document] = store.of_type("outboxBacklogHistory")
    assert len(document["readings"]) == KEPT_READINGS and document["ttl"] == 7200


def test_a_backlog_reading_that_cannot_be_kept_never_fails_the_timer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(InMemoryStore):
        def upsert(self, document: Any) -> dict[str, Any]:
            raise OSError("the store is down")

    run_sync(BacklogHistory(as_async(Broken())).record(3, 1.0))
    assert "could not be kept" in caplog.text
