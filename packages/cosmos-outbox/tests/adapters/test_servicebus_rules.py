"""Which subscriptions receive a message, as Service Bus decides it
(`cosmos_outbox._subscription_rules`): the filters the outbox writes, the SQL forms a team writes,
correlation filters field by field, several rules, and "unknown" wherever Service Bus's
documentation does not settle the answer. In-process: no server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from cosmos_outbox._mapper import TARGET_PROPERTY, message_facts, to_message
from cosmos_outbox._records import OutboxRecord
from cosmos_outbox._subscription_rules import (
    CorrelationFilter,
    Delivery,
    Facts,
    FalseFilter,
    Rule,
    RuleFilter,
    SqlFilter,
    TrueFilter,
    UnreadableFilter,
    delivery,
)
from cosmos_outbox.servicebus._messages import to_amqp_message
from cosmos_outbox.servicebus._target_rules import rule_of, target_clause

SYSTEM = {
    "MessageId": "m-1",
    "CorrelationId": "c-1",
    "To": "orders",
    "ReplyTo": "replies",
    "Subject": "Created",
    "SessionId": "order-42",
    "ReplyToSessionId": "r-1",
    "ContentType": "application/json",
}
USER: dict[str, Any] = {
    "aggregateType": "contact",
    "version": 3,
    "ratio": 2.5,
    "flag": True,
    "name": "ABC%x",
    "at": datetime(2026, 1, 2, tzinfo=UTC),
}


def facts(**user: Any) -> Facts:
    return Facts(system=SYSTEM, user={**USER, **user})


def verdict(rule_filter: RuleFilter, **user: Any) -> str:
    return delivery([Rule("r", rule_filter)], facts(**user)).verdict


def sql(expression: str, **user: Any) -> str:
    return verdict(SqlFilter(expression), **user)


# -- the filters the outbox writes ----------------------------------------------------------


def test_the_outboxs_own_rule_takes_untargeted_messages_and_its_own_targeted_ones() -> None:
    own = SqlFilter(target_clause("contact-projection"))
    assert verdict(own) == "receives"
    assert verdict(own, **{TARGET_PROPERTY: "contact-projection"}) == "receives"
    assert verdict(own, **{TARGET_PROPERTY: "all-events"}) == "drops"


def test_the_outboxs_rule_anded_to_a_filter_of_the_teams_own() -> None:
    both = SqlFilter(f"(aggregateType = 'contact') AND ({target_clause('p')})")
    assert verdict(both) == "receives"
    assert verdict(both, aggregateType="customer") == "drops"
    assert verdict(both, **{TARGET_PROPERTY: "q"}) == "drops"


def test_an_aggregate_type_filter_drops_the_other_types() -> None:
    assert sql("aggregateType = 'contact'") == "receives"
    assert sql("aggregateType = 'contact'", aggregateType="customer") == "drops"


def test_true_and_false_filters_and_their_sql_forms() -> None:
    assert verdict(TrueFilter()) == "receives"
    assert verdict(FalseFilter()) == "drops"
    assert sql("1=1") == "receives"
    assert sql("1=0") == "drops"


# -- correlation filters --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("correlationid", "c-1"),
        ("messageid", "m-1"),
        ("to", "orders"),
        ("replyto", "replies"),
        ("label", "Created"),
        ("sessionid", "order-42"),
        ("replytosessionid", "r-1"),
        ("contenttype", "application/json"),
    ],
)
def test_each_correlation_field_compares_its_system_property_case_sensitively(
    field: str, value: str
) -> None:
    assert verdict(CorrelationFilter(((field, value),))) == "receives"
    assert verdict(CorrelationFilter(((field, value.upper() + "x"),))) == "drops"


def test_a_correlation_filter_needs_every_field_and_property() -> None:
    both = CorrelationFilter((("label", "Created"),), (("aggregateType", "contact"),))
    assert verdict(both) == "receives"
    assert verdict(both, aggregateType="customer") == "drops"
    assert verdict(CorrelationFilter((), (("missing", "x"),))) == "drops"
    assert verdict(CorrelationFilter((), (("version", 3), ("flag", True)))) == "receives"


def test_a_correlation_number_does_not_match_the_same_digits_as_text() -> None:
    assert verdict(CorrelationFilter((), (("version", "3"),))) == "drops"


def test_what_correlation_filters_leave_unsaid_is_unknown() -> None:
    assert verdict(CorrelationFilter((), (("version", 3.0),))) == "unknown"
    assert verdict(CorrelationFilter((), (("AggregateType", "contact"),))) == "unknown"


# -- SQL filters ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("version = 3", "receives"),
        ("version <> 3", "drops"),
        ("version != 4", "receives"),
        ("version > 2 AND version <= 3", "receives"),
        ("version >= 3.5", "drops"),
        ("ratio = 2.5 AND version < 3.01", "receives"),
        ("VERSION = 3 AND user.Version = 3", "receives"),
        ("sys.Label = 'Created' AND sys.subject = 'Created'", "receives"),
        ("sys.MESSAGEID = 'm-1' AND sys.SessionId = 'order-42'", "receives"),
        ("sys.CorrelationId = 'c-1' AND sys.ContentType = 'application/json'", "receives"),
        (
            "sys.To = 'orders' AND sys.ReplyTo = 'replies' AND sys.ReplyToSessionId = 'r-1'",
            "receives",
        ),
        ("flag = TRUE", "receives"),
        ("flag = FALSE", "drops"),
        ("at = @when", "receives"),
        ("[aggregateType] = 'contact' AND \"aggregateType\" = 'contact'", "receives"),
        ("p('aggregateType') = 'contact' AND property('version') = 3", "receives"),
        ("aggregateType = 'it''s'", "drops"),
    ],
)
def test_sql_comparisons(expression: str, expected: str) -> None:
    when = (("@when", datetime(2026, 1, 2, tzinfo=UTC)),)
    assert verdict(SqlFilter(expression, when)) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sys.Label LIKE 'Cre%'", "receives"),
        ("sys.Label LIKE 'Cr_ated'", "receives"),
        ("sys.Label LIKE 'cre%'", "drops"),
        ("sys.Label NOT LIKE '%ted'", "drops"),
        ("name LIKE 'ABC\\%%' ESCAPE '\\'", "receives"),
        ("name LIKE 'ABC!%x' ESCAPE '!'", "receives"),
        ("name LIKE 'ABC!%' ESCAPE '!'", "drops"),
        ("aggregateType IN ('customer', 'contact')", "receives"),
        ("aggregateType NOT IN ('customer', 'contact')", "drops"),
        ("version IN (1, 2)", "drops"),
        ("missing IS NULL AND version IS NOT NULL", "receives"),
        ("sys.CorrelationId IS NULL", "drops"),
        ("EXISTS(version) AND NOT EXISTS(missing)", "receives"),
        ("EXISTS(sys.To)", "receives"),
    ],
)
def test_sql_predicates(expression: str, expected: str) -> None:
    assert sql(expression) == expected


def test_a_missing_property_is_unknown_and_unknown_never_matches() -> None:
    assert sql("missing = 1") == "drops"
    assert sql("NOT (missing = 1)") == "drops"
    assert sql("missing <> 1") == "drops"
    assert sql("missing = 1 OR version = 3") == "receives"
    assert sql("missing = 1 AND version = 3") == "drops"
    assert sql("missing LIKE 'a%'") == "drops"
    assert sql("missing IN ('a')") == "drops"
    assert sql("missing + 1 = 2") == "drops"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("version * 2 + 1 = 7", "receives"),
        ("7 / 2 = 3 AND -7 / 2 = -3 AND -7 % 2 = -1 AND 7 % -2 = 1", "receives"),
        ("7.0 / 2 = 3.5 AND 1.5E1 = 15 AND .5 = 0.5", "receives"),
        ("-version = -3 AND +version = 3 AND (version - 1) * 2 = 4", "receives"),
        ("aggregateType + '-x' = 'contact-x'", "receives"),
        ("at + @day > at AND at - @day < at", "receives"),
    ],
)
def test_sql_arithmetic_as_csharp_computes_it(expression: str, expected: str) -> None:
    assert verdict(SqlFilter(expression, (("@day", timedelta(days=1)),))) == expected


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("version = '3'", "compares a number with a text"),
        ("aggregateType > 'a'", "how Service Bus orders texts is not documented"),
        ("sys.SequenceNumber > 10", "set by the broker"),
        ("sys.EnqueuedTimeUtc > @when", "set by the broker"),
        ("sys.Colour = 'red'", "not a Service Bus system property"),
        ("newid() = 'x'", "newid()"),
        ("version / 0 = 1", "divides by zero"),
        ("aggregateType = ", "expected a value"),
        ("version = 3 ~ 2", "not SQL filter syntax"),
        ("unknownfunction(version) = 1", "no function"),
        ("version = @nothing", "has no value"),
        ("version", "not a condition"),
        ("9223372036854775807 + 1 = 0", "overflows"),
        ("name LIKE 'a' ESCAPE 'ab'", "not one character"),
    ],
)
def test_what_the_docs_leave_unsaid_is_unknown_and_says_why(expression: str, why: str) -> None:
    found = delivery([Rule("r", SqlFilter(expression, (("@when", 1),)))], facts())
    assert found.verdict == "unknown"
    assert why in found.why
    assert found.why.startswith("rule r: ")


def test_a_decided_term_decides_despite_an_unknown_one() -> None:
    assert sql("sys.SequenceNumber > 1 OR version = 3") == "receives"
    assert sql("sys.SequenceNumber > 1 AND version = 4") == "drops"
    assert sql("sys.SequenceNumber > 1 AND version = 3") == "unknown"
    assert sql("NOT (sys.SequenceNumber > 1)") == "unknown"


def test_properties_differing_only_in_case_are_unknown() -> None:
    assert sql("kind = 'a'", kind="a", Kind="b") == "unknown"


def test_an_unreadable_filter_is_unknown() -> None:
    assert verdict(UnreadableFilter("a filter of type Odd")) == "unknown"


# -- a subscription's several rules ---------------------------------------------------------


def test_any_rule_matching_delivers_one_message_and_each_action_rule_a_copy() -> None:
    rules = [
        Rule("a", SqlFilter("aggregateType = 'contact'")),
        Rule("b", SqlFilter("version = 3")),
        Rule("c", SqlFilter("version = 3"), action="SET copied = 1"),
        Rule("d", FalseFilter(), action="SET never = 1"),
    ]
    assert delivery(rules, facts()) == Delivery("receives", 2)
    assert delivery(rules, facts(aggregateType="customer", version=4)) == Delivery("drops")


def test_a_receiving_rule_decides_and_an_unknown_one_is_still_said() -> None:
    rules = [Rule("a", SqlFilter("sys.Size > 1")), Rule("b", TrueFilter())]
    found = delivery(rules, facts())
    assert (found.verdict, found.copies) == ("receives", 1)
    assert "rule a:" in found.why


def test_a_subscription_without_rules_receives_nothing() -> None:
    assert delivery([], facts()).verdict == "drops"


# -- the management API's rules and the relay's messages ------------------------------------


def test_the_management_apis_rules_read_as_the_evaluator_takes_them() -> None:
    def read(f: Any, action: Any = None) -> Rule:
        return rule_of(RuleProperties("r", filter=f, action=action, created_at_utc=None))

    assert read(TrueRuleFilter()).filter == TrueFilter()
    assert read(FalseRuleFilter()).filter == FalseFilter()
    assert read(SqlRuleFilter("a = @p", {"@p": 1})).filter == SqlFilter("a = @p", (("@p", 1),))
    correlation = read(
        CorrelationRuleFilter(
            correlation_id="c",
            message_id="m",
            to="t",
            reply_to="rt",
            label="l",
            session_id="s",
            reply_to_session_id="rs",
            content_type="ct",
            properties={"k": 2},
        )
    ).filter
    assert correlation == CorrelationFilter(
        (
            ("correlationid", "c"),
            ("messageid", "m"),
            ("to", "t"),
            ("replyto", "rt"),
            ("label", "l"),
            ("sessionid", "s"),
            ("replytosessionid", "rs"),
            ("contenttype", "ct"),
        ),
        (("k", 2),),
    )
    assert read(TrueRuleFilter(), SqlRuleAction("SET x = 1")).action == "SET x = 1"
    assert read(None).filter == UnreadableFilter("a filter of type NoneType")


def test_the_facts_of_a_message_are_what_the_relay_sends() -> None:
    record = OutboxRecord(
        event_id="e-1",
        aggregate_type="contact",
        aggregate_id="contact-7",
        version=4,
        action="Renamed",
        body=b"{}",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        event_source="/contacts",
    )
    message = to_message(record)
    sent = to_amqp_message(message, base="https://app")
    seen = message_facts(message, base="https://app")
    assert seen.user == dict(sent.application_properties or {})
    properties = sent.properties
    assert properties is not None
    assert seen.system["messageid"] == properties.message_id
    assert seen.system["label"] == properties.subject
    assert seen.system["contenttype"] == properties.content_type
    assert seen.system["sessionid"] == properties.group_id
    assert delivery([Rule("r", SqlFilter("aggregateType = 'contact' AND version = 4"))], seen) == (
        Delivery("receives", 1)
    )
