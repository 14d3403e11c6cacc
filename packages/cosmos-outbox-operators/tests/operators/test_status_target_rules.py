"""Issue 66 item 5's remainder, in-process: the operators' status says which subscriptions of the
topic lack the targeted-delivery rule, or "not checked" and why -- the status route, the console
and the command line (tests/operators/test_cli.py) -- read through the core's `TargetRules` port
(the test kit's fake here; the SDK's management client against funcstack in the core's
relay tests, test_target_rules, both held to one contract), and kept for minutes rather than
asked on every poll."""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import TicketWorld, body, console_fragment


def test_the_status_names_each_subscription_lacking_the_rule_and_reads_it_once(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = world.memory.target_rules
    rules.subscriptions = {"fine": ()}
    rules.lacking("legacy")
    rules.lacking("kinds", "kinds: SqlFilter kind = 'a'")
    answer = body(world.client.request("GET", "outbox/status"))["targetRules"]
    assert (answer["topic"], answer["checked"], answer["reason"]) == ("test-events", True, None)
    assert answer["subscriptions"] == ["fine", "legacy", "kinds"]
    assert answer["lacking"] == [
        {"subscription": "legacy", "rules": ["$Default: TrueFilter"], "fixable": True},
        {"subscription": "kinds", "rules": ["kinds: SqlFilter kind = 'a'"], "fixable": False},
    ]
    assert "legacy (rule $Default: TrueFilter)" in answer["summary"]
    assert "cosmos-outbox target-rules --yes" in answer["summary"]
    page = console_fragment(world.client, "status", monkeypatch)
    assert 'data-lacking="legacy,kinds"' in page
    assert "2 subscriptions of topic <code>test-events</code> lack the targeted-delivery" in page
    assert "<code>cosmos-outbox target-rules --yes</code> gives it the rule" in page
    assert "AND (NOT EXISTS(outboxTarget) OR outboxTarget = 'kinds')" in page
    # the console polls every 10 s: the management API was read once for all of these
    assert rules.checks == 1
    # fixed, and read again once the answer is old (TARGET_RULES_EVERY_SECONDS)
    rules.give_rule("legacy")
    rules.give_rule("kinds")
    assert body(world.client.request("GET", "outbox/status"))["targetRules"]["lacking"] != []
    # the answer's age past what the status keeps (five minutes by default)
    monkeypatch.setattr(world.outbox.operations().status, "rules_every_seconds", 0.0)
    answer = body(world.client.request("GET", "outbox/status"))["targetRules"]
    assert answer["checked"] and answer["lacking"] == [] and rules.checks == 2
    assert 'data-target-rules="ok"' in console_fragment(world.client, "status", monkeypatch)


def test_a_check_that_could_not_look_says_not_checked_and_why(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.memory.target_rules.refused = (
        "the management API refused the credentials (reading rules needs Manage rights)"
    )
    answer = body(world.client.request("GET", "outbox/status"))["targetRules"]
    assert (answer["checked"], answer["lacking"]) == (False, [])
    assert answer["summary"] == (
        "targeted-delivery rules of topic 'test-events' not checked: the management API "
        "refused the credentials (reading rules needs Manage rights)"
    )
    page = console_fragment(world.client, "status", monkeypatch)
    assert 'data-target-rules="not-checked"' in page
    assert "not checked: the management API refused the credentials" in page


def test_a_management_api_that_hangs_does_not_hold_the_status(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status waits TARGET_RULES_SECONDS for the rules, then says not checked (and asks
    again a minute later, not at every poll)."""
    import threading

    release = threading.Event()
    rules = world.memory.target_rules
    answer_now = rules.check

    def hanging() -> Any:
        release.wait(5)
        return answer_now()

    monkeypatch.setattr(rules, "check", hanging)
    monkeypatch.setattr(world.outbox.operations().status, "rules_wait_seconds", 0.2)
    started = time.monotonic()
    try:
        answer = body(world.client.request("GET", "outbox/status"))
    finally:
        release.set()
    assert time.monotonic() - started < 2.0
    assert answer["relay"]["state"] == "healthy"  # the rest of the status is there
    rules_state = answer["targetRules"]
    assert not rules_state["checked"]
    assert rules_state["reason"] == (
        "the management API did not answer within 0.2 s (asked again in 60 s)"
    )
