"""The quarantine and the stored events a re-drive reads, on the Cosmos DB document store, held
to the same contract as on the in-memory store, through the real SDK on the local endpoint (or
the official emulator with COSMOS_ENDPOINT/COSMOS_KEY)."""

from __future__ import annotations

import uuid

import pytest
from azure.cosmos import CosmosClient

from cosmos_outbox.testing.contracts import StoreWorld
from tests.contacts.contract.unit_of_work_contract import ContactsQuarantineContract
from tests.contacts.integration.test_cosmos_write_path import (
    CosmosWorld,
    account,
    cosmos,
    fresh_container,
)

pytestmark = pytest.mark.integration
__all__ = ["account", "cosmos"]  # the fixtures, used by name


class TestCosmosQuarantine(ContactsQuarantineContract):
    @pytest.fixture
    def world(self, cosmos: CosmosClient) -> StoreWorld:
        return CosmosWorld(fresh_container(cosmos, f"q{uuid.uuid4().hex[:12]}"))
