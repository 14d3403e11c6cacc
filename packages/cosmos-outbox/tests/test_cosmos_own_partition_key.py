"""The contract suites on a container partitioned by an app's own path (`/tenant/id`), not the
outbox's `/partitionKey`: the outbox's documents carry their partition there too, and every
write of the suites lands (on the code before, 22 of them fail with Cosmos DB's "PartitionKey
extracted from the document doesn't match the one specified in the header"). A module of its
own: its suites run beside test_azure_adapters.py's on another worker."""

from __future__ import annotations

import pytest

pytest.importorskip("funcstack", reason="the local Azure stack (funcstack) runs these tests: "
                                        "pip install funcstack")

from azure_stack import DATABASE, cosmos_world
from tickets import TICKET

from cosmos_outbox.testing.contracts import (
    EventLoop,
    QuarantineContract,
    SessionContract,
    StoreWorld,
    examples,
)
from funcstack import LocalStack

pytestmark = pytest.mark.integration


class OnTheAppsOwnKey:
    """The suites' world: a `/tenant/id` container through the sync client, then the aio one."""

    @pytest.fixture(params=["sync", "aio"])
    def world(self, request: pytest.FixtureRequest, fresh_on_apps_own_key: str,
              funcstack_services: LocalStack, loop: EventLoop) -> StoreWorld:
        return cosmos_world(request.param, funcstack_services.container_client(
            DATABASE, fresh_on_apps_own_key), funcstack_services, loop)


class TestCosmosSessionOnTheAppsOwnKey(OnTheAppsOwnKey, SessionContract):
    pass


class TestCosmosQuarantineOnTheAppsOwnKey(OnTheAppsOwnKey, QuarantineContract):
    example = examples(TICKET)
