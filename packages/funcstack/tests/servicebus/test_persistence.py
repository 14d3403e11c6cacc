"""The local Service Bus endpoint keeps its state across a restart (``--state-file``), like
the official emulator with persistence: undelivered messages, sequence numbers and the
duplicate-detection history; what it acknowledged survives a SIGKILL; a state file of the
earlier format is converted. Local only (restarts and kills the endpoint). The three tests of a
restart share one (`restarted`: each wrote before it on entities no other touches, each checks
after it); the SIGKILL test and the conversion keep a state of their own."""

from __future__ import annotations

import json
import pickle
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from funcstack.servicebus._amqp import described, encode
from funcstack.servicebus._codec import parse_message
from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus

from .conftest import CONFIG, QUEUE, SUBSCRIPTION, TOPIC

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


#: The test config with a second topic (``test-topic`` again, as ``scheduled-topic``): the
#: scheduled messages' test reads its ``tail`` subscription, which on ``test-topic`` would
#: receive the duplicate test's message too.
SCHEDULED_TOPIC = "scheduled-topic"


def _config(folder: Path) -> Path:
    config = json.loads(CONFIG.read_text())
    [namespace] = config["UserConfig"]["Namespaces"]
    [topic] = [t for t in namespace["Topics"] if t["Name"] == TOPIC]
    namespace["Topics"].append({**topic, "Name": SCHEDULED_TOPIC})
    path = folder / "config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[list[ServiceBusEndpoint]]:
    """A list holding the current endpoint; tests restart it on the same port and state."""
    state = tmp_path / "servicebus.state"
    current = [start_servicebus(config=CONFIG, state_file=state, log_path=tmp_path / "sb.log")]
    try:
        yield current
    finally:
        current[-1].stop()


@dataclass
class Restarted:
    """The endpoint started again on the state it kept through a stop (one restart for the
    module's three tests of a restart), and what each test did before it."""

    endpoint: ServiceBusEndpoint
    session: str
    first_scheduled: int
    due: datetime


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restarted]:
    """Before the stop: a message with an id on ``TOPIC`` (the duplicate test's), two on
    `QUEUE` (the sequence numbers' test's), one scheduled on `SCHEDULED_TOPIC` (the scheduled
    messages' test's); then the endpoint is stopped and started on the same port and state."""
    folder = tmp_path_factory.mktemp("restarted")
    config, state, log = _config(folder), folder / "servicebus.state", folder / "sb.log"
    before = start_servicebus(config=config, state_file=state, log_path=log)
    session = f"contact-{uuid.uuid4()}"
    due = datetime.now(UTC) + timedelta(seconds=2)
    try:
        with ServiceBusClient.from_connection_string(before.connection_string) as client:
            with client.get_topic_sender(TOPIC) as sender:
                sender.send_messages(_event(session, "v1"))
            with client.get_queue_sender(QUEUE) as sender:
                sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
            with client.get_topic_sender(SCHEDULED_TOPIC) as sender:
                [first] = sender.schedule_messages(ServiceBusMessage("a", session_id="s"), due)
    finally:
        before.stop()
    after = start_servicebus(config=config, port=before.port, state_file=state, log_path=log)
    try:
        yield Restarted(after, session, first, due)
    finally:
        after.stop()


def _event(session: str, body: str) -> ServiceBusMessage:
    return ServiceBusMessage(body, message_id=f"{session}:1", session_id=session)


def test_a_resend_across_a_restart_is_dropped_as_a_duplicate(restarted: Restarted) -> None:
    session = restarted.session
    with ServiceBusClient.from_connection_string(restarted.endpoint.connection_string) as client:
        with client.get_topic_sender(TOPIC) as sender:
            sender.send_messages(_event(session, "v1 again"))
        with client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, session_id=session, max_wait_time=2
        ) as receiver:
            got = receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in got:
                receiver.complete_message(message)
    assert [str(m) for m in got] == ["v1"]


def test_undelivered_messages_and_sequence_numbers_survive_a_restart(
    restarted: Restarted,
) -> None:
    with ServiceBusClient.from_connection_string(restarted.endpoint.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(ServiceBusMessage("c"))
        with client.get_queue_receiver(QUEUE, max_wait_time=2) as receiver:
            got = receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in got:
                receiver.complete_message(message)
    assert [str(m) for m in got] == ["a", "b", "c"]
    assert [m.sequence_number for m in got] == [1, 2, 3]


def test_messages_scheduled_on_a_topic_survive_a_restart(restarted: Restarted) -> None:
    with ServiceBusClient.from_connection_string(restarted.endpoint.connection_string) as client:
        with client.get_topic_sender(SCHEDULED_TOPIC) as sender:
            [second] = sender.schedule_messages(
                ServiceBusMessage("b", session_id="s"), restarted.due
            )
        assert second > restarted.first_scheduled  # the topic's sequence numbers go on
        with client.get_subscription_receiver(SCHEDULED_TOPIC, "tail", max_wait_time=1) as receiver:
            got = receiver.receive_messages(max_message_count=5, max_wait_time=10)
            got += receiver.receive_messages(max_message_count=5, max_wait_time=1)
            for message in got:
                receiver.complete_message(message)
    assert sorted(str(m) for m in got) == ["a", "b"]


def _kill(current: list[ServiceBusEndpoint], tmp_path: Path) -> ServiceBusEndpoint:
    """SIGKILL the endpoint (nothing of it runs after), then start it again on its state."""
    old = current[-1]
    old.started().kill()
    old.started().wait(timeout=10)
    old.stop()
    new = start_servicebus(
        config=CONFIG,
        port=old.port,
        state_file=tmp_path / "servicebus.state",
        log_path=tmp_path / "sb.log",
    )
    current.append(new)
    return new


def test_what_was_acknowledged_survives_a_sigkill(
    restartable: list[ServiceBusEndpoint], tmp_path: Path
) -> None:
    """Durable before acknowledged: a send the endpoint accepted is there after a SIGKILL right
    after it, a complete it confirmed is gone, a message id it took is a duplicate still."""
    session = f"contact-{uuid.uuid4()}"
    with (
        ServiceBusClient.from_connection_string(restartable[-1].connection_string) as client,
        client.get_queue_sender(QUEUE) as sender,
        client.get_queue_receiver(QUEUE, max_wait_time=2) as receiver,
        client.get_topic_sender(TOPIC) as topic_sender,
    ):
        sender.send_messages([ServiceBusMessage("done"), ServiceBusMessage("kept")])
        [done] = receiver.receive_messages(max_message_count=1, max_wait_time=2)
        receiver.complete_message(done)
        topic_sender.send_messages(
            ServiceBusMessage("v1", message_id=f"{session}:1", session_id=session)
        )
        # at once, the links still open: within a few ms of the last acknowledgement
        endpoint = _kill(restartable, tmp_path)
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        with client.get_queue_receiver(QUEUE, max_wait_time=2) as receiver:
            got = receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in got:
                receiver.complete_message(message)
        endpoint = _kill(restartable, tmp_path)  # the queue empty: its sequence number kept
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(ServiceBusMessage("after"))
        with client.get_queue_receiver(QUEUE, max_wait_time=2) as receiver:
            after = receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in after:
                receiver.complete_message(message)
        with client.get_topic_sender(TOPIC) as sender:
            sender.send_messages(
                ServiceBusMessage("v1 again", message_id=f"{session}:1", session_id=session)
            )
        with client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, session_id=session, max_wait_time=2
        ) as receiver:
            events = receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in events:
                receiver.complete_message(message)
    assert [str(m) for m in got] == ["kept"]
    assert [m.sequence_number for m in got] == [2]
    assert [m.sequence_number for m in after] == [3]
    assert [str(m) for m in events] == ["v1"]


def test_a_state_file_of_the_earlier_format_is_read_once_and_converted(tmp_path: Path) -> None:
    """The earlier format (one pickle of the broker) is restored, then the file is the
    database: the messages are there after a second restart too, and the old file is gone."""
    state = tmp_path / "servicebus.state"
    payload = encode(described(0x73, ["v1-message"])) + encode(described(0x75, b"from v1"))
    stored = parse_message(payload)
    stored.seq = 7
    state.write_bytes(
        pickle.dumps(
            {
                "version": 1,
                "receivers": {QUEUE: {"last_seq": 7, "messages": [stored], "session_state": {}}},
                "senders": {TOPIC: {"seen-before": 4102444800.0}},
                "scheduled": {},
            }
        )
    )
    for _ in range(2):
        endpoint = start_servicebus(config=CONFIG, state_file=state, log_path=tmp_path / "sb.log")
        try:
            with (
                ServiceBusClient.from_connection_string(endpoint.connection_string) as client,
                client.get_queue_receiver(QUEUE, max_wait_time=2) as receiver,
            ):
                peeked = receiver.peek_messages(max_message_count=5)
        finally:
            endpoint.stop()
        assert [(m.message_id, m.sequence_number, str(m)) for m in peeked] == [
            ("v1-message", 7, "from v1")
        ]
        assert state.read_bytes().startswith(b"SQLite format 3")
        assert not state.with_name(state.name + ".v1").exists()
