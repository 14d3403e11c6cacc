"""A Contacts stack on the test process's Service Bus endpoint (tools/stack.py,
`Stack(shared_servicebus=...)`): its topic and subscriptions are its own, made with the
declared properties and rules, deleted when it stops; the endpoint is not its to stop, and what
is the endpoint's (a settle delay, a message size) is refused for one stack."""

from __future__ import annotations

from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

from funcstack.cosmos import CosmosEndpoint
from funcstack.servicebus import ServiceBusEndpoint
from tools.stack import Ports, Stack

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
    tmp_path: Path, shared_servicebus: ServiceBusEndpoint
) -> None:
    slow = Stack(
        workdir=tmp_path, shared_servicebus=shared_servicebus, servicebus_settle_delay_ms=1500
    )
    with pytest.raises(ValueError, match="servicebus_settle_delay_ms"):
        slow.start()  # before any part starts
    premium = Stack(
        workdir=tmp_path, shared_servicebus=shared_servicebus, servicebus_max_message_size=1 << 20
    )
    with pytest.raises(ValueError, match="servicebus_max_message_size"):
        premium.start()
