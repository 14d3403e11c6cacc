"""Conformance of a Service Bus endpoint through the unmodified azure-servicebus SDK (sync)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import (
    MessageNotFoundError,
    MessageSizeExceededError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusError,
)

from funcstack.deadlines import LOOPBACK, SHORT, wait_for
from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus
from funcstack.services import free_port

from .conftest import (
    CONFIG,
    DUPLICATE_WINDOW_SECONDS,
    NOTHING_MORE,
    QUEUE,
    SUBSCRIPTION,
    TOPIC,
    Entities,
    Target,
    _external,
    receive,
)

pytestmark = [pytest.mark.integration, pytest.mark.conformance]

# Client-side speed knobs only: with prefetch on and keep_alive=0 the SDK starts no keep-alive
# thread, whose 1 s sleeps otherwise delay every receiver close.
FAST: dict[str, Any] = {"prefetch_count": 1, "keep_alive": 0}


def _no_retry(target: Target) -> ServiceBusClient:
    """A client whose operations are tried once: for the tests of a refusal or a time-out, which
    the SDK would retry with backoff for many seconds before raising the same error."""
    return ServiceBusClient.from_connection_string(target.connection_string, retry_total=0)


def _sid() -> str:
    return f"contact-{uuid.uuid4()}"


def _event(session_id: str, version: int, **extra: Any) -> ServiceBusMessage:
    return ServiceBusMessage(
        json.dumps({"version": version}),
        content_type="application/json",
        subject="ContactCreated" if version == 1 else "ContactUpdated",
        message_id=f"{session_id}:{version}",
        session_id=session_id,
        application_properties={"contactId": session_id, "version": version},
        **extra,
    )


def _drain_session(
    client: ServiceBusClient, session_id: str, *, expected: int
) -> list[ServiceBusReceivedMessage]:
    """Receive and complete ``expected`` messages of one session, as they arrive."""
    with client.get_subscription_receiver(
        TOPIC, SUBSCRIPTION, **FAST, session_id=session_id, max_wait_time=SHORT
    ) as receiver:
        got = receive(receiver, expected, f"session {session_id}'s messages")
        for message in got:
            receiver.complete_message(message)
    return got


def _version(message: ServiceBusReceivedMessage) -> int:
    return int(json.loads(str(message))["version"])


def test_round_trip_keeps_every_property(
    client: ServiceBusClient, topic_sender: ServiceBusSender
) -> None:
    sid = _sid()
    topic_sender.send_messages(_event(sid, 1))
    [message] = _drain_session(client, sid, expected=1)
    assert json.loads(str(message)) == {"version": 1}
    assert message.content_type == "application/json"
    assert message.subject == "ContactCreated"
    assert message.message_id == f"{sid}:1"
    assert message.session_id == sid
    props = message.application_properties or {}
    assert props[b"contactId"] in (sid, sid.encode())
    assert props[b"version"] == 1
    assert message.sequence_number is not None
    assert message.enqueued_time_utc is not None


def test_batch_of_many_messages_arrives_in_order(
    client: ServiceBusClient, topic_sender: ServiceBusSender
) -> None:
    sid = _sid()
    batch = topic_sender.create_message_batch()
    for version in range(1, 201):
        batch.add_message(_event(sid, version))
    topic_sender.send_messages(batch)
    got = _drain_session(client, sid, expected=200)
    assert [_version(m) for m in got] == list(range(1, 201))


def test_full_batches_sized_by_the_sdk_are_accepted(
    client: ServiceBusClient, topic_sender: ServiceBusSender
) -> None:
    sid = _sid()
    body = "x" * 10_000
    sent = 0
    batch = topic_sender.create_message_batch()
    for i in range(60):
        message = ServiceBusMessage(body, message_id=f"{sid}:{i}", session_id=sid)
        try:
            batch.add_message(message)
        except ValueError:
            topic_sender.send_messages(batch)
            sent += len(batch)
            batch = topic_sender.create_message_batch()
            batch.add_message(message)
    topic_sender.send_messages(batch)
    sent += len(batch)
    got = _drain_session(client, sid, expected=60)
    assert sent == 60
    assert len(got) == 60


def test_duplicate_message_id_is_dropped_inside_the_window(
    client: ServiceBusClient, topic_sender: ServiceBusSender
) -> None:
    sid = _sid()
    topic_sender.send_messages(_event(sid, 1))
    topic_sender.send_messages(_event(sid, 1))  # accepted, silently dropped
    topic_sender.send_messages(_event(sid, 2))
    with client.get_subscription_receiver(
        TOPIC, SUBSCRIPTION, **FAST, session_id=sid, max_wait_time=SHORT
    ) as receiver:
        got = receive(receiver, 2, "the first and the third message")
        for message in got:
            receiver.complete_message(message)
        # a non-event: the duplicate never comes (in a FIFO session it would have come second)
        extra = receiver.receive_messages(max_message_count=1, max_wait_time=NOTHING_MORE)
    assert [m.message_id for m in got] == [f"{sid}:1", f"{sid}:2"]
    assert extra == []


def test_duplicate_message_id_is_accepted_after_the_window(
    local_only: Target, client: ServiceBusClient, topic_sender: ServiceBusSender
) -> None:
    sid = _sid()
    topic_sender.send_messages(_event(sid, 1))
    time.sleep(DUPLICATE_WINDOW_SECONDS + 0.5)  # time passing: the window is over (at least)
    topic_sender.send_messages(_event(sid, 1))
    got = _drain_session(client, sid, expected=2)
    assert [m.message_id for m in got] == [f"{sid}:1", f"{sid}:1"]


def test_sessions_are_fifo_and_next_available_takes_each_then_times_out(
    local_only: Target, own: Entities
) -> None:
    sessions = [_sid() for _ in range(3)]
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        with client.get_topic_sender(own.topic, keep_alive=0) as sender:
            for version in range(1, 6):  # interleaved sessions
                for sid in sessions:
                    sender.send_messages(_event(sid, version))
        seen: dict[str, list[int]] = {}
        for _ in range(len(sessions)):
            with client.get_subscription_receiver(
                own.topic,
                SUBSCRIPTION,
                **FAST,
                session_id=NEXT_AVAILABLE_SESSION,
                max_wait_time=SHORT,
            ) as receiver:
                session_id = receiver.session.session_id
                assert session_id in sessions
                assert session_id not in seen
                versions = seen.setdefault(session_id, [])
                for message in receive(receiver, 5, f"session {session_id}'s five messages"):
                    assert message.session_id == session_id
                    versions.append(_version(message))
                    receiver.complete_message(message)
        assert seen == {sid: [1, 2, 3, 4, 5] for sid in sessions}
    # no session left: the accept times out (once: the SDK retries a timed-out accept, with
    # backoff, 17 s in all by default); a non-event, its wait the receiver's 1 s
    with (
        _no_retry(local_only) as client,
        pytest.raises(OperationTimeoutError),
        client.get_subscription_receiver(
            own.topic, SUBSCRIPTION, **FAST, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1
        ) as idle,
    ):
        idle.receive_messages(max_message_count=1, max_wait_time=1)


def test_a_locked_session_is_not_given_to_a_second_receiver(
    local_only: Target, own: Entities
) -> None:
    first, second = _sid(), _sid()
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        with client.get_topic_sender(own.topic, keep_alive=0) as sender:
            sender.send_messages([_event(first, 1), _event(second, 1)])
        with (
            client.get_subscription_receiver(
                own.topic,
                SUBSCRIPTION,
                **FAST,
                session_id=NEXT_AVAILABLE_SESSION,
                max_wait_time=SHORT,
            ) as one,
            client.get_subscription_receiver(
                own.topic,
                SUBSCRIPTION,
                **FAST,
                session_id=NEXT_AVAILABLE_SESSION,
                max_wait_time=SHORT,
            ) as two,
        ):
            assert {one.session.session_id, two.session.session_id} == {first, second}


def test_abandon_redelivers_with_incremented_delivery_count(
    client: ServiceBusClient, topic_sender: ServiceBusSender
) -> None:
    sid = _sid()
    topic_sender.send_messages(_event(sid, 1))
    with client.get_subscription_receiver(
        TOPIC, SUBSCRIPTION, **FAST, session_id=sid, max_wait_time=SHORT
    ) as receiver:
        [first] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
        receiver.abandon_message(first)
        [again] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
        receiver.complete_message(again)
    assert again.message_id == first.message_id
    assert first.delivery_count is not None
    assert again.delivery_count == first.delivery_count + 1


def test_dead_letter_after_max_delivery_count(
    client: ServiceBusClient, topic_sender: ServiceBusSender
) -> None:
    sid = _sid()
    max_delivery_count = 10  # every-message
    topic_sender.send_messages(_event(sid, 1))
    with client.get_subscription_receiver(
        TOPIC, SUBSCRIPTION, **FAST, session_id=sid, max_wait_time=SHORT
    ) as receiver:
        for _ in range(max_delivery_count):
            [message] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
            receiver.abandon_message(message)
        # a non-event: delivered ten times, it is not delivered again
        assert receiver.receive_messages(max_message_count=1, max_wait_time=NOTHING_MORE) == []
    dead = _read_dead_letters(client, expected=f"{sid}:1")
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"


def _read_dead_letters(client: ServiceBusClient, *, expected: str) -> ServiceBusReceivedMessage:
    with client.get_subscription_receiver(
        TOPIC, SUBSCRIPTION, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
    ) as dlq:

        def found() -> ServiceBusReceivedMessage | None:
            for message in dlq.receive_messages(max_message_count=1, max_wait_time=1):
                dlq.complete_message(message)
                if message.message_id == expected:
                    return message
            return None

        return wait_for(found, f"{expected} in the dead-letter queue")


def test_explicit_dead_letter_keeps_reason(
    client: ServiceBusClient, topic_sender: ServiceBusSender
) -> None:
    sid = _sid()
    topic_sender.send_messages(_event(sid, 1))
    with client.get_subscription_receiver(
        TOPIC, SUBSCRIPTION, **FAST, session_id=sid, max_wait_time=SHORT
    ) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
        receiver.dead_letter_message(message, reason="poison", error_description="bad data")
    dead = _read_dead_letters(client, expected=f"{sid}:1")
    assert dead.dead_letter_reason == "poison"
    assert dead.dead_letter_error_description == "bad data"


def test_message_without_session_id_is_rejected_on_a_session_entity(
    topic_sender: ServiceBusSender,
) -> None:
    with pytest.raises(ServiceBusError):
        topic_sender.send_messages(ServiceBusMessage("no session", message_id=str(uuid.uuid4())))


def test_oversized_message_is_rejected(topic_sender: ServiceBusSender) -> None:
    with pytest.raises(MessageSizeExceededError):
        topic_sender.send_messages(ServiceBusMessage(b"x" * 300_000, session_id=_sid()))


#: The message size limit of the module's own endpoint (a Premium namespace's: 1 MB).
PREMIUM_MAX_MESSAGE_SIZE = 1024 * 1024


@dataclass
class OwnEndpoint:
    """The module's endpoint of its own: the one now running (the restart test starts it
    again), its log."""

    current: ServiceBusEndpoint
    log: Path

    def start(self, port: int) -> ServiceBusEndpoint:
        self.current = _start_premium(port, self.log)
        return self.current


def _start_premium(port: int, log: Path) -> ServiceBusEndpoint:
    return start_servicebus(
        config=CONFIG, port=port, max_message_size=PREMIUM_MAX_MESSAGE_SIZE, log_path=log
    )


@pytest.fixture(scope="module")
def own_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnEndpoint]:
    """The module's own endpoint, local only: started with Premium's 1 MB message limit, on a
    port of its own. Two tests need an endpoint of their own, one for that setting, one to stop
    it and start it again on its port; neither minds the other's (the restart test's messages
    are small, and started again it has the same limit), so they share it: one start, not two."""
    if _external():
        pytest.skip("needs a private endpoint")
    log = tmp_path_factory.mktemp("own-servicebus") / "servicebus.log"
    own = OwnEndpoint(_start_premium(free_port(), log), log)
    try:
        yield own
    finally:
        own.current.stop()


def test_the_message_size_limit_is_configurable_as_on_premium(
    own_endpoint: OwnEndpoint,
) -> None:
    """Started with a 1 MB limit, an endpoint announces it on the sender's link: the SDK
    sizes its batches by it and a 300 KB message is accepted and received."""
    larger = own_endpoint.current
    sid = _sid()
    with ServiceBusClient.from_connection_string(larger.connection_string) as client:
        with client.get_topic_sender(TOPIC, keep_alive=0) as sender:
            assert sender.create_message_batch().max_size_in_bytes == PREMIUM_MAX_MESSAGE_SIZE
            sender.send_messages(
                ServiceBusMessage(b"x" * 300_000, session_id=sid, message_id=f"{sid}:1")
            )
            with pytest.raises(MessageSizeExceededError):
                sender.send_messages(ServiceBusMessage(b"x" * 1_100_000, session_id=sid))
        got = _drain_session(client, sid, expected=1)
    assert [m.message_id for m in got] == [f"{sid}:1"]


def test_sender_works_again_after_endpoint_restart_on_same_port(
    own_endpoint: OwnEndpoint,
) -> None:
    endpoint = own_endpoint.current
    sid = _sid()
    with ServiceBusClient.from_connection_string(
        endpoint.connection_string, retry_backoff_factor=0.1
    ) as client:
        with client.get_topic_sender(TOPIC, keep_alive=0) as sender:
            sender.send_messages(_event(sid, 1))
            endpoint.stop()
            own_endpoint.start(endpoint.port)
            sender.send_messages(_event(sid, 2))
        got = _drain_session(client, sid, expected=1)
    # State is in memory: the message sent before the restart is gone, the one after arrives.
    assert [m.message_id for m in got] == [f"{sid}:2"]


# ---- non-session queue (local test config only; the queue created again under a name of the
# test's own, `own`: the endpoint serves other modules at the same time) -----------------------


def test_peek_lock_complete_renew_and_lock_expiry(client: ServiceBusClient, own: Entities) -> None:
    with client.get_queue_sender(own.queue, keep_alive=0) as sender:
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    with client.get_queue_receiver(own.queue, max_wait_time=1) as receiver:
        messages = receive(receiver, 2, "a and b")
        assert [str(m) for m in messages] == ["a", "b"]
        receiver.complete_message(messages[0])
        assert receiver.renew_message_lock(messages[1]) is not None
        # "b" is not settled: after its 1 s lock it comes back with a higher delivery count
        again = receive(receiver, 1, "b again after its lock")
        assert [str(m) for m in again] == ["b"]
        assert again[0].delivery_count == (messages[1].delivery_count or 0) + 1
        receiver.complete_message(again[0])


def test_peek_defer_and_receive_and_delete(client: ServiceBusClient, own: Entities) -> None:
    with client.get_queue_sender(own.queue, keep_alive=0) as sender:
        sender.send_messages([ServiceBusMessage("later"), ServiceBusMessage("now")])
    with client.get_queue_receiver(own.queue, max_wait_time=1) as receiver:
        peeked = receiver.peek_messages(max_message_count=5)
        assert [str(m) for m in peeked] == ["later", "now"]
        [later] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
        receiver.defer_message(later)
        assert later.sequence_number is not None
        [deferred] = receiver.receive_deferred_messages([later.sequence_number])
        assert str(deferred) == "later"
        receiver.complete_message(deferred)
    with client.get_queue_receiver(
        own.queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=1
    ) as deleting:
        assert [str(m) for m in deleting.receive_messages(max_wait_time=SHORT)] == ["now"]
        assert deleting.receive_messages(max_wait_time=NOTHING_MORE) == []  # a non-event


def test_session_state_round_trip(client: ServiceBusClient, topic_sender: ServiceBusSender) -> None:
    sid = _sid()
    topic_sender.send_messages(_event(sid, 1))
    with client.get_subscription_receiver(
        TOPIC, SUBSCRIPTION, **FAST, session_id=sid, max_wait_time=SHORT
    ) as receiver:
        receiver.session.set_state(b"checkpoint-1")
        assert receiver.session.get_state() == b"checkpoint-1"
        receiver.session.renew_lock()
        for message in receiver.receive_messages(max_message_count=1, max_wait_time=SHORT):
            receiver.complete_message(message)


def test_a_scheduled_message_waits_without_holding_up_the_queue(
    local_only: Target, own: Entities
) -> None:
    # due far enough ahead that a loaded machine still peeks it before it is: a send and a
    # peek, local answers (at 2 s, a make test at a load average of 14 peeked it active)
    due = (datetime.now(UTC) + timedelta(seconds=LOOPBACK)).replace(microsecond=0)
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        with client.get_queue_sender(own.queue, keep_alive=0) as sender:
            later = ServiceBusMessage("later")
            later.scheduled_enqueue_time_utc = due
            sender.send_messages([later, ServiceBusMessage("now")])
        with client.get_queue_receiver(own.queue, max_wait_time=1) as receiver:
            peeked = receiver.peek_messages(max_message_count=5)
            assert [(str(m), m.state) for m in peeked] == [
                ("later", ServiceBusMessageState.SCHEDULED),
                ("now", ServiceBusMessageState.ACTIVE),
            ]
            [now] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
            assert str(now) == "now"
            receiver.complete_message(now)
            [scheduled] = receive(receiver, 1, "the scheduled message", LOOPBACK + SHORT)
            assert str(scheduled) == "later"
            assert scheduled.scheduled_enqueue_time_utc == due
            assert scheduled.enqueued_time_utc is not None
            assert scheduled.enqueued_time_utc >= due
            receiver.complete_message(scheduled)


def test_messages_scheduled_on_a_topic_can_be_cancelled(local_only: Target, own: Entities) -> None:
    # due far enough ahead that a loaded machine still peeks the topic before it is
    due = datetime.now(UTC) + timedelta(seconds=LOOPBACK)
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        with client.get_topic_sender(own.topic, keep_alive=0) as sender:
            numbers = sender.schedule_messages([_event("kept", 1), _event("cancelled", 1)], due)
            assert len(numbers) == 2 and numbers[0] != numbers[1]
            sender.cancel_scheduled_messages(numbers[1])
        with client.get_subscription_receiver(own.topic, "tail", max_wait_time=1) as receiver:
            assert receiver.peek_messages(max_message_count=5) == []  # held by the topic
            received = receive(receiver, 1, "the scheduled message kept", LOOPBACK + SHORT)
            # a non-event: the cancelled one (due at the same time) never comes
            received += receiver.receive_messages(max_message_count=5, max_wait_time=NOTHING_MORE)
            assert [m.message_id for m in received] == ["kept:1"]
            for message in received:
                receiver.complete_message(message)


def test_a_malformed_management_request_is_refused_and_the_connection_kept(
    client: ServiceBusClient, own: Entities
) -> None:
    # a schedule-message request whose entry has no message (no SDK sends one; a hostile or
    # broken client can): 400, and the same sender goes on working
    answers: list[tuple[int, str]] = []

    def answer(status_code: int, message: Any, description: str, **_: Any) -> None:
        answers.append((status_code, str(description)))

    with client.get_queue_sender(own.queue) as sender:
        sender._mgmt_request_response(
            b"com.microsoft:schedule-message",
            {b"messages": [{b"message-id": "no-message"}]},
            answer,  # what the SDK's own handlers are handed: status, response, description
            timeout=LOOPBACK,
        )
        sender.send_messages(ServiceBusMessage("after"))
    [(status, description)] = answers
    assert status == 400 and "malformed" in description
    with client.get_queue_receiver(own.queue, max_wait_time=SHORT) as receiver:
        [after] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
        assert str(after) == "after"
        receiver.complete_message(after)


def test_a_session_id_that_is_not_a_string_is_refused_at_open(
    local_only: Target, client: ServiceBusClient
) -> None:
    receiver = client.get_subscription_receiver(
        TOPIC, SUBSCRIPTION, session_id=cast(Any, 1), max_wait_time=1
    )
    with pytest.raises(ServiceBusError), receiver:
        pass


def test_a_session_receiver_on_an_entity_without_sessions_is_refused_at_open(
    local_only: Target, client: ServiceBusClient
) -> None:
    receiver = client.get_queue_receiver(QUEUE, session_id="s", max_wait_time=1)
    with pytest.raises(ServiceBusError):
        receiver.receive_messages(max_wait_time=1)  # opens the link
    receiver.close()


def test_a_lock_outlives_its_receiver_and_another_receiver_can_settle_it(
    local_only: Target, own: Entities
) -> None:
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        with client.get_topic_sender(own.topic, keep_alive=0) as sender:
            sender.send_messages(_event(_sid(), 1))
        # "tail" has no sessions and a 1 minute lock
        with client.get_subscription_receiver(own.topic, "tail", **FAST, max_wait_time=1) as first:
            [message] = first.receive_messages(max_message_count=1, max_wait_time=SHORT)
        with client.get_subscription_receiver(own.topic, "tail", **FAST, max_wait_time=1) as second:
            # the first receiver is gone, its lock is not: nobody else gets the message ...
            # a non-event
            assert second.receive_messages(max_message_count=1, max_wait_time=NOTHING_MORE) == []
            # ... and another receiver can still settle it by its lock token
            second.complete_message(message)
            assert second.peek_messages(max_message_count=5) == []


def test_a_client_for_an_entity_that_does_not_exist_fails_to_authenticate(
    local_only: Target,
) -> None:
    # the service refuses the $cbs token whose audience names no entity, before any link (a
    # client that does not retry: the SDK retries a refused token with backoff, 16 s in all)
    with _no_retry(local_only) as client, pytest.raises(ServiceBusAuthenticationError):
        client.get_queue_receiver("no-such-queue", max_wait_time=1).receive_messages()
    with (
        pytest.raises(ServiceBusAuthenticationError),
        _no_retry(local_only) as client,
        client.get_queue_sender("no-such-queue") as sender,
    ):
        sender.send_messages(ServiceBusMessage("x"))


def test_deferred_messages_received_in_receive_and_delete_mode_are_gone(
    local_only: Target, own: Entities
) -> None:
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        with client.get_queue_sender(own.queue, keep_alive=0) as sender:
            sender.send_messages(ServiceBusMessage("d"))
        with client.get_queue_receiver(own.queue, **FAST, max_wait_time=1) as receiver:
            [message] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
            receiver.defer_message(message)
        assert message.sequence_number is not None
    # the second look-up's not-found (com.microsoft:message-not-found) is retried by the SDK's
    # handler, with backoff, 11 s in all: a client that does not retry
    with (
        _no_retry(local_only) as client,
        client.get_queue_receiver(
            own.queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=1
        ) as deleting,
    ):
        [deferred] = deleting.receive_deferred_messages([message.sequence_number])
        assert str(deferred) == "d"
        with pytest.raises(MessageNotFoundError):
            deleting.receive_deferred_messages([message.sequence_number])


def test_expired_messages_leave_for_the_dead_letter_queue(
    client: ServiceBusClient, own: Entities
) -> None:
    # "expiring-queue": DeadLetteringOnMessageExpiration true (local test config)
    with client.get_queue_sender(own.expiring_queue, keep_alive=0) as sender:
        short = ServiceBusMessage("short", time_to_live=timedelta(seconds=1))
        sender.send_messages([short, ServiceBusMessage("kept")])
    time.sleep(1.5)  # time passing: "short" has expired (at least)
    with client.get_queue_receiver(own.expiring_queue, max_wait_time=1) as receiver:
        # the first message to come ("short" came first, were it delivered)
        received = receive(receiver, 1, "the message kept")
        assert [str(m) for m in received] == ["kept"]
        # the lock token is in the delivery annotations too, as the service sends it
        annotations = received[0].raw_amqp_message.delivery_annotations or {}
        assert annotations.get(b"x-opt-lock-token") == received[0].lock_token
        receiver.complete_message(received[0])
    with client.get_queue_receiver(
        own.expiring_queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
    ) as dead:
        [expired] = receive(dead, 1, "the expired message dead-lettered")
        assert str(expired) == "short"
        assert expired.dead_letter_reason == "TTLExpiredException"
        dead.complete_message(expired)


def test_delivery_annotations_reach_the_receiver(local_only: Target, own: Entities) -> None:
    # the SDK's hint says str keys; its own tests (and the wire) use bytes
    annotations_sent: dict[Any, Any] = {b"delann_key": b"delann_value"}
    message = AmqpAnnotatedMessage(data_body=b"x", delivery_annotations=annotations_sent)
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        with client.get_queue_sender(own.queue, keep_alive=0) as sender:
            sender.send_messages(message)
        with client.get_queue_receiver(
            own.queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=1
        ) as receiver:
            [received] = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
    annotations = received.raw_amqp_message.delivery_annotations or {}
    assert annotations.get(b"delann_key") == b"delann_value"


def test_sessions_listed_by_when_their_state_was_set(local_only: Target, own: Entities) -> None:
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        with client.get_topic_sender(own.topic, keep_alive=0) as sender:
            sender.send_messages([_event("old", 1), _event("new", 1)])
        with client.get_subscription_receiver(
            own.topic, SUBSCRIPTION, session_id="old", **FAST, max_wait_time=1
        ) as receiver:
            receiver.session.set_state(b"old-state")
        time.sleep(0.05)
        cutoff = datetime.now(UTC)
        time.sleep(0.05)
        with client.get_subscription_receiver(
            own.topic, SUBSCRIPTION, session_id="new", **FAST, max_wait_time=1
        ) as receiver:
            receiver.session.set_state(b"new-state")
        assert sorted(client.list_subscription_sessions(own.topic, SUBSCRIPTION)) == ["new", "old"]
        assert list(
            client.list_subscription_sessions(own.topic, SUBSCRIPTION, state_updated_after=cutoff)
        ) == ["new"]
