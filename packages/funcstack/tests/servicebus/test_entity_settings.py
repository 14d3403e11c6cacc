"""An entity setting the local endpoint does not honour is never silently ignored: one warning
line at start per setting, naming each entity that sets it and what funcstack does instead (in
the endpoint's log and in the log of the process that started it, as ``funcstack run`` shows
it); an unknown name is warned about as a typo. The emulator's own Config.json, with its empty
``ForwardTo``, draws no warning. Every property of the emulator's schema and of the SDK's
management model is either honoured, of no local effect, or warned about. A topic's
DefaultMessageTimeToLive bounds its subscriptions' (honoured).

An endpoint of its own where a test's Config.json is what it checks (one waiting for its first
connection where its start's warnings are all a test reads); what a running endpoint's
control channel creates, on the run's (``shared_servicebus``, started with the test
config, whose warnings are checked too), under names of the test's own, deleted after."""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import QueueProperties, SubscriptionProperties, TopicProperties

from funcstack.deadlines import LOOPBACK, SHORT, wait_for
from funcstack.servicebus import control_request
from funcstack.servicebus._entity_settings import HONOURED, NO_LOCAL_EFFECT, UNHONOURED
from funcstack.servicebus._launcher import start_servicebus

from .conftest import Target, entities

pytestmark = [pytest.mark.integration, pytest.mark.conformance]

FIXTURES = Path(__file__).parents[1] / "fixtures"

#: Every property of each entity in the official emulator's Config-schema.json
#: (Azure/azure-service-bus-emulator-installer, ServiceBus-Emulator/Schema).
EMULATOR_SCHEMA = {
    "queue": {
        "DeadLetteringOnMessageExpiration",
        "DefaultMessageTimeToLive",
        "DuplicateDetectionHistoryTimeWindow",
        "ForwardDeadLetteredMessagesTo",
        "ForwardTo",
        "LockDuration",
        "MaxDeliveryCount",
        "RequiresDuplicateDetection",
        "RequiresSession",
    },
    "topic": {
        "DefaultMessageTimeToLive",
        "DuplicateDetectionHistoryTimeWindow",
        "RequiresDuplicateDetection",
    },
    "subscription": {
        "DeadLetteringOnMessageExpiration",
        "DefaultMessageTimeToLive",
        "LockDuration",
        "MaxDeliveryCount",
        "ForwardDeadLetteredMessagesTo",
        "ForwardTo",
        "RequiresSession",
    },
}


def _pascal(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def _model(cls: type) -> set[str]:
    """The management model's properties of an entity (azure.servicebus.management), as the
    ATOM/ARM and Config.json name them."""
    names = list(inspect.signature(cls).parameters)
    return {_pascal(name) for name in names if name != "name"}


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("queue", QueueProperties),
        ("topic", TopicProperties),
        ("subscription", SubscriptionProperties),
    ],
)
def test_every_property_is_honoured_of_no_local_effect_or_warned_about(
    kind: str,
    model: type,
) -> None:
    known = (
        HONOURED[kind]
        | NO_LOCAL_EFFECT
        | {name for name, (kinds, _, _) in UNHONOURED.items() if kind in kinds}
    )
    assert EMULATOR_SCHEMA[kind] | _model(model) <= known
    assert _model(model) >= HONOURED[kind] - {"MaxMessageSizeInKilobytes"}


def _write(tmp_path: Path, namespace: dict[str, Any]) -> Path:
    path = tmp_path / "Config.json"
    path.write_text(
        json.dumps(
            {
                "UserConfig": {
                    "Namespaces": [
                        {"Name": "sbemulatorns", "Queues": [], "Topics": [], **namespace}
                    ],
                    "Logging": {"Type": "File"},
                }
            }
        )
    )
    return path


def test_each_setting_not_honoured_is_one_warning_line_naming_each_entity(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = _write(
        tmp_path,
        {
            "Queues": [
                {
                    "Name": "orders",
                    "Properties": {
                        "ForwardTo": "archive",
                        "EnablePartitioning": True,
                        "LockDuration": "PT30S",
                    },
                },
                {
                    "Name": "archive",
                    "Properties": {
                        "ForwardTo": "",
                        "AutoDeleteOnIdle": "PT5M",
                        "EnablePartitioning": False,
                    },
                },
                {"Name": "large", "Properties": {"MaxMessageSizeInKilobytes": 4096}},
            ],
            "Topics": [
                {
                    "Name": "events",
                    "Properties": {"AutoDeleteOnIdle": "PT1H", "Status": "SendDisabled"},
                    "Subscriptions": [
                        {
                            "Name": "all",
                            "Properties": {
                                "ForwardTo": "orders",
                                "ForwardDeadLetteredMessagesTo": "dlq",
                                "MaxDeliveryCount": 3,
                                "LockDurationn": "PT1M",
                            },
                        }
                    ],
                }
            ],
        },
    )
    with caplog.at_level(logging.WARNING, logger="funcstack.servicebus"):
        endpoint = start_servicebus(config=config, log_path=tmp_path / "sb.log")
    try:
        lines = endpoint.warnings
    finally:
        endpoint.stop()
    by_setting = {line.split()[0]: line for line in lines}
    assert len(by_setting) == len(lines)  # one line per setting
    assert sorted(by_setting) == sorted(
        [
            "ForwardTo",
            "EnablePartitioning",
            "AutoDeleteOnIdle",
            "Status",
            "ForwardDeadLetteredMessagesTo",
            "MaxMessageSizeInKilobytes",
            "LockDurationn",
        ]
    )
    forward = by_setting["ForwardTo"]
    assert "queue 'orders': 'archive'" in forward
    assert "subscription 'events/all': 'orders'" in forward
    assert "'archive': ''" not in forward and "does not forward" in forward
    assert "queue 'archive': 'PT5M'" in by_setting["AutoDeleteOnIdle"]
    assert "topic 'events': 'PT1H'" in by_setting["AutoDeleteOnIdle"]
    assert "never deleted" in by_setting["AutoDeleteOnIdle"]
    assert "queue 'orders'" in by_setting["EnablePartitioning"]
    assert "'archive'" not in by_setting["EnablePartitioning"]  # false: no difference
    assert "'SendDisabled'" in by_setting["Status"]
    assert "used only on Premium" in by_setting["MaxMessageSizeInKilobytes"]
    assert re.search(
        r"LockDurationn is not a property of a Service Bus subscription "
        r"\(subscription 'events/all'\)",
        by_setting["LockDurationn"],
    )
    # shown by the process that started the endpoint, and kept in the endpoint's log
    assert [r.getMessage() for r in caplog.records if r.name == "funcstack.servicebus"] == lines
    log = (tmp_path / "sb.log").read_text()
    assert all(line in log for line in lines)


def test_the_emulators_own_config_draws_no_warning(
    tmp_path: Path, shared_servicebus: Target
) -> None:
    assert shared_servicebus.endpoint is not None
    assert shared_servicebus.endpoint.warnings == []  # started with the test config, CONFIG
    official = FIXTURES / "emulator-Config.json"
    # its warnings said at its start, which reads the config as the endpoint does (started at
    # its first connection: the config read and its warnings logged now, no process needed)
    endpoint = start_servicebus(config=official, log_path=tmp_path / "sb.log", lazy=True)
    try:
        assert endpoint.warnings == [], official
    finally:
        endpoint.stop()


def test_an_entity_created_on_the_control_channel_is_warned_about_too(
    shared_servicebus: Target,
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint = shared_servicebus.endpoint
    assert endpoint is not None and endpoint.control_port is not None
    queue = f"q-{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.WARNING, logger="funcstack.servicebus"):
        control_request(
            endpoint.host,
            endpoint.control_port,
            {"op": "create-queue", "name": queue, "properties": {"ForwardTo": "elsewhere"}},
        )
    control_request(endpoint.host, endpoint.control_port, {"op": "delete", "name": queue})
    [line] = [r.getMessage() for r in caplog.records if r.name.startswith("funcstack.servicebus")]
    assert line.startswith("ForwardTo is not honoured") and f"queue '{queue}': 'elsewhere'" in line


def test_a_topics_time_to_live_bounds_its_subscriptions(shared_servicebus: Target) -> None:
    assert shared_servicebus.endpoint is not None
    topic = f"t-{uuid.uuid4().hex[:8]}"
    # the topic's time to live: a send and a peek (local answers) are done well within it, on
    # a slow machine too; the subscription's own (1 h) is not what ends the message
    ttl = math.ceil(LOOPBACK)
    namespace = {
        "Topics": [
            {
                "Name": topic,
                "Properties": {"DefaultMessageTimeToLive": f"PT{ttl}S"},
                "Subscriptions": [
                    {"Name": "s", "Properties": {"DefaultMessageTimeToLive": "PT1H"}}
                ],
            }
        ]
    }
    with (
        entities(shared_servicebus.endpoint, namespace),
        ServiceBusClient.from_connection_string(shared_servicebus.connection_string) as client,
        # the receiver's link attached before the send: a loaded machine's attach took longer
        # than a 1 s time to live (the message gone before the first peek)
        client.get_subscription_receiver(topic, "s") as receiver,
        client.get_topic_sender(topic) as sender,
    ):
        # each peek from the first sequence number (else the SDK goes on from the last); the
        # first opens the peeks' link before the send
        assert receiver.peek_messages(max_message_count=5, sequence_number=1) == []
        sender.send_messages(ServiceBusMessage("soon gone", message_id=str(uuid.uuid4())))
        assert len(receiver.peek_messages(max_message_count=5, sequence_number=1)) == 1
        wait_for(
            lambda: not receiver.peek_messages(max_message_count=5, sequence_number=1),
            f"the message gone once the topic's {ttl} s time to live ran out",
            ttl + SHORT,
            every=0.2,
        )
