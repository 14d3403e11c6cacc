"""Fixtures: a local Service Bus endpoint on a free port (or SERVICEBUS_CONNECTION_STRING), shared
by the suite; `own`: the test config's entities again under names of one test's own, created on
it through its control channel (a test that needs an empty subscription or queue), deleted
after. A module that changes or stops an endpoint starts its own (test_servicebus.py's
`own_endpoint`, test_persistence.py's)."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSender,
)
from azure.servicebus.aio import ServiceBusReceiver as AsyncServiceBusReceiver

from funcstack.deadlines import SHORT, DeadlineError
from funcstack.servicebus import control_request
from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus

CONFIG = Path(__file__).with_name("config.json")
TOPIC = "test-topic"
SUBSCRIPTION = "every-message"
QUEUE = "conformance-queue"  # only in the local test config: LockDuration 1 s, MaxDeliveryCount 3
DUPLICATE_WINDOW_SECONDS = 1.0
#: A non-event's window: how long a receive waits to show that nothing (more) arrives. Only a
#: message that does arrive fails it, so a slow machine makes it no flakier (it only searches
#: less: the receive's wait also covers opening its link).
NOTHING_MORE = 1.0


def receive(
    receiver: ServiceBusReceiver,
    count: int,
    what: str,
    deadline: float = SHORT,
    *,
    complete: bool = False,
) -> list[ServiceBusReceivedMessage]:
    """`count` messages from `receiver`, taken as they arrive (a receive returns with the first
    messages, its wait only a bound), each batch completed at once with `complete` (a short
    lock does not lapse while the rest come), else not settled. Past `deadline`, a
    DeadlineError naming `what` and how many came."""
    got: list[ServiceBusReceivedMessage] = []
    end = time.monotonic() + deadline
    while len(got) < count:
        left = end - time.monotonic()
        if left <= 0:
            raise DeadlineError(f"{what}: {len(got)} of {count} message(s) in {deadline:g} s")
        batch = receiver.receive_messages(max_message_count=count - len(got), max_wait_time=left)
        for message in batch if complete else ():
            receiver.complete_message(message)
        got += batch
    return got


def receive_all(
    receiver: ServiceBusReceiver, count: int, what: str, deadline: float = SHORT
) -> list[ServiceBusReceivedMessage]:
    """`receive`'s `count` messages, then any more that come within `NOTHING_MORE` (a
    non-event when `count` is all there should be), each completed as it comes: for a test
    that checks it got those and no others."""
    got = receive(receiver, count, what, deadline, complete=True)
    more = receiver.receive_messages(max_message_count=count + 10, max_wait_time=NOTHING_MORE)
    for message in more:
        receiver.complete_message(message)
    return got + more


async def receive_async(
    receiver: AsyncServiceBusReceiver, count: int, what: str, deadline: float = SHORT
) -> list[ServiceBusReceivedMessage]:
    """`receive` with the asyncio client's receiver."""
    got: list[ServiceBusReceivedMessage] = []
    end = time.monotonic() + deadline
    while len(got) < count:
        left = end - time.monotonic()
        if left <= 0:
            raise DeadlineError(f"{what}: {len(got)} of {count} message(s) in {deadline:g} s")
        got += await receiver.receive_messages(
            max_message_count=count - len(got), max_wait_time=left
        )
    return got


@dataclass
class Target:
    connection_string: str
    endpoint: ServiceBusEndpoint | None  # None when running against an external namespace
    log_path: Path | None = None

    @property
    def is_local(self) -> bool:
        return self.endpoint is not None


def _external() -> str | None:
    return os.environ.get("SERVICEBUS_CONNECTION_STRING") or None


def _start(tmp_path: Path, *, control: bool = False) -> ServiceBusEndpoint:
    return start_servicebus(
        config=CONFIG,
        duplicate_window_seconds=DUPLICATE_WINDOW_SECONDS,
        log_path=tmp_path / "servicebus.log",
        control=control,
    )


def start_shared(folder: Path) -> Target:
    """The run's endpoint (``shared_servicebus``, tests/conftest.py): the test
    config's entities, its duplicate detection window, a control channel; its log in
    ``folder``."""
    endpoint = _start(folder, control=True)
    return Target(endpoint.connection_string, endpoint, folder / "servicebus.log")


@pytest.fixture(scope="session")
def servicebus(request: pytest.FixtureRequest) -> Target:
    """One endpoint shared by the suite (the run's, ``shared_servicebus``); tests use
    their own session ids / message ids, or entities of their own (`own`, `entities`)."""
    external = _external()
    if external:
        return Target(connection_string=external, endpoint=None)
    shared: Target = request.getfixturevalue("shared_servicebus")
    return shared


@dataclass(frozen=True)
class Entities:
    """The test config's entities under names of one test's own: ``topic`` (with its
    subscriptions ``every-message`` and ``tail``), ``queue`` (`QUEUE`'s), ``expiring_queue``."""

    topic: str
    queue: str
    expiring_queue: str


@contextmanager
def entities(endpoint: ServiceBusEndpoint, namespace: dict[str, Any]) -> Iterator[None]:
    """A config namespace's queues and topics (their subscriptions and rules), created on a
    running endpoint through its control channel under their own names, deleted after: a
    module's entities on the shared endpoint instead of an endpoint of its own."""
    made: list[str] = []

    def control(request: dict[str, Any]) -> None:
        control_request(endpoint.host, endpoint.control_port or 0, request)

    assert endpoint.control_port is not None, "the endpoint has no control channel"
    try:
        for queue in namespace.get("Queues", []):
            control(
                {"op": "create-queue", "name": queue["Name"], "properties": queue["Properties"]}
            )
            made.append(queue["Name"])
        for topic in namespace.get("Topics", []):
            control(
                {"op": "create-topic", "name": topic["Name"], "properties": topic["Properties"]}
            )
            made.append(topic["Name"])
            for sub in topic.get("Subscriptions", []):
                control(
                    {
                        "op": "create-subscription",
                        "topic": topic["Name"],
                        "name": sub["Name"],
                        "properties": sub.get("Properties", {}),
                        "rules": sub.get("Rules", []),
                    }
                )
        yield
    finally:
        for name in made:
            control({"op": "delete", "name": name})


@pytest.fixture
def own(local_only: Target) -> Iterator[Entities]:
    """The config's queues and topic (and its subscriptions, rules and properties) created again
    on the shared endpoint under names ending in a suffix of this test's own, with the
    endpoint's duplicate detection window, as the config's are; deleted after the test."""
    assert local_only.endpoint is not None
    [namespace] = json.loads(CONFIG.read_text())["UserConfig"]["Namespaces"]
    suffix = uuid.uuid4().hex[:8]
    window = {"DuplicateDetectionHistoryTimeWindow": f"PT{DUPLICATE_WINDOW_SECONDS:g}S"}
    renamed = {
        kind: [
            {
                **entity,
                "Name": f"{entity['Name']}-{suffix}",
                "Properties": entity["Properties"] | window,
            }
            for entity in namespace[kind]
        ]
        for kind in ("Queues", "Topics")
    }
    with entities(local_only.endpoint, renamed):
        yield Entities(f"{TOPIC}-{suffix}", f"{QUEUE}-{suffix}", f"expiring-queue-{suffix}")


@pytest.fixture
def local_only(servicebus: Target) -> Target:
    if not servicebus.is_local:
        pytest.skip("uses entities or timings of the local test config")
    return servicebus


@pytest.fixture(scope="module")
def client(servicebus: Target) -> Iterator[ServiceBusClient]:
    """One SDK client per module (opening links costs the SDK ~0.5 s each)."""
    with ServiceBusClient.from_connection_string(servicebus.connection_string) as sb_client:
        yield sb_client


@pytest.fixture(scope="module")
def topic_sender(client: ServiceBusClient) -> Iterator[ServiceBusSender]:
    # keep_alive=0: no SDK keep-alive thread, whose 1 s sleeps otherwise delay every close.
    with client.get_topic_sender(TOPIC, keep_alive=0) as sender:
        yield sender
