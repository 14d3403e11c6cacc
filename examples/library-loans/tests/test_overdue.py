"""The hourly timer, called as the worker calls it: its own SQL query (`c.status = 'open' AND
c.dueAt < @now`, across members) served by the test kit's store; each loan past due is marked
overdue with its event, and only those."""

from __future__ import annotations

import pytest
from conftest import World

from cosmos_outbox_testing import timer_request


def test_open_loans_past_due_are_marked_overdue_with_their_event(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOAN_DAYS", "-1")  # due yesterday
    late = [world.borrow(member, "dune")[1]["id"] for member in ("ada", "grace")]
    monkeypatch.setenv("LOAN_DAYS", "14")
    world.borrow("ada", "emma")
    world.client.invoke("mark_overdue", timer_request())
    statuses = {
        loan["id"]: loan["status"]
        for member in ("ada", "grace")
        for loan in world.call("GET", f"members/{member}/loans")[1]
    }
    assert sorted(s for s in statuses.values()) == ["open", "overdue", "overdue"]
    assert all(statuses[loan_id] == "overdue" for loan_id in late)
    overdue = [e for e in world.events() if e["action"] == "LoanOverdue"]
    assert sorted(e["loanId"] for e in overdue) == sorted(late)
    world.client.invoke("mark_overdue", timer_request())  # overdue already: nothing more
    assert len([e for e in world.events() if e["action"] == "LoanOverdue"]) == 2
