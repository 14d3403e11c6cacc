"""A relay process's snapshot (`Facts.state()`) is what it knows now, field for field, its
leases in their tokens' order (numbers as numbers, then the others)."""

from __future__ import annotations

import datetime as dt

from cosmos_outbox._relay_process.state import Facts, LeaseFacts, ProcessState

STARTED = dt.datetime(2026, 11, 28, 8, 0, tzinfo=dt.UTC)


def test_the_snapshot_is_what_the_process_knows_its_leases_in_order() -> None:
    facts = Facts("relay", "host-1", STARTED, not_configured=None, not_ready="no topic")
    facts.listening = True
    facts.estimated_at = STARTED + dt.timedelta(seconds=5)
    facts.leases = {t: LeaseFacts(t) for t in ("10", "x", "2")}
    assert facts.state() == ProcessState(
        processor_name="relay",
        instance_name="host-1",
        not_configured=None,
        not_ready="no topic",
        listening=True,
        leases=(LeaseFacts("2"), LeaseFacts("10"), LeaseFacts("x")),
        estimated_at=STARTED + dt.timedelta(seconds=5),
        started_at=STARTED,
    )
