"""The runner drives a session-enabled Service Bus topic trigger, as the host does: complete on
success, abandon on failure (redelivered with DeliveryCount + 1), dead-lettered by the broker
after the subscription's MaxDeliveryCount, each session's messages in order, the function's
retry policy applied under the same lock; a message's lock (without sessions) and a session's
lock renewed up to host.json's maxAutoLockRenewalDuration, then lost (the message handed out
again while the first invocation still runs). Real azure-servicebus SDK against the local
broker. The tests that need no setting of their own share one host (`shared_host`), each on a
topic and function of its own; the others start a host with their settings."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from servicebus.conftest import Target, receive_all

from funcstack.deadlines import SHORT, DeadlineError, wait_for
from funcstack.functions_host._launcher import RunningRunner, start_runner
from funcstack.functions_host._servicebus_trigger import renew_delay
from funcstack.servicebus import control_request
from funcstack.servicebus._launcher import ServiceBusEndpoint

from .conftest import make_app_dir

pytestmark = pytest.mark.integration

MAX_DELIVERY = 3
#: A non-event's window: a message settled (completed or dead-lettered) is not delivered
#: again. Only a delivery fails the check, so a slow machine makes it no flakier.
NOT_AGAIN = 1.5


@pytest.fixture(scope="module")
def broker(shared_servicebus: Target) -> ServiceBusEndpoint:
    """The run's endpoint: each test creates a topic of its own on its control
    channel."""
    assert shared_servicebus.endpoint is not None
    return shared_servicebus.endpoint


@dataclass
class Env:
    broker: ServiceBusEndpoint
    topic: str
    out: Path
    runner: RunningRunner
    #: one sender for the test (opening one costs the SDK ~0.5 s, closing a sync one with its
    #: keep-alive thread ~0.5 s more: a sender per message made the sends the test's pace)
    sender: ServiceBusSender

    def send(self, session: str | None, body: dict[str, Any], **props: str | int) -> str:
        message_id = str(uuid.uuid4())
        self.sender.send_messages(
            ServiceBusMessage(
                json.dumps(body),
                message_id=message_id,
                session_id=session,
                content_type="application/json",
                application_properties=dict(props.items()) or None,
            )
        )
        return message_id

    def lines(self) -> list[dict[str, Any]]:
        """The invocations of the function on this test's topic."""
        if not self.out.exists():
            return []
        every = [json.loads(x) for x in self.out.read_text("utf-8").splitlines() if x]
        return [x for x in every if x["topic"] == self.topic]

    def wait(
        self, until: Callable[[list[dict[str, Any]]], bool], deadline: float = SHORT
    ) -> list[dict[str, Any]]:
        """The invocations so far, once `until` holds of them."""
        lines: list[dict[str, Any]] = []

        def done() -> bool:
            lines[:] = self.lines()
            return until(lines)

        try:
            wait_for(done, "the invocations awaited", deadline, every=0.1)
        except DeadlineError as exc:
            raise DeadlineError(f"{exc}; invocations so far: {lines}") from None
        return lines

    def dead_letters(self, count: int = 0) -> list[Any]:
        """The `count` messages expected in the dead-letter queue and any more that come
        (`receive_all`; none expected: a non-event's window)."""
        with (
            ServiceBusClient.from_connection_string(self.broker.connection_string) as client,
            client.get_subscription_receiver(
                self.topic, "sub", sub_queue=ServiceBusSubQueue.DEAD_LETTER
            ) as receiver,
        ):
            return receive_all(receiver, count, f"{count} dead-lettered message(s)")


def _topic(
    broker: ServiceBusEndpoint,
    *,
    sessions: bool = True,
    subscription: dict[str, Any] | None = None,
) -> str:
    """A topic of its own, with its subscription ``sub``, made on the endpoint's control
    channel."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    assert broker.control_port is not None
    control_request(
        broker.host, broker.control_port, {"op": "create-topic", "name": topic, "properties": {}}
    )
    control_request(
        broker.host,
        broker.control_port,
        {
            "op": "create-subscription",
            "topic": topic,
            "name": "sub",
            "properties": {
                "RequiresSession": sessions,
                "MaxDeliveryCount": MAX_DELIVERY,
                **(subscription or {}),
            },
        },
    )
    return topic


def _host(
    broker: ServiceBusEndpoint,
    tmp_path: Path,
    topic: str,
    out: Path,
    *,
    sessions: bool = True,
    service_bus: dict[str, Any] | None = None,
    **settings: str,
) -> RunningRunner:
    app_dir = make_app_dir(tmp_path, "sample_servicebus_app.py", {})
    (app_dir / "host.json").write_text(
        json.dumps(
            {
                "version": "2.0",
                "extensions": {
                    "serviceBus": {
                        "maxConcurrentSessions": 4,
                        "sessionIdleTimeout": "00:00:01",
                        **(service_bus or {}),
                    }
                },
            }
        )
    )
    return start_runner(
        app_dir=app_dir,
        log_path=tmp_path / "runner.log",
        settings={
            "FUNCTIONS_WORKER_RUNTIME": "python",
            "ServiceBusConnection": broker.connection_string,
            "SAMPLE_TOPIC": topic,
            "SAMPLE_SUBSCRIPTION": "sub",
            "SAMPLE_OUT": str(out),
            "SAMPLE_SESSIONS": "true" if sessions else "false",
            **settings,
        },
    )


@contextmanager
def _sending(
    broker: ServiceBusEndpoint, topic: str, out: Path, runner: RunningRunner
) -> Iterator[Env]:
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_topic_sender(topic, keep_alive=0) as sender,
    ):
        yield Env(broker, topic, out, runner, sender)


def _env(
    broker: ServiceBusEndpoint,
    tmp_path: Path,
    *,
    sessions: bool = True,
    subscription: dict[str, Any] | None = None,
    service_bus: dict[str, Any] | None = None,
    **settings: str,
) -> Iterator[Env]:
    topic = _topic(broker, sessions=sessions, subscription=subscription)
    out = tmp_path / "out.jsonl"
    runner = _host(
        broker, tmp_path, topic, out, sessions=sessions, service_bus=service_bus, **settings
    )
    try:
        with _sending(broker, topic, out, runner) as env:
            yield env
    finally:
        runner.stop()


#: The tests on `env`: each on a topic of its own, all served by one host (`shared_host`).
SHARED_TOPICS = 5


@dataclass
class SharedHost:
    """One host of the sample app for the module's tests that need no setting of their own:
    a function on each of `SHARED_TOPICS` topics (sessions; a test takes the next one) and
    one on `plain` (no sessions); the host's connections to the broker once it idled."""

    runner: RunningRunner
    out: Path
    free: list[str]
    plain: str
    idle_connections: int


def _connections(pid: int, port: int) -> int:
    """The TCP connections process ``pid`` holds to ``port`` (Linux: its sockets' inodes,
    found in /proc/net/tcp)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = str(fd.readlink())
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text("ascii").splitlines()[1:]:
            fields = row.split()
            established = fields[3] == "01"
            if established and int(fields[2].rsplit(":", 1)[1], 16) == port:
                count += fields[9] in inodes
    return count


def _idle_connections(runner: RunningRunner, broker: ServiceBusEndpoint, expected: int) -> int:
    """The host's connections to the broker once it holds ``expected`` of them (and a moment
    more, for any other to open: a non-event's window)."""
    wait_for(
        lambda: _connections(runner.process.pid, broker.port) >= expected,
        f"the triggers' {expected} connection(s)",
        every=0.1,
    )
    time.sleep(1)  # a non-event: no other connection opens
    return _connections(runner.process.pid, broker.port)


#: The shared host's slots: each session topic's (maxConcurrentSessions, the sample's host.json)
#: and the plain topic's (maxConcurrentCalls: its default, 16 x cores).
SHARED_SESSION_SLOTS = 4
SHARED_PLAIN_SLOTS = 16 * (os.cpu_count() or 1)
#: Azure's bound on the slots waiting on the broker at once, per trigger: min(slots, 2 x cores)
#: (Azure.Messaging.ServiceBus's processor, for its session accepts; ``_slot_gate``).
TWICE_THE_CORES = 2 * (os.cpu_count() or 1)
SHARED_IDLE_CONNECTIONS = SHARED_TOPICS * min(SHARED_SESSION_SLOTS, TWICE_THE_CORES) + min(
    SHARED_PLAIN_SLOTS, TWICE_THE_CORES
)


@pytest.fixture(scope="module")
def shared_host(
    broker: ServiceBusEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedHost]:
    tmp = tmp_path_factory.mktemp("shared-host")
    topics = [_topic(broker) for _ in range(SHARED_TOPICS)]
    plain = _topic(broker, sessions=False)
    out = tmp / "out.jsonl"
    runner = _host(
        broker,
        tmp,
        topics[0],
        out,
        SAMPLE_TOPICS=",".join(topics[1:]),
        SAMPLE_PLAIN_TOPICS=plain,
    )
    try:
        idle = _idle_connections(runner, broker, SHARED_IDLE_CONNECTIONS)
        yield SharedHost(runner, out, topics, plain, idle)
    finally:
        runner.stop()


@pytest.fixture
def env(broker: ServiceBusEndpoint, shared_host: SharedHost) -> Iterator[Env]:
    """A topic of the test's own (its subscription ``sub`` with sessions, `MAX_DELIVERY`) and
    its function on the module's shared host: its lines and dead letters are its own."""
    assert shared_host.free, f"more tests on `env` than SHARED_TOPICS ({SHARED_TOPICS})"
    topic = shared_host.free.pop(0)
    with _sending(broker, topic, shared_host.out, shared_host.runner) as own:
        yield own


@pytest.fixture
def plain_env(broker: ServiceBusEndpoint, shared_host: SharedHost) -> Iterator[Env]:
    """The shared host's topic without sessions (its function ``on_plain_0``)."""
    with _sending(broker, shared_host.plain, shared_host.out, shared_host.runner) as own:
        yield own


def test_idle_triggers_wait_on_the_broker_with_azures_bound_of_slots(
    shared_host: SharedHost,
) -> None:
    """The shared host's triggers (five with sessions, maxConcurrentSessions 4; one without,
    maxConcurrentCalls 16 x cores), idle: each holds min(slots, 2 x cores) connections to the
    broker, as many slots as Azure's processor lets accept or receive at once, not one per slot
    (``_slot_gate``: 4 x 5 + 4 = 24 on 2 cores, not 52)."""
    assert shared_host.idle_connections == SHARED_IDLE_CONNECTIONS


def _all_at_once(env: Env, sessions: list[str | None]) -> None:
    """One message each for ``sessions``, each invocation waiting for the others to start:
    they all ran at the same time."""
    folder = env.out.parent / f"together-{env.topic}"
    for session in sessions:
        env.send(session, {"together": {"dir": str(folder), "n": len(sessions)}})
    lines = env.wait(lambda lines: len(lines) == len(sessions))
    assert [x["together"] for x in lines] == [True] * len(sessions)


def test_sessions_are_processed_at_once_up_to_max_concurrent_sessions(env: Env) -> None:
    """Four sessions at once on an idle trigger (maxConcurrentSessions 4): each slot that
    accepts one hands its turn on to the next (``_slot_gate``), and all four run together."""
    _all_at_once(env, ["all-a", "all-b", "all-c", "all-d"])


def test_without_sessions_messages_are_processed_at_once(plain_env: Env) -> None:
    """Four messages at once on an idle trigger without sessions: four invocations at the
    same time (maxConcurrentCalls, 16 x cores)."""
    _all_at_once(plain_env, [None] * 4)


def test_a_message_is_passed_with_its_metadata_and_completed(env: Env) -> None:
    message_id = env.send("s1", {"n": 1}, version=3, cloudEvents_id="e-1")
    [line] = env.wait(lambda lines: len(lines) == 1)
    assert line["ok"] and line["id"] == message_id and line["session"] == "s1"
    assert line["delivery"] == 1 and line["body"] == {"n": 1}
    assert line["content_type"] == "application/json"
    assert line["props"] == {"version": 3, "cloudEvents_id": "e-1"}
    time.sleep(NOT_AGAIN)  # a non-event: completed, never redelivered
    assert len(env.lines()) == 1
    assert env.dead_letters() == []


def test_a_failed_invocation_abandons_and_the_message_comes_back_with_delivery_count_plus_one(
    env: Env,
) -> None:
    message_id = env.send("s2", {"fail_deliveries": 2})
    lines = env.wait(lambda lines: any(x["ok"] for x in lines))
    assert [(x["id"], x["delivery"], x["ok"]) for x in lines] == [
        (message_id, 1, False),
        (message_id, 2, False),
        (message_id, 3, True),
    ]
    time.sleep(NOT_AGAIN)  # a non-event: completed at last, never redelivered
    assert len(env.lines()) == 3
    assert env.dead_letters() == []


def test_after_max_delivery_count_failures_the_broker_dead_letters_the_message(env: Env) -> None:
    message_id = env.send("s3", {"fail_deliveries": 100})
    lines = env.wait(lambda lines: len(lines) >= MAX_DELIVERY)
    [dead] = env.dead_letters(1)
    assert dead.message_id == message_id
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert [x["delivery"] for x in lines] == list(range(1, MAX_DELIVERY + 1))
    time.sleep(NOT_AGAIN)  # a non-event: dead-lettered, never delivered again
    assert len(env.lines()) == MAX_DELIVERY


def test_a_trigger_on_a_subscriptions_dead_letter_queue_receives_and_completes_its_dead_letters(
    broker: ServiceBusEndpoint, tmp_path: Path
) -> None:
    """`<subscription>/$DeadLetterQueue`, as Azure's host binds it: the dead-letter queue (never
    session-enabled) of a session-enabled subscription, received and completed."""
    with contextmanager(_env)(broker, tmp_path, SAMPLE_DEAD_LETTERS="true") as env:
        message_id = env.send("s-dead", {"fail_deliveries": 100})
        lines = env.wait(lambda lines: any(x.get("dead_letter") for x in lines))
        [line] = [x for x in lines if x.get("dead_letter")]
        assert (line["id"], line["reason"]) == (message_id, "MaxDeliveryCountExceeded")
        assert env.dead_letters() == []  # completed: it left the dead-letter queue


def test_each_session_is_processed_in_order_one_message_at_a_time(env: Env) -> None:
    sessions = [f"order-{i}" for i in range(6)]
    for n in range(5):
        for session in sessions:
            env.send(session, {"n": n, "sleep": 0.05})
    lines = env.wait(lambda lines: len(lines) == 30)
    for session in sessions:
        assert [x["body"]["n"] for x in lines if x["session"] == session] == list(range(5))
    # a failure holds back its own session only: its next message waits for the redelivery
    env.send("held", {"n": 0, "fail_deliveries": 1})
    env.send("held", {"n": 1})
    lines = env.wait(lambda lines: len([x for x in lines if x["session"] == "held"]) == 3)
    assert [(x["body"]["n"], x["delivery"]) for x in lines if x["session"] == "held"] == [
        (0, 1),
        (0, 2),
        (1, 1),
    ]


@pytest.fixture
def retry_env(broker: ServiceBusEndpoint, tmp_path: Path) -> Iterator[Env]:
    yield from _env(broker, tmp_path, SAMPLE_RETRY="fixed")


def test_the_functions_retry_policy_retries_under_the_same_lock_before_abandoning(
    retry_env: Env,
) -> None:
    # one in-memory retry per delivery: two invocations per DeliveryCount, the count unchanged
    message_id = retry_env.send("r1", {"fail_deliveries": 1})
    lines = retry_env.wait(lambda lines: any(x["ok"] for x in lines))
    assert [(x["id"], x["delivery"], x["ok"]) for x in lines] == [
        (message_id, 1, False),
        (message_id, 1, False),
        (message_id, 2, True),
    ]
    log = (retry_env.out.parent / "runner.log").read_text("utf-8")
    assert "Soon retries will not be supported for function 'Functions.on_message'" in log


# ---- locks: renewed up to maxAutoLockRenewalDuration, then lost -------------------------------

LOCK = {"LockDuration": "PT2S", "MaxDeliveryCount": 10}


@pytest.mark.parametrize("sessions", [False, True], ids=["message-lock", "session-lock"])
def test_a_lock_is_renewed_while_a_long_invocation_runs(
    broker: ServiceBusEndpoint,
    tmp_path: Path,
    sessions: bool,
) -> None:
    """A 2 s lock, a 6 s invocation, renewal up to 30 s: one invocation, completed; the
    session's next message after it (without renewal the lock lapses at 2 s and the message is
    handed out again)."""
    with contextmanager(_env)(
        broker,
        tmp_path,
        sessions=sessions,
        subscription=LOCK,
        service_bus={"maxAutoLockRenewalDuration": "00:00:30"},
    ) as env:
        session = "long" if sessions else None
        first = env.send(session, {"n": 0, "sleep": 6})
        second = env.send(session, {"n": 1})
        lines = env.wait(lambda lines: {x["id"] for x in lines} == {first, second})
        time.sleep(3)  # a non-event: past another lock duration, nothing handed out again
        lines = env.lines()
        assert sorted((x["id"], x["delivery"]) for x in lines) == sorted([(first, 1), (second, 1)])
        if sessions:  # in order, the second after the first ended
            assert [x["body"]["n"] for x in lines] == [0, 1]
        assert env.dead_letters() == []


@pytest.mark.parametrize("sessions", [False, True], ids=["message-lock", "session-lock"])
def test_past_max_auto_lock_renewal_duration_the_lock_is_lost_and_the_message_redelivered(
    broker: ServiceBusEndpoint,
    tmp_path: Path,
    sessions: bool,
) -> None:
    """A 2 s lock renewed up to 3 s, an 8 s invocation: the lock lapses about 4 s in and the
    message is handed out again (DeliveryCount 2) while the first invocation still runs; the
    first one's settlement then fails, as in Azure."""
    with contextmanager(_env)(
        broker,
        tmp_path,
        sessions=sessions,
        subscription=LOCK,
        service_bus={"maxAutoLockRenewalDuration": "00:00:03"},
    ) as env:
        message_id = env.send("lapse" if sessions else None, {"sleep": 8})
        lines = env.wait(lambda lines: len(lines) >= 2)
        by_delivery = {x["delivery"]: x for x in lines if x["id"] == message_id}
        first, again = by_delivery[1], by_delivery[2]
        # handed out again while the first invocation ran, after its lock was renewed (> 2 s)
        assert first["start"] + 2.5 < again["start"] < first["end"]
        log = (env.out.parent / "runner.log").read_text("utf-8")
        assert "settling message" in log


def test_a_lock_is_renewed_when_as_the_dotnet_processor_renews_it() -> None:
    now = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)

    def after(seconds: float) -> dt.datetime:
        return now + dt.timedelta(seconds=seconds)

    assert renew_delay(after(60), now) == 50  # what is left less 10 s
    assert renew_delay(after(8), now) == 4  # ... less half of it, under 20 s
    assert renew_delay(after(0.3), now) == 0 and renew_delay(after(-1), now) == 0
    assert renew_delay(None, now) == 0
