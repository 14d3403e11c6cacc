"""The targeted-delivery rule check's suite (`cosmos_outbox.ports.TargetRules`): over a topic laid
out as `TARGET_RULES_LAYOUT` says, the check names each subscription one of whose rules lets
another subscription's targeted message in, with those rules as the check writes them, and
whether the command can fix it (only Azure's `$Default` lets them in); a management API that
refuses or does not answer is "not checked", with why, never an exception."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any

from cosmos_outbox.ports import (
    AsyncTargetRules,
    Rule,
    SqlFilter,
    TargetRuleCheck,
    TargetRules,
    TrueFilter,
)
from cosmos_outbox_testing._target_rules import FakeTargetRules, target_clause
from cosmos_outbox_testing.contracts._worlds import Suite

__all__ = [
    "TARGET_RULES_LAYOUT",
    "InMemoryTargetRulesWorld",
    "TargetRulesContract",
    "TargetRulesWorld",
    "layout_rules",
]


#: The topic a world lays out: each subscription with its rules (name, SQL filter); None: created
#: without a rule (Azure's `$Default`, a TrueFilter).
TARGET_RULES_LAYOUT: dict[str, tuple[tuple[str, str], ...] | None] = {
    "fine": (("outbox-target", target_clause("fine")),),
    "plain": None,
    "kinds": (("kinds", "kind = 'a'"),),
    "both": (("both", f"(kind = 'a') AND ({target_clause('both')})"),),
}


def layout_rules() -> dict[str, tuple[Rule, ...]]:
    """`TARGET_RULES_LAYOUT`'s rules as the check reads them (Azure's `$Default` a TrueFilter)."""
    return {
        name: (Rule("$Default", TrueFilter()),)
        if rules is None
        else tuple(Rule(rule, SqlFilter(expression)) for rule, expression in rules)
        for name, rules in TARGET_RULES_LAYOUT.items()
    }


@dataclass
class TargetRulesWorld:
    """A check over a topic laid out as `TARGET_RULES_LAYOUT` (`rules`), and one whose management
    API refuses or does not answer (`refusing`), sync or async."""

    rules: TargetRules | AsyncTargetRules
    refusing: TargetRules | AsyncTargetRules


class InMemoryTargetRulesWorld(TargetRulesWorld):
    """The test kit's fake, laid out as the suite says."""

    def __init__(self) -> None:
        super().__init__(
            rules=FakeTargetRules(
                "contract",
                {
                    "fine": (),
                    "plain": ("$Default: TrueFilter",),
                    "kinds": ("kinds: SqlFilter kind = 'a'",),
                    "both": (),
                },
                rules=layout_rules(),
            ),
            refusing=FakeTargetRules("contract", refused="the management API did not answer"),
        )


def checked(rules: TargetRules | AsyncTargetRules) -> TargetRuleCheck:
    """A check's answer, sync or async."""
    found: Any = rules.check()
    found = asyncio.run(found) if inspect.iscoroutine(found) else found
    assert isinstance(found, TargetRuleCheck)
    return found


class TargetRulesContract(Suite[TargetRulesWorld]):
    """The targeted-delivery rule check (`TargetRulesWorld`)."""

    def test_each_subscription_lacking_the_rule_is_named_with_what_lets_others_in(
        self, world: TargetRulesWorld
    ) -> None:
        check = checked(world.rules)
        assert check.checked and not check.ok and check.reason == ""
        assert sorted(check.subscriptions) == sorted(TARGET_RULES_LAYOUT)
        assert {s.subscription: (s.rules, s.fixable) for s in check.lacking} == {
            "plain": (("$Default: TrueFilter",), True),
            "kinds": (("kinds: SqlFilter kind = 'a'",), False),
        }
        line = check.describe()
        assert "2 subscription(s)" in line and "plain (rule $Default: TrueFilter)" in line
        assert "cosmos-outbox target-rules --yes" in line and "fine" not in line

    def test_each_subscriptions_rules_are_read_as_service_bus_holds_them(
        self, world: TargetRulesWorld
    ) -> None:
        """What the operators' previews evaluate (`cosmos_outbox.operations`): every rule of
        every subscription, its filter as written."""
        assert dict(checked(world.rules).rules) == layout_rules()

    def test_a_management_api_that_refuses_or_does_not_answer_is_not_checked(
        self, world: TargetRulesWorld
    ) -> None:
        check = checked(world.refusing)
        assert not check.checked and not check.ok and check.lacking == ()
        assert check.reason and "not checked: " + check.reason in check.describe()
