"""Borrowing over HTTP, through the app's ASGI function on in-memory services: the loan, the
quota and the event are one batch; the quota holds under racing borrows; an Idempotency-Key
retry is answered first, whatever the quota says now; a member's loans come from the app's own
query."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import World


def test_a_borrow_writes_the_loan_the_quota_and_its_event_together(world: World) -> None:
    status, loan = world.borrow("ada", "dune")
    assert status == 201 and (loan["memberId"], loan["bookId"], loan["status"]) == (
        "ada",
        "dune",
        "open",
    )
    assert world.memory.store.read("ada", "quota") is not None
    [event] = world.events()
    assert (event["action"], event["memberId"], event["version"], event["loanId"]) == (
        "BookBorrowed",
        "ada",
        1,
        loan["id"],
    )
    assert world.memory.store.batches == 1


def test_the_quota_refuses_a_loan_too_many_and_writes_nothing(world: World) -> None:
    assert [world.borrow("ada", book)[0] for book in ("dune", "emma", "ulysses")] == [201, 201, 409]
    assert len(world.events()) == 2


def test_racing_borrows_never_pass_the_quota(world: World) -> None:
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda n: world.borrow("ada", f"book-{n}")[0], range(8)))
    assert sorted(statuses) == [201] * 2 + [409] * 6
    assert [e["version"] for e in world.events()] == [1, 2]


def test_a_retry_with_its_idempotency_key_gets_the_first_answer_after_the_quota_is_full(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48: with a quota of 1 the first borrow answered 201 and its retry 409, because the
    quota was checked before the key. The key is looked up first now."""
    monkeypatch.setenv("LOAN_LIMIT", "1")
    first = world.borrow("ada", "dune", key="borrow-1")
    again = world.borrow("ada", "dune", key="borrow-1")
    assert first == again and first[0] == 201
    assert [e["action"] for e in world.events()] == ["BookBorrowed"]
    assert world.borrow("ada", "emma", key="borrow-2")[0] == 409
    assert world.borrow("ada", "emma", key="borrow-1")[0] == 422  # the key, another body


def test_a_members_loans_come_from_the_apps_own_query_by_due_date(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.borrow("ada", "dune")
    monkeypatch.setenv("LOAN_DAYS", "7")
    world.borrow("ada", "emma")
    world.borrow("grace", "ulysses")
    status, loans = world.call("GET", "members/ada/loans")
    assert status == 200 and [loan["bookId"] for loan in loans] == ["emma", "dune"]


def test_bad_input_is_refused_and_writes_nothing(world: World) -> None:
    assert world.call("POST", "members/ada/loans", {"bookId": ""})[0] == 422
    assert world.memory.store.batches == 0
