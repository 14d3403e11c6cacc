"""The Cosmos DB document store, sync and `aio`, through the SDK against the local endpoint, in
what the contract suites (test_azure_adapters.py) do not hold: event documents expire by their
TTL while the aggregate stays, one commit of several changes writes their events in order, and
a page's continuation token is that query's own when another request on the client lands
between the page's response and the reading of its token."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest
from azure_stack import DATABASE, cosmos_world
from deadlines import LONG, wait_for
from tickets import Ticket

from cosmos_outbox._mapper import EVENT_TYPE
from cosmos_outbox.cosmos import query_page
from cosmos_outbox_testing.contracts import EventLoop, events_of, saved

if TYPE_CHECKING:
    from funcstack import LocalStack

pytestmark = pytest.mark.integration
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_event_documents_expire_by_their_ttl_and_the_aggregate_stays(
    funcstack_services: LocalStack, loop: EventLoop, fresh: str, flavour: str
) -> None:
    world = cosmos_world(
        flavour,
        funcstack_services.container_client(DATABASE, fresh),
        funcstack_services,
        loop,
        ttl=1,
    )
    ticket = Ticket.open("Printer on fire")
    with world.uow() as uow:
        uow.repository(Ticket).add(ticket)
        uow.commit()
    stored = world.documents(ticket.id)
    assert sorted(d["type"] for d in stored) == sorted(["ticket", EVENT_TYPE])
    assert {d["type"]: d["ttl"] for d in stored} == {"ticket": -1, EVENT_TYPE: 1}
    wait_for(
        lambda: len(world.documents(ticket.id)) == 1,
        "the event document deleted by its TTL (1 s)",
        every=0.25,
    )
    assert [d["type"] for d in world.documents(ticket.id)] == ["ticket"]


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_one_commit_of_several_changes_writes_their_events_in_order(
    funcstack_services: LocalStack, loop: EventLoop, fresh: str, flavour: str
) -> None:
    world = cosmos_world(
        flavour, funcstack_services.container_client(DATABASE, fresh), funcstack_services, loop
    )
    ticket = saved(world, Ticket.open("Printer on fire"))
    with world.uow() as uow:
        loaded = uow.repository(Ticket).get(ticket.id)
        loaded.change(title="Printer still on fire", code="FIR")
        uow.commit(traceparent=TRACEPARENT)
    events = events_of(world, ticket.id)
    assert [e["action"] for e in events] == [
        "TicketOpenedEvent",
        "TicketRetitledEvent",
        "TicketRecodedEvent",
    ]
    assert [e["version"] for e in events] == [1, 2, 3]
    assert [e["traceparent"] for e in events[1:]] == [TRACEPARENT, TRACEPARENT]
    with world.uow() as uow:
        assert uow.repository(Ticket).get(ticket.id).version == 3


def test_a_pages_token_is_its_own_when_another_request_on_the_client_lands_in_between(
    funcstack_services: LocalStack, fresh: str
) -> None:
    """Concurrent invocations share one client. A request on another thread that finishes
    between a query's response and the reading of its token must not hand the client that
    request's headers (a point read's etag) as the next page's token."""
    container = funcstack_services.container_client(DATABASE, fresh)
    ids = [f"p{i}" for i in range(5)]
    for doc_id in ids:
        container.create_item({"id": doc_id, "partitionKey": doc_id, "type": "paged"})
    query = "SELECT c.id FROM c WHERE c.type = 'paged'"

    def another_request_lands(_headers: Any, _result: Any) -> None:
        container.read_item("p4", partition_key="p4")  # what another thread would do

    seen: list[str] = []
    token: str | None = None
    for _ in range(len(ids)):
        rows, token = query_page(container, query, 2, token, response_hook=another_request_lands)
        seen += [row["id"] for row in rows]
        if token is None:
            break
    assert sorted(seen) == ids
    assert token is None


def test_the_stores_queries_survive_threads_sharing_one_client(
    funcstack_services: LocalStack, fresh: str
) -> None:
    """azure-cosmos's sync client writes each request's throttle headers into the headers of
    whichever request on any thread ended last; a query copying its own meanwhile fails with
    `RuntimeError: OrderedDict mutated during iteration` (cosmos-changefeed's
    test_threads_on_one_client.py pins it). The store sends such a query again: with threads
    switching as often as CPython can, beside point reads, none of its queries fails."""
    from cosmos_outbox.cosmos import CosmosDocumentStore

    container = funcstack_services.container_client(DATABASE, fresh)
    for i in range(4):
        container.create_item({"id": f"t{i}", "partitionKey": f"t{i}", "type": "threaded"})
    store = CosmosDocumentStore(container)
    failures: list[str] = []

    def queries() -> None:
        for _ in range(100):
            try:
                assert len(store.of_type("threaded")) == 4
                assert store.find("threaded", "t1") is not None
                assert (
                    len(store.page_of_type("threaded", page_size=10, continuation=None).items) == 4
                )
            except RuntimeError as exc:
                failures.append(str(exc))

    def point_reads() -> None:
        for _ in range(300):
            container.read_item("t0", partition_key="t0")

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=w) for w in (queries, point_reads) * 3]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(LONG)
            assert not thread.is_alive(), f"{thread.name} not done within {LONG:g} s"
    finally:
        sys.setswitchinterval(before)
    assert failures == []
