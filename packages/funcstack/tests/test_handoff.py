"""Endpoints handed to another process (`funcstack.handoff`, what a test run's xdist controller
gives its workers): made again from their description, sent as JSON, they serve as the
originals do; their `stop()` leaves the original running, and they are stopped when it is."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from azure.cosmos import CosmosClient

from funcstack.cosmos import CosmosEndpoint
from funcstack.handoff import azurite_from, cosmos_from, describe, servicebus_from
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


@pytest.mark.parametrize("kind", ["servicebus", "azurite"])
def test_a_handed_endpoint_is_stopped_when_the_original_is(kind: str, tmp_path: Path) -> None:
    # started at its first connection: it listens, and no process starts here
    original: ServiceBusEndpoint | Azurite = (
        start_servicebus(log_path=tmp_path / "servicebus.log", lazy=True)
        if kind == "servicebus"
        else start_azurite(tmp_path / "data", tmp_path / "azurite.log", lazy=True)
    )
    try:
        described = json.loads(json.dumps(describe(original)))
        handed = servicebus_from(described) if kind == "servicebus" else azurite_from(described)
        assert handed.connection_string == original.connection_string
        handed.stop()
        assert not handed.stopped
    finally:
        original.stop()
    assert handed.stopped
