"""The Contacts app with 30,000 event documents kept in its container (issue 56: after a chaos
run of 150 s, 30,316 events still within their time to live made the contact list and the
operators' status answer 503, their queries walking every document): GET
/api/contacts?pageSize=100 and GET /api/outbox/status answer 200 within the bound of a bounded
wait (`cosmos_outbox.http.bounded.BOUND_SECONDS`), their queries served from the container's
indexes (deploy/indexing-policy.json: /type and /data/deleted).

The events are written straight through the SDK's transactional batches, 100 to a partition as
an aggregate's would be; the relay is off in this stack (its function disabled by the app
setting `AzureWebJobs.relay_events.Disabled`, as in Azure), so they stay where they are: the
status reports them as the relay's backlog. A stack of its own, started once for the module,
with its database on the run's Cosmos DB endpoint (no test here stops or faults it; the status
reads its own containers, whose LSNs funcstack keeps per physical partition of each container;
its database dropped when the stack stops) and no Service Bus."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

from cosmos_outbox.documents import EVENT_TYPE
from cosmos_outbox.http.bounded import BOUND_SECONDS
from tools.httpclient import Client
from tools.stack import Ports, Stack

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = [
    pytest.mark.integration,
    pytest.mark.local_stack("30,000 events written into a stack of its own whose relay is off"),
]

EVENTS = 30_000
CONTACTS = 12
PAYLOAD = "The contact's address changed; the event carries the whole new address. " * 9


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: CosmosEndpoint
) -> Iterator[Stack]:
    with Stack(
        workdir=Path(tmp_path_factory.mktemp("at-scale")),
        ports=Ports.free(),
        shared_cosmos=shared_cosmos,
        with_servicebus=False,
        settings_overrides={"AzureWebJobs.relay_events.Disabled": "true"},
    ) as s:
        yield s


@pytest.fixture(scope="module")
def client(stack: Stack) -> Iterator[Client]:
    c = Client(stack.api_url, timeout=BOUND_SECONDS + 30)
    try:
        yield c
    finally:
        c.close()


def event(aggregate: int, version: int) -> dict[str, Any]:
    """An event document of about 1 KB, as the outbox stores one (still within its TTL)."""
    return {
        "id": f"event-{aggregate}-{version}",
        "partitionKey": f"aggregate-{aggregate}",
        "type": EVENT_TYPE,
        "aggregateType": "Contact",
        "action": "AddressChanged",
        "version": version,
        "data": {"text": PAYLOAD[:640]},
        "createdAt": "2026-01-01T00:00:00+00:00",
        "ttl": 864000,
    }


@pytest.fixture(scope="module")
def kept(stack: Stack, client: Client) -> Stack:
    for i in range(CONTACTS):
        created = client.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": "Ada",
                "lastName": f"Scale {i}",
                "email": f"scale{i}@example.com",
                "companyName": "Engines",
            },
        )
        assert created.status == 201, created.body
    container = stack.contacts_container()

    def write(aggregate: int) -> None:
        container.execute_item_batch(
            [("create", (event(aggregate, v),)) for v in range(1, 101)],
            partition_key=f"aggregate-{aggregate}",
        )

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(EVENTS // 100)))
    return stack


def within_the_bound(client: Client, path: str) -> Any:
    started = time.monotonic()
    reply = client.request("GET", path)
    seconds = time.monotonic() - started
    assert reply.status == 200, (path, reply.status, reply.body)
    assert seconds < BOUND_SECONDS, (path, seconds)
    return reply.json()


def test_the_contact_list_answers_within_the_bound(kept: Stack, client: Client) -> None:
    page = within_the_bound(client, "/contacts?pageSize=100")
    assert len(page["items"]) == CONTACTS
    if page["continuationToken"] is not None:
        # the query's time budget ran out after the last contact (a loaded machine; Azure's
        # pages end so too): the next page, within the bound as well, is empty and the last
        token = page["continuationToken"]
        rest = within_the_bound(client, f"/contacts?pageSize=100&continuationToken={quote(token)}")
        assert (rest["items"], rest["continuationToken"]) == ([], None)


def test_the_operators_status_answers_within_the_bound(kept: Stack, client: Client) -> None:
    status = within_the_bound(client, "/outbox/status")
    assert status["quarantined"] == 0
    # the relay is off: every transaction is its backlog (the estimator counts LSNs: each batch
    # of 100 events is one, each contact's creation one)
    assert status["pending"] == EVENTS // 100 + CONTACTS
