"""Which subscriptions of a topic receive a message, as Service Bus decides it: each
subscription's rules evaluated on the message's properties. Pure: no I/O, no SDK; the previews
and reports of the operators' actions ask it what each subscription receives.

What Service Bus does (Microsoft Learn: "Topic filters and actions", "Subscription Rule SQL
Filter Syntax", "Set subscription filters"):

* A subscription receives a message when ANY of its rules matches; a subscription without rules
  receives nothing. A rule without an action gives one message however many match; each
  matching rule WITH an action gives a copy of its own (its action, `SET`/`REMOVE`, is applied
  to the copy: ignored here for matching, counted in `Delivery.copies`).
* `TrueFilter` takes every message (`1=1`), `FalseFilter` none (`1=0`); the management API may
  return either as a SQL filter of that text.
* A correlation filter: every field it gives (CorrelationId, MessageId, To, ReplyTo, Label =
  Subject, SessionId, ReplyToSessionId, ContentType) equals the message's, case-sensitive, and
  every entry of its properties an application property of that name, of the same type and
  value (a number in the filter does not match the same digits as text).
* A SQL filter: SQL-92's three-valued logic over `sys.` (system) and `user.` (application, the
  default scope) properties; property names are case-insensitive; a missing property is unknown
  (no match); comparisons, `[NOT] IN`, `[NOT] LIKE` (`%`, `_`, `ESCAPE`), `IS [NOT] NULL`,
  `EXISTS`, `+ - * / %` (C#'s integer and floating-point arithmetic; `+` of two strings joins
  them), `property(name)` / `p(name)`, `@parameters`, integer (Int64), decimal and scientific
  constants, 'strings', TRUE, FALSE, NULL; `[delimited]` and `"quoted"` names.

Where Service Bus's documentation does not say what it does, the answer is `unknown`, with the
reason, never a guess counted as "receives": a comparison of values of different types (text
with a number, a whole with a fractional number in a correlation filter), an ordering of texts
or booleans (the documentation does not say how Service Bus orders them), `newid()`, a
system property the broker sets on arrival (`sys.SequenceNumber`, `sys.EnqueuedTimeUtc`, ...)
or one Service Bus does not have, a correlation property named with another case, a malformed
expression. `LIKE` compares case-sensitively, as `=` does (a decision: the documentation is
silent).

funcstack's Service Bus endpoint evaluates filters with its own code (funcstack is a
distribution of its own: neither depends on the other); a property test (the package's
tests/adapters/test_rules_agree_with_funcstack.py) holds the two equal wherever this one
decides. The rules' types are public as `cosmos_outbox.ports`' (what `TargetRuleCheck.rules`
holds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cosmos_outbox._subscription_facts import (
    CORRELATION_FIELDS,
    INT64,
    Facts,
    UnknowableError,
    kind_of,
)
from cosmos_outbox._subscription_sql import compiled

__all__ = [
    "CORRELATION_FIELDS",
    "INT64",
    "CorrelationFilter",
    "Delivery",
    "Facts",
    "FalseFilter",
    "Rule",
    "RuleFilter",
    "SqlFilter",
    "TrueFilter",
    "UnknowableError",
    "UnreadableFilter",
    "delivery",
    "fates",
    "kind_of",
]


@dataclass(frozen=True)
class TrueFilter:
    def describe(self) -> str:
        return "TrueFilter"


@dataclass(frozen=True)
class FalseFilter:
    def describe(self) -> str:
        return "FalseFilter"


@dataclass(frozen=True)
class CorrelationFilter:
    """`system`: (lower-case field, value) pairs; `properties`: (name, value) pairs."""

    system: tuple[tuple[str, str], ...] = ()
    properties: tuple[tuple[str, Any], ...] = ()

    def describe(self) -> str:
        parts = [f"{k}={v!r}" for k, v in (*self.system, *self.properties)]
        return f"CorrelationFilter {', '.join(parts)}"


@dataclass(frozen=True)
class SqlFilter:
    expression: str
    parameters: tuple[tuple[str, Any], ...] = ()

    def describe(self) -> str:
        return f"SqlFilter {self.expression}"


@dataclass(frozen=True)
class UnreadableFilter:
    """A filter this module does not know (the management API's answer named something else)."""

    what: str

    def describe(self) -> str:
        return self.what


RuleFilter = TrueFilter | FalseFilter | CorrelationFilter | SqlFilter | UnreadableFilter


@dataclass(frozen=True)
class Rule:
    """A subscription's rule: its filter, and its action's text (None: no action)."""

    name: str
    filter: RuleFilter
    action: str | None = None


@dataclass(frozen=True)
class Delivery:
    """What a subscription does with one message: `receives` (`copies` messages: one, plus one
    per matching rule with an action), `drops` it, or `unknown` (`why`: which rule, and what
    about it is not known)."""

    verdict: Literal["receives", "drops", "unknown"]
    copies: int = 0
    why: str = ""


def delivery(rules: Sequence[Rule], facts: Facts) -> Delivery:
    """What a subscription with `rules` does with the message of `facts` (see the module)."""
    if not rules:
        return Delivery("drops", why="the subscription has no rule: it receives nothing")
    plain, copies, unknown = False, 0, []
    for rule in rules:
        try:
            matched = matches(rule.filter, facts)
        except UnknowableError as exc:
            unknown.append(f"rule {rule.name}: {exc}")
            continue
        if matched and rule.action:
            copies += 1
        elif matched:
            plain = True
    total = copies + (1 if plain else 0)
    if total:
        return Delivery("receives", total, "; ".join(unknown))
    if unknown:
        return Delivery("unknown", why="; ".join(unknown))
    return Delivery("drops")


def fates(
    rules: Mapping[str, Sequence[Rule]] | None,
    messages: Sequence[Facts],
    names: Sequence[str] = (),
    *,
    unread: str = "",
) -> dict[str, list[Delivery]]:
    """Per subscription (those of `rules`, and `names`), what it does with each of `messages`;
    `rules` None: they could not be read (`unread` says why), every fate unknown."""
    found = {}
    for name in sorted({*(rules or {}), *names}):
        if rules is None or name not in rules:
            why = f"its rules were not read: {unread}" if rules is None else "no such subscription"
            found[name] = [Delivery("unknown", why=why)] * len(messages)
        else:
            found[name] = [delivery(rules[name], m) for m in messages]
    return found


def matches(rule_filter: RuleFilter, facts: Facts) -> bool:
    """Whether `rule_filter` takes the message; `UnknowableError` when that is not known."""
    if isinstance(rule_filter, TrueFilter):
        return True
    if isinstance(rule_filter, FalseFilter):
        return False
    if isinstance(rule_filter, CorrelationFilter):
        return _correlates(rule_filter, facts)
    if isinstance(rule_filter, SqlFilter):
        value = compiled(rule_filter.expression, rule_filter.parameters)(facts)
        if value is not None and not isinstance(value, bool):
            raise UnknowableError(f"{rule_filter.expression!r} is not a condition")
        return value is True
    raise UnknowableError(f"a filter this preview cannot read ({rule_filter.what})")


def _correlates(rule_filter: CorrelationFilter, facts: Facts) -> bool:
    for name, wanted in rule_filter.system:
        if facts.system_value(name) != wanted:
            return False
    for name, wanted in rule_filter.properties:
        if name not in facts.user:
            if facts.user_value(name)[0]:
                raise UnknowableError(
                    f"correlation property {name!r} is on the message with another case"
                )
            return False
        if not _same_value(facts.user[name], wanted, name):
            return False
    return True


def _same_value(have: Any, wanted: Any, name: str) -> bool:
    if kind_of(have) != kind_of(wanted):
        return (
            False  # a number does not match the same digits as text (Azure/azure-service-bus#401)
        )
    if isinstance(have, int | float) and type(have) is not type(wanted):
        raise UnknowableError(f"correlation property {name!r}: {have!r} and {wanted!r}")
    return bool(have == wanted)
