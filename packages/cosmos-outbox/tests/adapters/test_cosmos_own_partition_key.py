"""The contract suites on a container partitioned by an app's own path (`/tenant/id`), not the
outbox's `/partitionKey`: the outbox's documents carry their partition there too, and every
write of the suites lands (on the code before, 22 of them fail with Cosmos DB's "PartitionKey
extracted from the document doesn't match the one specified in the header"). A module of its
own: its suites run beside test_azure_adapters.py's on another worker."""

from __future__ import annotations

import pytest
from azure_stack import OnCosmos
from tickets import TICKET

from cosmos_outbox_testing.contracts import QuarantineContract, TransactionContract, examples

pytestmark = pytest.mark.integration


@pytest.fixture
def fresh(fresh_on_apps_own_key: str) -> str:
    """The suites' container in this module: one on an app's own path."""
    return fresh_on_apps_own_key


class TestCosmosTransactionOnTheAppsOwnKey(OnCosmos, TransactionContract):
    pass


class TestCosmosQuarantineOnTheAppsOwnKey(OnCosmos, QuarantineContract):
    example = examples(TICKET)
