"""Endpoints handed to another process (`funcstack.handoff`, what a test run's xdist controller
gives its workers): made again from their description, sent as JSON, they serve as the
originals do; their `stop()` leaves the original running, and they are stopped when it is."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import CosmosClient

from funcstack.cosmos import CosmosEndpoint, start_cosmos
from funcstack.handoff import (
    azurite_from,
    cosmos_from,
    describe,
    hand_over,
    handed,
    servicebus_from,
)
from funcstack.servicebus import ServiceBusEndpoint, start_servicebus
from funcstack.services import Azurite, start_azurite


def test_a_handed_cosmos_endpoint_serves_with_its_certificate_and_is_not_stopped_by_it(
    shared_cosmos: CosmosEndpoint,
) -> None:
    handed = cosmos_from(json.loads(json.dumps(describe(shared_cosmos))))
    assert handed.connection_string == shared_cosmos.connection_string
    assert handed.process is None
    with pytest.raises(RuntimeError, match="another process"):
        handed.started()
    name = f"handed-{uuid.uuid4().hex[:8]}"
    # the certificate verified with the files the description names
    with CosmosClient(handed.endpoint, handed.key, **handed.client_options()) as client:
        client.create_database(name)
    handed.stop()
    assert not shared_cosmos.stopped
    with CosmosClient(
        shared_cosmos.endpoint, shared_cosmos.key, **shared_cosmos.client_options()
    ) as client:
        client.delete_database(name)


def _from(kind: str, described: dict[str, Any]) -> CosmosEndpoint | ServiceBusEndpoint | Azurite:
    if kind == "cosmos":
        return cosmos_from(described)
    return servicebus_from(described) if kind == "servicebus" else azurite_from(described)


@pytest.mark.parametrize("kind", ["cosmos", "servicebus", "azurite"])
def test_a_handed_endpoint_is_stopped_when_the_original_is(kind: str, tmp_path: Path) -> None:
    # started at its first connection: it listens, and no process starts here
    original: CosmosEndpoint | ServiceBusEndpoint | Azurite
    if kind == "cosmos":
        original = start_cosmos(log_path=tmp_path / "cosmos.log", lazy=True)
    elif kind == "servicebus":
        original = start_servicebus(log_path=tmp_path / "servicebus.log", lazy=True)
    else:
        original = start_azurite(tmp_path / "data", tmp_path / "azurite.log", lazy=True)
    try:
        handed = _from(kind, json.loads(json.dumps(describe(original))))
        assert handed.connection_string == original.connection_string
        handed.stop()
        assert not handed.stopped
    finally:
        original.stop()
    assert handed.stopped


def test_a_handed_service_bus_endpoint_keeps_the_warnings_its_start_logged(tmp_path: Path) -> None:
    """What its config sets that the endpoint does not honour, said once by the process that
    started it: the process it is handed to reads it too (``ServiceBusEndpoint.warnings``)."""
    config = tmp_path / "config.json"
    queue = {"Name": "orders", "Properties": {"ForwardTo": "archive"}}
    namespace = {"Name": "sbemulatorns", "Queues": [queue], "Topics": []}
    config.write_text(json.dumps({"UserConfig": {"Namespaces": [namespace]}}))
    original = start_servicebus(config=config, log_path=tmp_path / "servicebus.log", lazy=True)
    try:
        [line] = original.warnings
        assert line.startswith("ForwardTo is not honoured")
        handed = servicebus_from(json.loads(json.dumps(describe(original))))
        assert handed.warnings == [line]
    finally:
        original.stop()


def test_endpoints_handed_over_in_a_workers_input_are_read_back_by_kind() -> None:
    """`hand_over` in the xdist controller, `handed` in the worker: each kind's data as
    `describe` gave it (through JSON, as xdist sends it); None outside a worker or for another
    key; a kind not handed named."""
    azurite = Azurite(ports=(10000, 10001, 10002), handed=True)
    workerinput: dict[str, Any] = {}
    hand_over(workerinput, "mine", {"azurite": azurite})
    sent = json.loads(json.dumps(workerinput))  # what the worker receives
    data = handed(sent, "mine", "azurite")
    assert data == describe(azurite)
    assert azurite_from(data).ports == azurite.ports
    assert handed(None, "mine", "azurite") is None  # not a worker
    assert handed(sent, "theirs", "azurite") is None  # nothing handed under that key
    with pytest.raises(KeyError, match="no 'cosmos' endpoint handed under 'mine'"):
        handed(sent, "mine", "cosmos")
