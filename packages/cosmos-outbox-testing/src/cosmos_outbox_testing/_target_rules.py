"""The targeted-delivery rule check, in memory: a topic's subscriptions, each with the rules that
let another subscription's targeted messages in (none: it carries the rule), as the management
API would be read (`cosmos_outbox.servicebus.ServiceBusTargetRules`); held to the same contract
(`cosmos_outbox_testing.contracts.TargetRulesContract`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cosmos_outbox.ports import (
    FalseFilter,
    Rule,
    RuleFilter,
    SqlFilter,
    SubscriptionLacking,
    TargetRuleCheck,
    TargetRules,
    TrueFilter,
    UnreadableFilter,
)

__all__ = ["FakeTargetRules"]

#: Azure's rule of a subscription created without one, as the check names it.
DEFAULT_LETTING_IN = "$Default: TrueFilter"


def target_clause(subscription: str) -> str:
    """The targeted-delivery rule's filter for `subscription`."""
    return f"NOT EXISTS(outboxTarget) OR outboxTarget = '{subscription}'"


class FakeTargetRules(TargetRules):
    """A topic's subscriptions and their rules, in memory. `subscriptions`: each name with the
    rules letting others in, as the check names them (`"$Default: TrueFilter"`, `"kinds:
    SqlFilter kind = 'a'"`; empty: it carries the rule). `refused`: the management API refuses
    or does not answer, and why (the check is then not checked). `rules`: each subscription's
    rules as the check reads them (`TargetRuleCheck.rules`: what the operators' previews
    evaluate). `checks` counts the reads."""

    def __init__(
        self,
        topic: str = "test-events",
        subscriptions: Mapping[str, Sequence[str]] | None = None,
        *,
        refused: str | None = None,
        rules: Mapping[str, Sequence[Rule]] | None = None,
    ) -> None:
        self.topic = topic
        self.subscriptions: dict[str, tuple[str, ...]] = {
            name: tuple(rules) for name, rules in (subscriptions or {}).items()
        }
        self.refused = refused
        self.rules: dict[str, tuple[Rule, ...]] = {
            name: tuple(found) for name, found in (rules or {}).items()
        }
        self.checks = 0

    def lacking(self, subscription: str, *rules: str) -> None:
        """The subscription lets others in by `rules` (default: only Azure's `$Default`)."""
        self.subscriptions[subscription] = rules or (DEFAULT_LETTING_IN,)

    def give_rule(self, subscription: str) -> None:
        """The subscription carries the rule now (as `cosmos-outbox target-rules --yes` does)."""
        self.subscriptions[subscription] = ()

    def rules_of(self, name: str) -> tuple[Rule, ...]:
        """A subscription's rules: as given (`rules=`), else as its description says (none
        letting others in: the outbox's own rule, `outbox-target`)."""
        if name in self.rules:
            return self.rules[name]
        described = self.subscriptions.get(name, ())
        if not described:
            return (Rule("outbox-target", SqlFilter(target_clause(name))),)
        return tuple(_read(text) for text in described)

    def check(self) -> TargetRuleCheck:
        self.checks += 1
        if self.refused is not None:
            return TargetRuleCheck(self.topic, False, reason=self.refused)
        lacking = tuple(
            SubscriptionLacking(
                name,
                rules,
                fixable=all(rule == DEFAULT_LETTING_IN for rule in rules),
                names=tuple(rule.split(":", 1)[0] for rule in rules),
            )
            for name, rules in self.subscriptions.items()
            if rules
        )
        names = tuple(dict.fromkeys([*self.subscriptions, *self.rules]))
        rules = {name: self.rules_of(name) for name in names}
        return TargetRuleCheck(self.topic, True, names, lacking, rules=rules)


def _read(text: str) -> Rule:
    """A rule from the check's description of it (`"$Default: TrueFilter"`, `"kinds: SqlFilter
    kind = 'a'"`)."""
    name, _, described = text.partition(": ")
    kind, _, expression = described.partition(" ")
    found: RuleFilter = UnreadableFilter(described)
    if kind in ("TrueFilter", "FalseFilter"):
        found = TrueFilter() if kind == "TrueFilter" else FalseFilter()
    elif kind == "SqlFilter":
        found = SqlFilter(expression)
    return Rule(name, found)
