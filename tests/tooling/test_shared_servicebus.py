"""A Contacts stack on the test process's Service Bus endpoint (tools/stack.py,
`Stack(shared_servicebus=...)`): its topic and subscriptions are its own, made with the
declared properties and rules (funcstack's `declare_servicebus`, from a copy of the config with
the topic renamed), deleted when it stops; the endpoint is not its to stop, and what is the
endpoint's (a settle delay, a message size) or every stack's (a queue, another topic) is refused
for one stack."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

from funcstack.cosmos import CosmosEndpoint
from funcstack.servicebus import ServiceBusEndpoint
from funcstack.services import PartStartError
from tools.provision import declared
from tools.stack import SERVICEBUS_CONFIG, Ports, Stack

pytestmark = pytest.mark.integration


def test_a_stack_has_a_topic_of_its_own_on_the_shared_endpoint_gone_when_it_stops(
    tmp_path: Path, shared_cosmos: CosmosEndpoint, shared_servicebus: ServiceBusEndpoint
) -> None:
    stacks = [
        Stack(
            workdir=tmp_path / name,
            ports=Ports.free(),
            shared_cosmos=shared_cosmos,
            shared_servicebus=shared_servicebus,
            with_runner=False,
        ).start()
        for name in ("one", "two")
    ]
    one, two = stacks
    try:
        topics = [s.settings()["SERVICEBUS_TOPIC"] for s in stacks]
        assert topics[0] != topics[1] and all(t.startswith("contact-events-") for t in topics)
        assert one.servicebus is two.servicebus is shared_servicebus
        with pytest.raises(ValueError, match="shared"):
            one.stop_servicebus()
        with ServiceBusClient.from_connection_string(shared_servicebus.connection_string) as sb:
            with sb.get_topic_sender(topics[0]) as sender:  # the declared rules: all-events
                sender.send_messages(ServiceBusMessage("{}", session_id="s1", message_id="m1"))
                sender.send_messages(  # ... takes what names it or no target, not the tail's
                    ServiceBusMessage(
                        "{}",
                        session_id="s1",
                        message_id="m2",
                        application_properties={"outboxTarget": "tail"},
                    )
                )
            for topic, expected in ((topics[0], ["m1"]), (topics[1], [])):
                with sb.get_subscription_receiver(
                    topic, "all-events", session_id="s1", max_wait_time=2
                ) as receiver:
                    got = [m.message_id for m in receiver.receive_messages(10, max_wait_time=2)]
                assert got == expected, topic
        one.stop()
        assert not shared_servicebus.stopped
        with (
            ServiceBusClient.from_connection_string(
                shared_servicebus.connection_string, retry_total=0
            ) as sb,
            pytest.raises(ServiceBusError),  # the topic is not found
            sb.get_topic_sender(topics[0]) as sender,
        ):
            sender.send_messages(ServiceBusMessage("{}", session_id="s1"))
    finally:
        for stack in stacks:
            stack.stop()


def test_what_is_the_endpoints_is_refused_for_one_stack(
    tmp_path: Path, shared_cosmos: CosmosEndpoint, shared_servicebus: ServiceBusEndpoint
) -> None:
    """funcstack's refusal (`LocalStack.declare_servicebus`); on the shared Cosmos DB endpoint
    the stack starts no part of its own before it."""
    slow = Stack(
        workdir=tmp_path / "slow",
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        servicebus_settle_delay_ms=1500,
    )
    with pytest.raises(PartStartError, match="servicebus_settle_delay_ms: a setting of the endp"):
        slow.start()
    premium = Stack(
        workdir=tmp_path / "premium",
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        servicebus_max_message_size=1 << 20,
    )
    with pytest.raises(PartStartError, match="servicebus_max_message_size: a setting of the"):
        premium.start()


def test_entities_that_would_be_every_stacks_are_refused_before_any_part_starts(
    tmp_path: Path, shared_servicebus: ServiceBusEndpoint
) -> None:
    """Only the app's topic is renamed: a queue or another topic of the config would be
    declared under its own name, one entity for every stack on the endpoint."""
    document = json.loads(SERVICEBUS_CONFIG.read_text())
    [namespace] = document["UserConfig"]["Namespaces"]
    namespace["Queues"] = [{"Name": "commands", "Properties": {}}]
    namespace["Topics"].append({"Name": "audit", "Properties": {}, "Subscriptions": []})
    config_file = tmp_path / "servicebus-config.json"
    config_file.write_text(json.dumps(document))
    config = replace(declared(), servicebus_file=config_file)
    stack = Stack(workdir=tmp_path / "stack", config=config, shared_servicebus=shared_servicebus)
    with pytest.raises(ValueError, match=r"declares commands, audit, which would be every"):
        stack.start()
    assert stack.cosmos is None  # refused before any part starts
