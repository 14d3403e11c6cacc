"""The two evaluators of Service Bus subscription rules held equal: the core's
(`cosmos_outbox._subscription_rules`: the operators' previews) and funcstack's endpoint's
(`funcstack.servicebus._filters`: what a local subscription receives). Neither package may depend
on the other, so each keeps its own; Hypothesis draws messages and rules (correlation filters and
the SQL that funcstack takes: comparisons, IN, IS NULL, EXISTS, AND/OR/NOT over `sys.` and
application properties of every type), and wherever the core decides (receives or drops) funcstack
delivers alike. Where the core says "unknown" (what Service Bus's documentation leaves unsaid:
values of different types compared, an ordering of texts) funcstack makes its own documented
choice, and the test counts how often the core decided. In-process, no server; reads funcstack's
private module on purpose (tests/repository/test_layering.py allows it), skipped without it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosmos_outbox._subscription_rules import CORRELATION_FIELDS, Facts, delivery
from cosmos_outbox._subscription_rules import CorrelationFilter as CoreCorrelation
from cosmos_outbox._subscription_rules import Rule as CoreRule
from cosmos_outbox._subscription_rules import SqlFilter as CoreSql

filters = pytest.importorskip("funcstack.servicebus._filters")

#: The correlation filter's fields as the emulator's Config.json names them.
CONFIG_FIELDS = {
    "contenttype": "ContentType",
    "correlationid": "CorrelationId",
    "label": "Label",
    "messageid": "MessageId",
    "replyto": "ReplyTo",
    "replytosessionid": "ReplyToSessionId",
    "sessionid": "SessionId",
    "to": "To",
}
NAMES = ("kind", "Kind", "n", "flag", "odd name")
TEXTS = st.sampled_from(["a", "b", "A", "", "it's"])
VALUES = st.one_of(TEXTS, st.integers(0, 3), st.sampled_from([0.5, 2.0, 3.0]), st.booleans())
SYSTEM_NAMES = (*CORRELATION_FIELDS, "subject")


def literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def name(prop: str, scoped: bool) -> str:
    spelled = f"[{prop}]" if " " in prop else prop
    return f"user.{spelled}" if scoped else spelled


OPERANDS = st.one_of(
    st.builds(name, st.sampled_from(NAMES), st.booleans()),
    st.sampled_from(SYSTEM_NAMES).map(lambda n: f"sys.{n}"),
    VALUES.map(literal),
    st.just("NULL"),
)


@st.composite
def predicates(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 6 if depth < 2 else 3))
    if kind == 0:
        op = draw(st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="]))
        return f"{draw(OPERANDS)} {op} {draw(OPERANDS)}"
    if kind == 1:
        options = ", ".join(draw(st.lists(VALUES.map(literal), min_size=1, max_size=3)))
        return f"{draw(OPERANDS)} {draw(st.sampled_from(['IN', 'NOT IN']))} ({options})"
    if kind == 2:
        target = draw(st.one_of(st.builds(name, st.sampled_from(NAMES), st.booleans())))
        return f"{target} IS {draw(st.sampled_from(['NULL', 'NOT NULL']))}"
    if kind == 3:
        prop = draw(OPERANDS.filter(lambda o: o[0].isalpha() or o.startswith("[")))
        if prop in ("NULL", "TRUE", "FALSE"):
            prop = "kind"
        return f"EXISTS({prop})"
    if kind == 4:
        return f"NOT ({draw(predicates(depth + 1))})"
    joiner = " AND " if kind == 5 else " OR "
    return joiner.join(f"({draw(predicates(depth + 1))})" for _ in range(draw(st.integers(2, 3))))


@st.composite
def correlations(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, Any]]:
    system = draw(st.dictionaries(st.sampled_from(CORRELATION_FIELDS), TEXTS, max_size=2))
    properties = draw(st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=2))
    if not system and not properties:
        properties = {"kind": "a"}
    return system, properties


RULES = st.lists(st.one_of(predicates(), correlations()), min_size=1, max_size=3)
MESSAGES = st.tuples(
    st.dictionaries(st.sampled_from(CORRELATION_FIELDS), TEXTS, max_size=4),
    st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=3),
)


def core_rules(drawn: list[Any]) -> list[CoreRule]:
    """The drawn rules as the core reads them from the management API (`rule_of`: a correlation
    field left empty is not part of the filter, as funcstack reads its Config.json)."""
    rules = []
    for i, rule in enumerate(drawn):
        if isinstance(rule, str):
            rules.append(CoreRule(f"r{i}", CoreSql(rule)))
            continue
        system = tuple((k, v) for k, v in rule[0].items() if v)
        rules.append(CoreRule(f"r{i}", CoreCorrelation(system, tuple(rule[1].items()))))
    return rules


def config(drawn: list[Any]) -> list[dict[str, Any]]:
    entries = []
    for i, rule in enumerate(drawn):
        if isinstance(rule, str):
            props: dict[str, Any] = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": rule}}
        else:
            correlation = {CONFIG_FIELDS[k]: v for k, v in rule[0].items()}
            if rule[1]:
                correlation["Properties"] = rule[1]
            props = {"FilterType": "Correlation", "CorrelationFilter": correlation}
        entries.append({"Name": f"r{i}", "Properties": props})
    return entries


decided: list[bool] = []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=RULES, message=MESSAGES)
def test_where_the_core_decides_funcstack_delivers_alike(
    rules: list[Any], message: tuple[dict[str, str], dict[str, Any]]
) -> None:
    system, user = message
    core = delivery(core_rules(rules), Facts(system=system, user=user))
    try:
        local = filters.parse_rules(config(rules), "test")
    except filters.RuleError:  # a correlation filter of empty texts only: funcstack refuses it
        return
    decided.append(core.verdict != "unknown")
    if core.verdict == "unknown":
        return
    facts = filters.Facts(
        system={**dict.fromkeys(filters.SYSTEM_FIELDS), **system, "subject": system.get("label")},
        user=user,
    )
    assert filters.accepts(local, facts) == (core.verdict == "receives"), core


def test_the_core_decided_most_drawn_cases() -> None:
    """Run after the property test (same module, in order): the agreement covers real ground."""
    if not decided:
        pytest.skip("the property test did not run")
    assert sum(decided) > len(decided) / 2
