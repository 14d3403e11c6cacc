"""The local Service Bus endpoint keeps its state across a restart (``--state-file``), like
the official emulator with persistence: undelivered messages, sequence numbers and the
duplicate-detection history. Local only (restarts the endpoint)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus

from .conftest import CONFIG, QUEUE, SUBSCRIPTION, TOPIC

pytestmark = pytest.mark.conformance


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[list[ServiceBusEndpoint]]:
    """A list holding the current endpoint; tests restart it on the same port and state."""
    state = tmp_path / "servicebus.state"
    current = [start_servicebus(config=CONFIG, state_file=state, log_path=tmp_path / "sb.log")]
    try:
        yield current
    finally:
        current[-1].stop()


def _restart(current: list[ServiceBusEndpoint], tmp_path: Path) -> ServiceBusEndpoint:
    old = current[-1]
    old.stop()
    new = start_servicebus(
        config=CONFIG, port=old.port, state_file=tmp_path / "servicebus.state",
        log_path=tmp_path / "sb.log",
    )
    current.append(new)
    return new


def test_a_resend_across_a_restart_is_dropped_as_a_duplicate(
    restartable: list[ServiceBusEndpoint], tmp_path: Path
) -> None:
    session = f"contact-{uuid.uuid4()}"

    def event(body: str) -> ServiceBusMessage:
        return ServiceBusMessage(body, message_id=f"{session}:1", session_id=session)

    with (
        ServiceBusClient.from_connection_string(restartable[-1].connection_string) as client,
        client.get_topic_sender(TOPIC) as sender,
    ):
        sender.send_messages(event("v1"))
    endpoint = _restart(restartable, tmp_path)
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        with client.get_topic_sender(TOPIC) as sender:
            sender.send_messages(event("v1 again"))
        with client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, session_id=session, max_wait_time=2
        ) as receiver:
            got = receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in got:
                receiver.complete_message(message)
    assert [str(m) for m in got] == ["v1"]


def test_undelivered_messages_and_sequence_numbers_survive_a_restart(
    restartable: list[ServiceBusEndpoint], tmp_path: Path
) -> None:
    with (
        ServiceBusClient.from_connection_string(restartable[-1].connection_string) as client,
        client.get_queue_sender(QUEUE) as sender,
    ):
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    endpoint = _restart(restartable, tmp_path)
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(ServiceBusMessage("c"))
        with client.get_queue_receiver(QUEUE, max_wait_time=2) as receiver:
            got = receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in got:
                receiver.complete_message(message)
    assert [str(m) for m in got] == ["a", "b", "c"]
    assert [m.sequence_number for m in got] == [1, 2, 3]


def test_messages_scheduled_on_a_topic_survive_a_restart(
    restartable: list[ServiceBusEndpoint], tmp_path: Path
) -> None:
    due = datetime.now(UTC) + timedelta(seconds=2)
    with (
        ServiceBusClient.from_connection_string(restartable[-1].connection_string) as client,
        client.get_topic_sender(TOPIC) as sender,
    ):
        [first] = sender.schedule_messages(ServiceBusMessage("a", session_id="s"), due)
    endpoint = _restart(restartable, tmp_path)
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        with client.get_topic_sender(TOPIC) as sender:
            [second] = sender.schedule_messages(ServiceBusMessage("b", session_id="s"), due)
        assert second > first  # the topic's sequence numbers go on
        with client.get_subscription_receiver(TOPIC, "tail", max_wait_time=1) as receiver:
            got = receiver.receive_messages(max_message_count=5, max_wait_time=10)
            got += receiver.receive_messages(max_message_count=5, max_wait_time=1)
            for message in got:
                receiver.complete_message(message)
    assert sorted(str(m) for m in got) == ["a", "b"]
