"""Subscription rules from the Config.json ``Rules``, through the real azure-servicebus SDK: a
subscription receives a message when any of its rules matches, every message when it has
none; Correlation filters (system fields and application properties) and a subset of SQL
filters. Rules the endpoint cannot evaluate are refused when the config is loaded."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from funcstack.deadlines import SHORT
from funcstack.servicebus._config import load_config
from funcstack.servicebus._filters import Facts, RuleError, SqlFilter, parse_rules
from funcstack.servicebus._launcher import ServiceBusEndpoint

from .conftest import Target, entities, receive_all

pytestmark = [pytest.mark.integration, pytest.mark.conformance]

#: A name of this module's own on the shared endpoint, which other modules use at the same time.
TOPIC = f"orders-{uuid.uuid4().hex[:8]}"


def correlation(name: str, **fields: Any) -> dict[str, Any]:
    return {"Name": name, "Properties": {"FilterType": "Correlation", "CorrelationFilter": fields}}


def sql(name: str, expression: str) -> dict[str, Any]:
    return {
        "Name": name,
        "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expression}},
    }


SUBSCRIPTIONS: dict[str, list[dict[str, Any]]] = {
    "kind-a": [correlation("a", Properties={"kind": "a"})],
    "kind-b": [correlation("b", Properties={"kind": "b"})],
    "urgent": [correlation("label", Label="urgent")],
    "a-or-urgent": [
        correlation("a", Properties={"kind": "a"}),
        correlation("label", Label="urgent"),
    ],
    "a-and-json": [
        correlation(
            "both",
            ContentType="application/json",
            CorrelationId="r-1",
            Properties={"kind": "a", "priority": 7},
        )
    ],
    "sql": [sql("tenant-b-or-high", "(kind = 'b' AND EXISTS(tenant)) OR priority > 8")],
    "everything": [],
}


def config(subscriptions: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [],
                    "Topics": [
                        {
                            "Name": TOPIC,
                            "Properties": {},
                            "Subscriptions": [
                                {
                                    "Name": name,
                                    "Properties": {"RequiresSession": False},
                                    "Rules": rules,
                                }
                                for name, rules in subscriptions.items()
                            ],
                        }
                    ],
                }
            ]
        }
    }


@pytest.fixture(scope="module")
def endpoint(servicebus: Target) -> Iterator[ServiceBusEndpoint]:
    """The config's topic, subscriptions and rules on the shared endpoint (its control
    channel creates them as a config file would)."""
    if servicebus.endpoint is None:
        pytest.skip("creates its topic on the local endpoint's control channel")
    [namespace] = config(SUBSCRIPTIONS)["UserConfig"]["Namespaces"]
    with entities(servicebus.endpoint, namespace):
        yield servicebus.endpoint


MESSAGES = [
    ServiceBusMessage("1", message_id="m-a", application_properties={"kind": "a"}),
    ServiceBusMessage("2", message_id="m-b", application_properties={"kind": "b"}),
    ServiceBusMessage("3", message_id="m-urgent", subject="urgent"),
    ServiceBusMessage(
        "4",
        message_id="m-a-json",
        content_type="application/json",
        correlation_id="r-1",
        application_properties={"kind": "a", "priority": 7},
    ),
    ServiceBusMessage(
        "5", message_id="m-b-tenant", application_properties={"kind": "b", "tenant": "t1"}
    ),
    ServiceBusMessage("6", message_id="m-high", application_properties={"priority": 9}),
    ServiceBusMessage("7", message_id="m-none"),
    ServiceBusMessage(
        "8",
        message_id="m-a-string-priority",
        content_type="application/json",
        correlation_id="r-1",
        application_properties={"kind": "a", "priority": "7"},
    ),
]


def received(client: ServiceBusClient, subscription: str, count: int) -> set[str]:
    """The ids of the `count` messages the subscription is expected to hold and of any more
    that come (`receive_all`)."""
    with client.get_subscription_receiver(TOPIC, subscription) as receiver:
        return {
            str(m.message_id)
            for m in receive_all(receiver, count, f"{count} message(s) on {subscription}")
        }


def test_each_subscription_receives_what_its_rules_match(endpoint: ServiceBusEndpoint) -> None:
    a = {"m-a", "m-a-json", "m-a-string-priority"}
    expected = {
        "kind-a": a,
        "kind-b": {"m-b", "m-b-tenant"},
        "urgent": {"m-urgent"},
        "a-or-urgent": a | {"m-urgent"},
        "a-and-json": {"m-a-json"},  # every field, and 7 is not "7"
        "sql": {"m-b-tenant", "m-high"},
        "everything": {str(m.message_id) for m in MESSAGES},
    }
    assert set(expected) == set(SUBSCRIPTIONS)
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        with client.get_topic_sender(TOPIC) as sender:
            sender.send_messages(MESSAGES)
        got = {name: received(client, name, len(ids)) for name, ids in expected.items()}
    assert got == expected


def facts(system: dict[str, Any] | None = None, **user: Any) -> Facts:
    return Facts(system={k.lower(): v for k, v in (system or {}).items()}, user=user)


def matches(expression: str, f: Facts) -> bool:
    [rule] = parse_rules([sql("r", expression)], "subscription 's'")
    assert isinstance(rule.filter, SqlFilter)
    return rule.filter.matches(f)


@pytest.mark.parametrize(
    ("expression", "user", "expected"),
    [
        ("kind = 'a'", {"kind": "a"}, True),
        ("kind = 'a'", {"kind": "A"}, False),
        ("kind = 'a'", {}, False),  # unknown, not false: see NOT below
        ("NOT kind = 'a'", {}, False),
        ("NOT kind = 'a'", {"kind": "b"}, True),
        ("kind <> 'a' OR kind IS NULL", {}, True),
        ("kind IS NOT NULL", {"kind": "a"}, True),
        ("EXISTS(kind) AND NOT EXISTS(tenant)", {"kind": "a"}, True),
        ("kind IN ('a', 'b')", {"kind": "b"}, True),
        ("kind NOT IN ('a', 'b')", {"kind": "c"}, True),
        ("priority >= 5 AND priority < 10", {"priority": 5}, True),
        ("priority > 5", {"priority": "9"}, False),  # a string is not a number
        ("priority = 5.0", {"priority": 5}, True),
        ("flag = TRUE", {"flag": True}, True),
        ("flag = 1", {"flag": True}, False),
        ("[odd-name] = 'x''y'", {"odd-name": "x'y"}, True),
        ("user.kind = 'a'", {"kind": "a"}, True),
        ("KIND = 'a' AND EXISTS(Kind)", {"kind": "a"}, True),  # names are case-insensitive
        ("1 = 1", {}, True),
        ("(kind = 'a' OR kind = 'b') AND tenant = 't'", {"kind": "b", "tenant": "t"}, True),
    ],
)
def test_the_sql_subset(expression: str, user: dict[str, Any], expected: bool) -> None:
    assert matches(expression, facts(**user)) is expected


def test_sql_reads_system_properties_by_their_sys_names() -> None:
    message = facts({"Label": "urgent", "Subject": "urgent", "MessageId": "m-1"})
    assert matches("sys.Label = 'urgent' AND sys.MessageId = 'm-1'", message)
    assert matches("sys.subject = 'urgent'", message)
    assert not matches("sys.CorrelationId = 'x'", message)


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        (sql("r", "name LIKE 'a%'"), "LIKE"),
        (sql("r", "priority + 1 > 2"), "'+'"),
        (sql("r", "newid() = 'x'"), "function newid()"),
        (sql("r", "sys.DeliveryCount > 2"), "sys.DeliveryCount"),
        (sql("r", "kind = "), "the end"),
        (sql("r", ""), "empty"),
        (
            {
                "Name": "r",
                "Properties": {
                    "FilterType": "Sql",
                    "SqlFilter": {"SqlExpression": "1=1"},
                    "Action": {"SqlExpression": "DROP kind"},
                },
            },
            "not a SET or REMOVE statement",
        ),
        ({"Name": "r", "Properties": {"FilterType": "True"}}, "FilterType must be"),
        (correlation("r", Subject="x"), "unknown CorrelationFilter field"),
        (correlation("r"), "at least one field"),
    ],
)
def test_rules_the_endpoint_cannot_evaluate_are_refused_at_load(
    tmp_path: Path,
    rule: dict[str, Any],
    why: str,
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config({"s": [rule]})))
    with pytest.raises(RuleError, match="subscription 's', rule 'r'") as refused:
        load_config(path)
    assert why in str(refused.value)
    assert str(path) in str(refused.value)


def test_a_rule_action_is_taken_with_a_warning_and_its_filter_still_decides(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The official emulator's sample Config.json has an Action: it loads, the action is not
    applied (a warning says so), the filter is."""
    path = tmp_path / "config.json"
    rule = {
        "Name": "r",
        "Properties": {
            "FilterType": "Sql",
            "SqlFilter": {"SqlExpression": "kind = 'a'"},
            "Action": {"SqlExpression": "SET sys.To = 'Entity'"},
        },
    }
    path.write_text(json.dumps(config({"s": [rule]})))
    [topic] = load_config(path).entities
    [loaded] = topic.subscriptions[0].rules
    assert loaded.filter.matches(facts(kind="a"))
    assert not loaded.filter.matches(facts(kind="b"))
    assert "rule action \"SET sys.To = 'Entity'\" is not applied" in caplog.text


def test_the_endpoint_refuses_such_a_config_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config({"s": [sql("r", "name LIKE 'a%'")]})))
    done = subprocess.run(
        [sys.executable, "-m", "funcstack.servicebus", "--port", "0", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=SHORT,  # a refusal at start
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "LIKE" in done.stderr, done.stderr


def test_without_a_config_the_namespace_is_empty() -> None:
    assert load_config(None).entities == []
