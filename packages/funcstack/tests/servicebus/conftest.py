"""Fixtures: a local Service Bus endpoint on a free port (or SERVICEBUS_CONNECTION_STRING)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusSender

from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus

CONFIG = Path(__file__).with_name("config.json")
TOPIC = "test-topic"
SUBSCRIPTION = "every-message"
QUEUE = "conformance-queue"  # only in the local test config: LockDuration 1 s, MaxDeliveryCount 3
DUPLICATE_WINDOW_SECONDS = 1.0


@dataclass
class Target:
    connection_string: str
    endpoint: ServiceBusEndpoint | None  # None when running against an external namespace

    @property
    def is_local(self) -> bool:
        return self.endpoint is not None


def _external() -> str | None:
    return os.environ.get("SERVICEBUS_CONNECTION_STRING") or None


def _start(tmp_path: Path) -> ServiceBusEndpoint:
    return start_servicebus(
        config=CONFIG,
        duplicate_window_seconds=DUPLICATE_WINDOW_SECONDS,
        log_path=tmp_path / "servicebus.log",
    )


@pytest.fixture(scope="session")
def servicebus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """One endpoint shared by the suite; tests use their own session ids / message ids."""
    external = _external()
    if external:
        yield Target(connection_string=external, endpoint=None)
        return
    endpoint = _start(tmp_path_factory.mktemp("servicebus"))
    try:
        yield Target(connection_string=endpoint.connection_string, endpoint=endpoint)
    finally:
        endpoint.stop()


@pytest.fixture
def fresh_servicebus(tmp_path: Path) -> Iterator[Target]:
    """An endpoint of its own (empty subscription), local only."""
    if _external():
        pytest.skip("needs a private, empty endpoint")
    endpoint = _start(tmp_path)
    try:
        yield Target(connection_string=endpoint.connection_string, endpoint=endpoint)
    finally:
        endpoint.stop()


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
