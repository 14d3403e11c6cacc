"""Azurite, the Service Bus and the Cosmos DB endpoints started at their first connection
(``lazy=True``, what a stack does): their ports listen at once and nothing runs; a first call
through the SDK is answered (the connection that woke it waits for it, it is never refused) by
the one process then started, and counted once; a stop leaves nothing listening, whether it
started or not."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from azure.cosmos import CosmosClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from funcstack.cosmos import start_cosmos
from funcstack.deadlines import SHORT
from funcstack.servicebus._launcher import start_servicebus
from funcstack.services import Azurite, port_in_use, start_azurite
from funcstack.starts import ENV_VAR, read_starts

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).resolve().parent / "servicebus" / "config.json"
QUEUE = "conformance-queue"
#: A non-event's window: nothing starts a lazy endpoint but a connection (only a start would
#: fail the check, so a slow machine makes it no flakier).
NOTHING_STARTS = 0.3


def listening(port: int) -> bool:
    """Bound by a listening socket, asked without connecting (a connection would start it).
    SO_REUSEADDR as a server binds: a connection the endpoint closed leaves the port in
    TIME_WAIT, which a bare bind() takes for a listener (seen once under make test)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def pid_of(azurite: Azurite) -> int | None:
    return None if azurite.process is None else azurite.process.pid


def test_a_lazy_azurite_starts_at_its_first_connection_and_answers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv(ENV_VAR, str(starts))
    azurite = start_azurite(tmp_path / "data", tmp_path / "azurite.log", lazy=True)
    try:
        assert [listening(port) for port in azurite.ports] == [True, True, True]
        time.sleep(NOTHING_STARTS)  # a non-event: nothing starts it but a connection
        assert pid_of(azurite) is None and read_starts(starts) == []
        connection = azurite.connection_string
        with BlobServiceClient.from_connection_string(connection) as blobs:
            blobs.create_container("first").upload_blob("a", b"kept")
            assert blobs.get_container_client("first").download_blob("a").readall() == b"kept"
        with QueueServiceClient.from_connection_string(connection) as queues:
            queues.create_queue("first").send_message("m")
        pid = pid_of(azurite)
        assert pid is not None and azurite.started().poll() is None
        assert [(s.kind, s.pid) for s in read_starts(starts)] == [("azurite", pid)]
    finally:
        azurite.stop()
    assert [port_in_use(port) for port in azurite.ports] == [False, False, False]


def test_a_lazy_azurite_nothing_connected_to_stops_without_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv(ENV_VAR, str(starts))
    azurite = start_azurite(tmp_path / "data", tmp_path / "azurite.log", lazy=True)
    azurite.stop()
    assert pid_of(azurite) is None and read_starts(starts) == []
    assert [port_in_use(port) for port in azurite.ports] == [False, False, False]
    # started again on its ports (a stack's restart of the part), it serves them
    again = start_azurite(tmp_path / "data", tmp_path / "azurite.log", azurite.ports, lazy=True)
    try:
        assert again.started().poll() is None
        assert [port_in_use(port) for port in again.ports] == [True, True, True]
    finally:
        again.stop()


def test_a_lazy_service_bus_endpoint_starts_at_its_first_connection_and_answers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its config is read when it is asked for (a mistake refused then, its warnings logged),
    its port listens, and the first client's send and receive are answered by the endpoint
    started for it, counted once."""
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv(ENV_VAR, str(starts))
    bad = tmp_path / "bad.json"
    bad.write_text('{"UserConfig": {"Namespaces": []}}')
    with pytest.raises(RuntimeError):
        start_servicebus(config=bad, lazy=True)
    endpoint = start_servicebus(config=CONFIG, log_path=tmp_path / "sb.log", lazy=True)
    try:
        assert (listening(endpoint.port), endpoint.stopped) == (True, False)
        time.sleep(NOTHING_STARTS)  # a non-event
        assert endpoint.process is None and read_starts(starts) == []
        with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
            with client.get_queue_sender(QUEUE) as sender:
                sender.send_messages(ServiceBusMessage("first", message_id="m-1"))
            with client.get_queue_receiver(QUEUE, max_wait_time=SHORT) as receiver:
                [got] = receiver.receive_messages(max_wait_time=SHORT)  # at its arrival
                receiver.complete_message(got)
        assert str(got) == "first"
        pid = endpoint.started().pid
        assert [(s.kind, s.pid) for s in read_starts(starts)] == [("servicebus", pid)]
    finally:
        endpoint.stop()
    assert endpoint.stopped and not listening(endpoint.port)


def test_a_lazy_endpoint_stopped_before_any_connection_says_it_is_stopped(tmp_path: Path) -> None:
    """Never started (no client came), then stopped: stopped, its port closed; before the stop,
    waiting for a first connection is not stopped."""
    endpoint = start_servicebus(config=CONFIG, log_path=tmp_path / "sb.log", lazy=True)
    try:
        assert (endpoint.process, endpoint.stopped) == (None, False)
    finally:
        endpoint.stop()
    assert (endpoint.process, endpoint.stopped, listening(endpoint.port)) == (None, True, False)


def test_a_lazy_cosmos_endpoint_starts_at_its_first_connection_and_answers_it_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its port listens and nothing runs; a first SDK client, verifying the certificate, is
    answered by the endpoint started for it, counted once; its log says where it is ready, as
    an endpoint started at once says it."""
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv(ENV_VAR, str(starts))
    endpoint = start_cosmos(log_path=tmp_path / "cosmos.log", lazy=True)
    try:
        assert (listening(endpoint.port), endpoint.stopped) == (True, False)
        time.sleep(NOTHING_STARTS)  # a non-event
        assert endpoint.process is None and read_starts(starts) == []
        with CosmosClient(endpoint.endpoint, endpoint.key, **endpoint.client_options()) as client:
            client.create_database("first")
            assert [d["id"] for d in client.list_databases()] == ["first"]
        pid = endpoint.started().pid
        assert [(s.kind, s.pid) for s in read_starts(starts)] == [("cosmos", pid)]
        log = (tmp_path / "cosmos.log").read_text()
        assert f"cosmos endpoint ready at {endpoint.endpoint} (pid {pid})" in log
    finally:
        endpoint.stop()
    assert endpoint.stopped and not listening(endpoint.port)


def test_a_lazy_cosmos_endpoint_stopped_before_any_connection_never_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv(ENV_VAR, str(starts))
    endpoint = start_cosmos(log_path=tmp_path / "cosmos.log", lazy=True)
    endpoint.stop()
    assert (endpoint.process, endpoint.stopped, listening(endpoint.port)) == (None, True, False)
    assert read_starts(starts) == []
