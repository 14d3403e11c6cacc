"""The Cosmos quarantine and event store held to the same contract as the fakes, through the
real SDK on the local endpoint (or the official emulator with COSMOS_ENDPOINT/COSMOS_KEY)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient

from cosmos_outbox.cosmos import CosmosEventStore, CosmosQuarantine
from cosmos_outbox.testing.contracts import StoreWorld as QuarantineWorld
from tests.contacts.contract.unit_of_work_contract import ContactsQuarantineContract
from tests.contacts.integration.test_cosmos_write_path import cosmos, fresh_container

pytestmark = pytest.mark.integration
__all__ = ["cosmos"]  # the fixture, used by name


class CosmosQuarantineWorld(QuarantineWorld):
    def __init__(self, container: ContainerProxy) -> None:
        self.container = container
        self.quarantine = CosmosQuarantine(container)
        self.events = CosmosEventStore(container)

    def plant(self, document: dict[str, Any]) -> None:
        self.container.create_item(document)


class TestCosmosQuarantine(ContactsQuarantineContract):
    @pytest.fixture
    def world(self, cosmos: CosmosClient) -> QuarantineWorld:
        return CosmosQuarantineWorld(fresh_container(cosmos, f"q{uuid.uuid4().hex[:12]}"))
