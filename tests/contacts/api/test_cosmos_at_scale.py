"""The Contacts app with 30,000 event documents kept in its container (issue 56: after a chaos
run of 150 s, 30,316 events still within their time to live made the contact list and the
operators' status answer 503, their queries walking every document): GET
/api/contacts?pageSize=100 and GET /api/outbox/status answer 200, and their queries are served
from the container's indexes (deploy/indexing-policy.json: /type, /data/deleted...): asked with
the SDK's query metrics, each reads the documents it selects, not the 30,000 (what the service
and funcstack report, never how long it took: the stack's bound is a generous one, and the
seconds each answer took are printed).

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

from cosmos_outbox.documents import EVENT_TYPE, QUARANTINE_TYPE
from funcstack.deadlines import SHORT
from infra.cosmos.contacts import LIST_CONTACTS_QUERY
from tests.conftest import GENEROUS_BOUND
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
#: The status's count of quarantined events, as cosmos-outbox's quarantine asks it (a private
#: query of the library's, written out here: tests import its public names only).
UNRESOLVED = (
    "SELECT VALUE COUNT(1) FROM c WHERE c.type = @type "
    "AND (NOT IS_DEFINED(c.status) OR NOT (c.status IN ('resolved', 'discarded')))"
)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: CosmosEndpoint
) -> Iterator[Stack]:
    with Stack(
        workdir=Path(tmp_path_factory.mktemp("at-scale")),
        ports=Ports.free(),
        shared_cosmos=shared_cosmos,
        with_servicebus=False,
        # not a test of the bound: that the queries read what they select is (their metrics).
        # The backlog timer off too: its first tick writes the backlog's history and the relay's
        # state (not ready: no Service Bus) in the container, two changes the status would count
        # as pending beside the events, or not, as the tick ends before or after its call
        settings_overrides={
            "AzureWebJobs.relay_events.Disabled": "true",
            "AzureWebJobs.outbox_backlog.Disabled": "true",
            **GENEROUS_BOUND,
        },
    ) as s:
        yield s


@pytest.fixture(scope="module")
def client(stack: Stack) -> Iterator[Client]:
    c = Client(stack.api_url, timeout=SHORT)
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


def answered(client: Client, path: str) -> Any:
    """GET `path`'s 200 answer (the seconds it took printed, never asserted)."""
    started = time.monotonic()
    reply = client.request("GET", path)
    print(f"GET {path}: {reply.status} in {time.monotonic() - started:.2f} s")
    assert reply.status == 200, (path, reply.status, reply.body)
    return reply.json()


def documents_read(stack: Stack, query: str, **options: Any) -> int:
    """The documents `query` reads in the stack's contacts container, as its query metrics say
    (x-ms-documentdb-query-metrics, summed over the query's pages and partitions)."""
    read = 0

    def hook(headers: Any, _: Any) -> None:
        nonlocal read
        metrics = dict(
            pair.split("=", 1) for pair in headers["x-ms-documentdb-query-metrics"].split(";")
        )
        read += int(metrics["retrievedDocumentCount"])

    list(
        stack.contacts_container().query_items(
            query,
            enable_cross_partition_query=True,
            populate_query_metrics=True,
            response_hook=hook,
            **options,
        )
    )
    return read


def test_the_contact_list_answers_from_the_index(kept: Stack, client: Client) -> None:
    page = answered(client, "/contacts?pageSize=100")
    assert len(page["items"]) == CONTACTS
    if page["continuationToken"] is not None:
        # the query's time budget ran out after the last contact (a loaded machine; Azure's
        # pages end so too): the next page is empty and the last
        token = page["continuationToken"]
        rest = answered(client, f"/contacts?pageSize=100&continuationToken={quote(token)}")
        assert (rest["items"], rest["continuationToken"]) == ([], None)
    # the app's query reads its contacts, not the events beside them
    assert documents_read(kept, LIST_CONTACTS_QUERY) == CONTACTS


def test_the_operators_status_answers_from_the_index(kept: Stack, client: Client) -> None:
    status = answered(client, "/outbox/status")
    assert status["quarantined"] == 0
    # its count of quarantined events, the query the quarantine asks, reads none of the events
    count = [{"name": "@type", "value": QUARANTINE_TYPE}]
    assert documents_read(kept, UNRESOLVED, parameters=count) == 0
    # the relay is off: every transaction is its backlog (the estimator counts LSNs: each batch
    # of 100 events is one, each contact's creation one)
    assert status["pending"] == EVENTS // 100 + CONTACTS
