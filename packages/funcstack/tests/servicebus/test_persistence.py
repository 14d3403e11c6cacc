"""The local Service Bus endpoint keeps its state across a restart (``--state-file``), like
the official emulator with persistence: undelivered messages, sequence numbers and the
duplicate-detection history; what it acknowledged survives a SIGKILL; a state file of the
earlier format is converted. Local only (restarts and kills the endpoint).

One state for the restart tests and the SIGKILL test (`kept`): each writes on entities no other
touches (a topic of its own for the scheduled messages' ``tail``, a queue of its own for the
SIGKILL test's sequence numbers, a session of its own on ``TOPIC`` for each duplicate), then the
endpoint is killed right after the SIGKILL test's last acknowledgement and started again on the
same port and state; each checks after it (the SIGKILL test kills it once more). A stop's own
path (the file closed, its log written into it) is the conversion test's second start. The
conversion keeps a state of its own: the earlier format's file is what it reads."""

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

from funcstack.deadlines import LOOPBACK, SHORT, DeadlineError
from funcstack.servicebus._amqp import described, encode
from funcstack.servicebus._codec import parse_message
from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus

from .conftest import CONFIG, QUEUE, SUBSCRIPTION, TOPIC, receive, receive_all

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


#: The test config with a second topic (``test-topic`` again, as ``scheduled-topic``): the
#: scheduled messages' test reads its ``tail`` subscription, which on ``test-topic`` would
#: receive the duplicate tests' messages too.
SCHEDULED_TOPIC = "scheduled-topic"
#: ``QUEUE`` again, as ``killed-queue``: the SIGKILL test counts its sequence numbers from 1.
KILLED_QUEUE = "killed-queue"


def _config(folder: Path) -> Path:
    config = json.loads(CONFIG.read_text())
    [namespace] = config["UserConfig"]["Namespaces"]
    [topic] = [t for t in namespace["Topics"] if t["Name"] == TOPIC]
    # the duplicate tests check their resends in any order, after the others' waits (a
    # scheduled message's, a SIGKILL and a start): a window of 10 min, not 20 s
    topic["Properties"] = topic["Properties"] | {"DuplicateDetectionHistoryTimeWindow": "PT10M"}
    namespace["Topics"].append({**topic, "Name": SCHEDULED_TOPIC})
    [queue] = [q for q in namespace["Queues"] if q["Name"] == QUEUE]
    namespace["Queues"].append({**queue, "Name": KILLED_QUEUE})
    path = folder / "config.json"
    path.write_text(json.dumps(config))
    return path


@dataclass
class Kept:
    """The endpoint started again on the state it kept through a SIGKILL, and what each test
    did before it."""

    endpoint: ServiceBusEndpoint
    config: Path
    state: Path
    log: Path
    #: the duplicate test's session
    session: str
    first_scheduled: int
    due: datetime
    #: the SIGKILL test's session
    killed_session: str

    def kill_and_start(self) -> ServiceBusEndpoint:
        """SIGKILL the endpoint (nothing of it runs after), then start it again on its state
        and port."""
        old = self.endpoint
        old.started().kill()
        old.started().wait(timeout=LOOPBACK)
        old.stop()
        self.endpoint = start_servicebus(
            config=self.config, port=old.port, state_file=self.state, log_path=self.log
        )
        return self.endpoint


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kept]:
    """Before the SIGKILL: a message with an id on ``TOPIC`` (the duplicate test's), two on
    `QUEUE` (the sequence numbers' test's), one scheduled on `SCHEDULED_TOPIC` (the scheduled
    messages' test's); then the SIGKILL test's: two sent on `KILLED_QUEUE` and one of them
    completed, a message with an id on ``TOPIC``; killed at once after that last
    acknowledgement, the links still open, and started on the same port and state."""
    folder = tmp_path_factory.mktemp("kept")
    config, state, log = _config(folder), folder / "servicebus.state", folder / "sb.log"
    before = start_servicebus(config=config, state_file=state, log_path=log)
    session = f"contact-{uuid.uuid4()}"
    killed_session = f"contact-{uuid.uuid4()}"
    # due after the SIGKILL and the start (about 1 s each): kept as scheduled, not as due
    due = datetime.now(UTC) + timedelta(seconds=LOOPBACK)
    shared = Kept(before, config, state, log, session, 0, due, killed_session)
    try:
        with ServiceBusClient.from_connection_string(before.connection_string) as client:
            with client.get_topic_sender(TOPIC) as sender:
                sender.send_messages(_event(session, "v1"))
            with client.get_queue_sender(QUEUE) as sender:
                sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
            with client.get_topic_sender(SCHEDULED_TOPIC) as sender:
                [shared.first_scheduled] = sender.schedule_messages(
                    ServiceBusMessage("a", session_id="s"), due
                )
            with (
                client.get_queue_sender(KILLED_QUEUE) as sender,
                client.get_queue_receiver(KILLED_QUEUE, max_wait_time=2) as receiver,
                client.get_topic_sender(TOPIC) as topic_sender,
            ):
                sender.send_messages([ServiceBusMessage("done"), ServiceBusMessage("kept")])
                [done] = receive(receiver, 1, "the first message sent")
                receiver.complete_message(done)
                topic_sender.send_messages(_event(killed_session, "v1"))
                # at once, the links still open: within a few ms of the last acknowledgement
                shared.kill_and_start()
        if datetime.now(UTC) >= due:
            raise DeadlineError(
                f"the endpoint killed and started again within {LOOPBACK:g} s, before the "
                "scheduled message is due (the scheduled test's premise)"
            )
        yield shared
    finally:
        shared.endpoint.stop()


def _event(session: str, body: str) -> ServiceBusMessage:
    return ServiceBusMessage(body, message_id=f"{session}:1", session_id=session)


def test_a_resend_across_a_restart_is_dropped_as_a_duplicate(kept: Kept) -> None:
    session = kept.session
    with ServiceBusClient.from_connection_string(kept.endpoint.connection_string) as client:
        with client.get_topic_sender(TOPIC) as sender:
            sender.send_messages(_event(session, "v1 again"))
        with client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, session_id=session, max_wait_time=2
        ) as receiver:
            got = receive_all(receiver, 1, "the message sent before the restart")
    assert [str(m) for m in got] == ["v1"]


def test_undelivered_messages_and_sequence_numbers_survive_a_restart(kept: Kept) -> None:
    with ServiceBusClient.from_connection_string(kept.endpoint.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(ServiceBusMessage("c"))
        with client.get_queue_receiver(QUEUE, max_wait_time=2) as receiver:
            got = receive_all(receiver, 3, "two messages from before the restart, one after")
    assert [str(m) for m in got] == ["a", "b", "c"]
    assert [m.sequence_number for m in got] == [1, 2, 3]


def test_messages_scheduled_on_a_topic_survive_a_restart(kept: Kept) -> None:
    with ServiceBusClient.from_connection_string(kept.endpoint.connection_string) as client:
        with client.get_topic_sender(SCHEDULED_TOPIC) as sender:
            [second] = sender.schedule_messages(ServiceBusMessage("b", session_id="s"), kept.due)
        assert second > kept.first_scheduled  # the topic's sequence numbers go on
        with client.get_subscription_receiver(SCHEDULED_TOPIC, "tail", max_wait_time=1) as receiver:
            got = receive_all(receiver, 2, "the scheduled messages", LOOPBACK + SHORT)
    assert sorted(str(m) for m in got) == ["a", "b"]


def test_what_was_acknowledged_survives_a_sigkill(kept: Kept) -> None:
    """Durable before acknowledged: a send the endpoint accepted is there after a SIGKILL right
    after it, a complete it confirmed is gone, a message id it took is a duplicate still (the
    first SIGKILL: `kept`'s, right after this test's writes)."""
    session = kept.killed_session
    with ServiceBusClient.from_connection_string(kept.endpoint.connection_string) as client:
        with client.get_queue_receiver(KILLED_QUEUE, max_wait_time=2) as receiver:
            got = receive_all(receiver, 1, "the message not completed before the SIGKILL")
        endpoint = kept.kill_and_start()  # the queue empty: its sequence number kept
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        with client.get_queue_sender(KILLED_QUEUE) as sender:
            sender.send_messages(ServiceBusMessage("after"))
        with client.get_queue_receiver(KILLED_QUEUE, max_wait_time=2) as receiver:
            after = receive_all(receiver, 1, "the message sent after the restart")
        with client.get_topic_sender(TOPIC) as sender:
            sender.send_messages(_event(session, "v1 again"))
        with client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, session_id=session, max_wait_time=2
        ) as receiver:
            events = receive_all(receiver, 1, "the message sent before the SIGKILL")
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
