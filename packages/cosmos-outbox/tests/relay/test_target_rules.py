"""Upgrades that check themselves (issue 66 item 5): at start the relay reads the topic's
subscriptions and their rules through the management API (the SDK's
ServiceBusAdministrationClient, against funcstack's) and names each subscription lacking the
targeted-delivery rule; `cosmos-outbox target-rules` lists them, `--yes` gives them the rule,
and the check then passes. Where the management API does not answer or refuses, the check says
"not checked" and why.

The topics whose rules these tests read and change are on the session's Service Bus endpoint
(`funcstack_services`), beside its topic, whose subscriptions carry the rule everywhere: one
topic per test, declared in conftest.py's `funcstack_config` (azure_stack.py,
`TARGET_RULES_TOPICS`), not a namespace of its own: nothing here stops, slows or resizes it."""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason="funcstack in this interpreter (Python 3.13+) runs these tests: its services",
)

from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    RuleProperties,
    SqlRuleFilter,
    TrueRuleFilter,
)
from azure_stack import clause
from deadlines import SHORT

from cosmos_outbox.cli import main as command_line
from cosmos_outbox.relay import RelayProcessor
from cosmos_outbox.servicebus import ServiceBusTargetRules
from cosmos_outbox.servicebus._target_rules import (
    check_target_rules_from_settings,
    keeps_others_out,
    log_target_rules,
)
from cosmos_outbox.settings import OutboxSettings
from cosmos_outbox_testing.contracts import (
    TargetRulesContract,
    TargetRulesWorld,
)
from funcstack import LocalStack

pytestmark = pytest.mark.integration

RELAY_APP = Path(__file__).parents[1] / "relay_app"
FAST: dict[str, Any] = {
    "lease_acquire_interval": 0.5,
    "lease_renew_interval": 0.5,
    "lease_expiration_interval": 3,
}


def app_settings(stack: LocalStack, fresh: str, leases: str) -> dict[str, str]:
    """The relay app's settings on this stack (as tests/relay/test_relay_process.py)."""
    values = stack.app_settings(
        RELAY_APP, {"COSMOS_CONTAINER": fresh, "COSMOS_LEASE_CONTAINER": leases}
    )["Values"]
    return {str(k): str(v) for k, v in values.items()}


def outbox_settings(values: dict[str, str]) -> OutboxSettings:
    return OutboxSettings(**values)  # type: ignore[arg-type]  # by the settings' names


def test_the_relay_names_at_start_each_subscription_lacking_the_rule(
    funcstack_services: LocalStack,
    fresh: str,
    leases: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    values = app_settings(funcstack_services, fresh, leases)
    values |= {
        "ServiceBusConnection": funcstack_services.servicebus_connection_string,
        "SERVICEBUS_TOPIC": "at-start",
    }
    settings = outbox_settings(values)

    async def run() -> None:
        async with RelayProcessor(settings, instance_name="rules-1", **FAST) as relay:
            async with asyncio.timeout(SHORT):
                while relay.target_rules is None:  # noqa: ASYNC110 - set by the start's check
                    await asyncio.sleep(0.05)
            check = relay.target_rules
            assert check.checked and set(check.subscriptions) == {"fine", "plain", "legacy"}
            assert [(s.subscription, s.rules, s.fixable) for s in check.lacking] == [
                ("plain", ("$Default: TrueFilter",), True),
                ("legacy", ("$Default: TrueFilter",), True),
            ]

    with caplog.at_level(logging.INFO, logger="cosmos_outbox.servicebus"):
        asyncio.run(run())
    [warning] = [
        r
        for r in caplog.records
        if r.name == "cosmos_outbox.servicebus" and "target-rules" in r.getMessage()
    ]
    assert warning.levelno == logging.WARNING
    line = warning.getMessage()
    assert "2 subscription(s) of topic 'at-start' lack one" in line
    assert "plain (rule $Default: TrueFilter)" in line and "legacy" in line and "fine" not in line
    assert "cosmos-outbox target-rules --yes" in line


def test_the_functions_relay_checks_with_the_app_settings_of_its_environment(
    funcstack_services: LocalStack,
    fresh: str,
    leases: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the Functions relay's first run starts in a thread (`log_target_rules_once_in_
    background`): the settings from the environment, as the worker has them."""
    values = app_settings(funcstack_services, fresh, leases)
    values |= {
        "ServiceBusConnection": funcstack_services.servicebus_connection_string,
        "SERVICEBUS_TOPIC": "at-start",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    check = log_target_rules()
    assert [s.subscription for s in check.lacking] == ["plain", "legacy"]


def test_the_command_lists_then_applies_the_rule_and_the_check_passes(
    funcstack_services: LocalStack,
    fresh: str,
    leases: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ServiceBusConnection", funcstack_services.servicebus_connection_string)
    monkeypatch.setenv("SERVICEBUS_TOPIC", "upgraded")
    values = app_settings(funcstack_services, fresh, leases)
    settings = outbox_settings(values)  # the session stack's own Service Bus
    upgraded = outbox_settings(
        values
        | {
            "ServiceBusConnection": funcstack_services.servicebus_connection_string,
            "SERVICEBUS_TOPIC": "upgraded",
        }
    )

    # a dry run: listed, nothing changed
    assert command_line(["target-rules"]) == 1
    out = capsys.readouterr().out
    assert "plain: would apply rule outbox-target, then delete $Default" in out
    assert "legacy: would apply" in out
    assert "by hand: kinds: give each of its rules the clause: (<its filter>) AND " in out
    assert "dry run: nothing changed" in out
    before = check_target_rules_from_settings(upgraded)
    assert [s.subscription for s in before.lacking] == ["plain", "legacy", "kinds"]

    # --yes: $Default replaced where it was alone; a filter of its own is left to its owner
    assert command_line(["target-rules", "--yes"]) == 1
    out = capsys.readouterr().out
    assert "plain: rule outbox-target created (NOT EXISTS(outboxTarget) OR " in out
    assert "legacy: rule $Default (TrueFilter) deleted" in out
    after = check_target_rules_from_settings(upgraded)
    assert [s.subscription for s in after.lacking] == ["kinds"]

    # its owner gives it the clause (as the command said); then the check passes
    monkeypatch.setenv("SERVICEBUS_TOPIC", "upgraded")
    from cosmos_outbox.servicebus._target_rules import admin_client

    with admin_client(connection_string=funcstack_services.servicebus_connection_string) as admin:
        admin.create_rule(
            "upgraded",
            "kinds",
            "kinds-targeted",
            filter=SqlRuleFilter(f"(kind = 'a') AND ({clause('kinds')})"),
        )
        admin.delete_rule("upgraded", "kinds", "kinds")
    assert command_line(["target-rules"]) == 0
    assert (
        "each of the 4 subscription(s) of topic 'upgraded' carries one" in capsys.readouterr().out
    )
    assert log_target_rules(upgraded).ok
    # the session's own stack: its config gives each subscription the rule
    assert log_target_rules(settings).ok


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_management_api_that_does_not_answer_or_refuses_is_not_checked(
    funcstack_services: LocalStack, fresh: str, leases: str
) -> None:
    values = app_settings(funcstack_services, fresh, leases)
    nothing = f"Endpoint=sb://127.0.0.1:{_free_port()};SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"
    check = log_target_rules(outbox_settings(values | {"ServiceBusConnection": nothing}))
    assert not check.checked and "the management API did not answer" in check.reason

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # a Listen-only SAS, as Azure answers it
            body = b"<Error><Code>401</Code><Detail>Manage claim required</Detail></Error>"
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        listen_only = f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=listen;SharedAccessKey=v;UseDevelopmentEmulator=true"
        check = log_target_rules(outbox_settings(values | {"ServiceBusConnection": listen_only}))
    finally:
        server.shutdown()
        server.server_close()
    assert not check.checked and "refused the credentials" in check.reason
    assert "Manage rights" in check.reason


@pytest.mark.parametrize(
    ("rule_filter", "keeps_out"),
    [
        (SqlRuleFilter(clause("s")), True),
        (SqlRuleFilter("not exists ( outboxTarget )  OR outboxTarget='s'"), True),
        (SqlRuleFilter("NOT EXISTS(outboxTarget)   OR outboxTarget = 's'"), True),
        (SqlRuleFilter(f"(kind = 'a') AND ({clause('s')})"), True),
        (SqlRuleFilter(f"(kind = 'a') OR ({clause('s')})"), False),
        (SqlRuleFilter(clause("other")), False),
        (SqlRuleFilter("kind = 'a'"), False),
        (TrueRuleFilter(), False),
        (FalseRuleFilter(), True),
        (CorrelationRuleFilter(label="urgent"), False),
    ],
)
def test_which_rules_keep_another_subscriptions_messages_out(
    rule_filter: Any, keeps_out: bool
) -> None:
    assert (
        keeps_others_out(
            RuleProperties("r", filter=rule_filter, action=None, created_at_utc=None), "s"
        )
        is keeps_out
    )


def test_the_check_accepts_each_filter_deploy_gives_a_subscription() -> None:
    """deploy/modules/servicebus.bicep's rules (its subscription's, its projection's own
    filter AND the clause) keep others' messages out, as the check reads them."""
    import re

    bicep = Path(__file__).parents[4] / "deploy" / "modules" / "servicebus.bicep"
    if not bicep.exists():
        pytest.skip("outside the repository: deploy/ is not here")
    expressions = re.findall(r"sqlExpression: '(.*)'", bicep.read_text())
    assert len(expressions) == 2
    for expression in expressions:
        sql_text = re.sub(r"\$\{\w+\}", "s", expression.replace("\\'", "'"))
        rule = RuleProperties(
            "$Default", filter=SqlRuleFilter(sql_text), action=None, created_at_utc=None
        )
        assert keeps_others_out(rule, "s"), sql_text


def test_the_local_stacks_subscriptions_each_carry_the_rule() -> None:
    """Issue 72 item 5: on call saw a fresh `make run` name the stack's own `tail` subscription
    as lacking the rule. Its configuration (tools/servicebus-config.json, which `make run`'s
    Service Bus reads) gives every subscription, `tail` included, a rule the check accepts;
    a stack kept from before that configuration keeps its messages, never its rules (they are
    read from the configuration at each start)."""
    config = Path(__file__).parents[4] / "tools" / "servicebus-config.json"
    if not config.exists():
        pytest.skip("outside the repository: tools/ is not here")
    [namespace] = json.loads(config.read_text())["UserConfig"]["Namespaces"]
    seen = set()
    for declared in namespace["Topics"]:
        for subscription in declared["Subscriptions"]:
            rules = [
                RuleProperties(
                    r["Name"],
                    filter=SqlRuleFilter(r["Properties"]["SqlFilter"]["SqlExpression"]),
                    action=None,
                    created_at_utc=None,
                )
                for r in subscription.get("Rules", [])
            ]
            assert rules and all(keeps_others_out(r, subscription["Name"]) for r in rules)
            seen.add(subscription["Name"])
    assert "tail" in seen


class TestServiceBusTargetRules(TargetRulesContract):
    """The port's adapter on the SDK's management client (funcstack's Service Bus answers it),
    sync and async, held to the suite the test kit's fake is held to
    (tests/write_path/test_contracts.py)."""

    @pytest.fixture(params=["sync", "aio"])
    def world(
        self, request: pytest.FixtureRequest, funcstack_services: LocalStack
    ) -> TargetRulesWorld:
        from cosmos_outbox.servicebus import aio

        kind: Any = ServiceBusTargetRules if request.param == "sync" else aio.ServiceBusTargetRules
        nothing = (
            f"Endpoint=sb://127.0.0.1:{_free_port()};SharedAccessKeyName=k;SharedAccessKey=v;"
            "UseDevelopmentEmulator=true"
        )
        return TargetRulesWorld(
            rules=kind(
                "contract", connection_string=funcstack_services.servicebus_connection_string
            ),
            refusing=kind("contract", connection_string=nothing),
        )
