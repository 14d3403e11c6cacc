"""Azurite started at its first connection (``start_azurite(lazy=True)``, what a stack does):
its three ports listen at once and nothing runs; a first call through the SDK is answered (the
connection that woke it waits for it, it is never refused) by the one Azurite then started,
and counted once; queue and table answer too; a stop leaves nothing listening, whether it
started or not."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from funcstack.services import Azurite, port_in_use, start_azurite
from funcstack.starts import ENV_VAR, read_starts

pytestmark = pytest.mark.integration


def listening(port: int) -> bool:
    """Bound by a listening socket, asked without connecting (a connection would start it)."""
    with socket.socket() as probe:
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
        time.sleep(0.3)  # nothing starts it but a connection
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
