"""The consuming side (`cosmos_outbox.subscriber`): the tickets app's events, relayed as the
relay sends them, handled by a `Dispatcher` and a `Projector` on the test kit's in-memory store,
through the sync API and the `aio` one: each event applied exactly once, with its inbox record
in the projection's batch; in version order, a later version held until the missing one
arrives; an action the projection does not handle taken as a version step; a message of
another aggregate type left alone; a message that is no event refused. (An app's projector on
Cosmos DB, with its races and runs of held events: the subscriber app's tests in the repository
this package comes from, tests/subscriber/test_projector_on_cosmos.py.)"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import azure.functions as func
import pytest
from conftest import TicketWorld, body

from cosmos_outbox.ports import OutboxMessage
from cosmos_outbox.servicebus import to_servicebus_message
from cosmos_outbox.subscriber import (
    INBOX_TYPE,
    Dispatcher,
    IncomingEvent,
    Outcome,
    Projection,
    Projector,
    Result,
    UnreadableEventError,
    aio,
)
from cosmos_outbox_testing import (
    InMemoryPayloadStore,
    InMemoryStore,
    run_sync,
    service_bus_message,
)

INBOX_TTL = 3600


class Titles(Projection):
    """A ticket's title and how often it changed; closing it is not this projection's."""

    def handles(self, action: str) -> bool:
        return action in ("TicketOpenedEvent", "TicketRetitledEvent")

    def apply(self, projection: Mapping[str, Any] | None, event: IncomingEvent) -> dict[str, Any]:
        if projection is not None and not self.handles(event.type):
            return {**projection, "version": event.version}  # a version step
        changes = 0 if projection is None else int(projection["changes"]) + 1
        return {
            "id": event.aggregate_id,  # the projector reads a projection by its aggregate id
            "partitionKey": event.aggregate_id,
            "type": "titles",
            "title": event.data["title"],
            "changes": changes,
            "version": event.version,
        }


def delivered(
    message: OutboxMessage, *, delivery: int = 1, **changed: Any
) -> func.ServiceBusMessage:
    """`message` as the trigger hands it over (sent through the Service Bus adapter's mapping;
    `changed`: application properties of another value)."""
    sent = to_servicebus_message(message)
    properties = {str(k): v for k, v in (sent.application_properties or {}).items()}
    return service_bus_message(
        b"".join(sent.body) if message.body else b"",
        message_id=message.message_id,
        session_id=message.session_id,
        content_type=sent.content_type,
        application_properties=properties | changed,
        delivery_count=delivery,
    )


Handle = Callable[[func.ServiceBusMessage], Result | None]


@pytest.fixture(params=["sync", "aio"])
def subscriber(request: pytest.FixtureRequest) -> tuple[InMemoryStore, Handle]:
    """A store of the projection and the handler of a message, on either API."""
    store = InMemoryStore()
    if request.param == "sync":
        projector = Projector(store, Titles(), inbox_ttl_seconds=INBOX_TTL)
        dispatcher = Dispatcher("ticket", lambda: projector, payloads=InMemoryPayloadStore)
        return store, dispatcher.handle
    async_projector = aio.Projector(store, Titles(), inbox_ttl_seconds=INBOX_TTL)
    async_dispatcher = aio.Dispatcher(
        "ticket", lambda: async_projector, payloads=InMemoryPayloadStore
    )
    return store, lambda message: run_sync(async_dispatcher.handle(message))


def history(world: TicketWorld, retitles: int = 2, *, close: bool = False) -> list[OutboxMessage]:
    """A ticket opened, retitled and maybe closed through the API, relayed: its messages."""
    reply = world.client.request("POST", "tickets", body={"title": "T0"})
    tid = body(reply)["id"]
    for n in range(1, retitles + 1):
        world.client.request("PATCH", f"tickets/{tid}", body={"title": f"T{n}"})
    if close:
        etag = world.client.request("GET", f"tickets/{tid}").headers["ETag"]
        world.client.request("POST", f"tickets/{tid}/close", headers={"If-Match": etag})
    world.relay(list(world.memory.store.documents.values()))
    return [m for m in world.memory.publisher.messages if m.session_id == tid]


def titles(store: InMemoryStore) -> dict[str, Any]:
    [projection] = store.of_type("titles")
    return {k: projection[k] for k in ("title", "changes", "version")}


def test_each_event_is_applied_once_with_its_inbox_record_in_the_same_batch(
    world: TicketWorld, subscriber: tuple[InMemoryStore, Handle]
) -> None:
    store, handle = subscriber
    messages = history(world)
    for message in messages:
        batches = store.batches
        result = handle(delivered(message))
        assert result is not None and result.outcome is Outcome.APPLIED
        assert store.batches == batches + 1  # the projection and its inbox record: one batch
    again = handle(delivered(messages[1], delivery=2))  # redelivered
    assert again is not None and again.outcome is Outcome.DUPLICATE
    assert titles(store) == {"title": "T2", "changes": 2, "version": 3}
    assert len(store.of_type(INBOX_TYPE)) == 3


def test_a_later_version_is_held_until_the_missing_one_arrives_then_both_apply_in_order(
    world: TicketWorld, subscriber: tuple[InMemoryStore, Handle]
) -> None:
    store, handle = subscriber
    first, second, third = history(world)
    handle(delivered(first))
    held = handle(delivered(third))
    assert held is not None and held.outcome is Outcome.HELD
    assert titles(store)["version"] == 1
    released = handle(delivered(second))
    assert released is not None and released.applied == [2, 3]
    assert titles(store) == {"title": "T2", "changes": 2, "version": 3}


def test_an_action_the_projection_does_not_handle_is_a_version_step(
    world: TicketWorld, subscriber: tuple[InMemoryStore, Handle]
) -> None:
    store, handle = subscriber
    *changes, closed = history(world, retitles=1, close=True)
    for message in changes:
        handle(delivered(message))
    result = handle(delivered(closed))
    assert result is not None and result.outcome is Outcome.IGNORED
    assert titles(store)["version"] == 3  # no title change, but the version moved on


def test_another_aggregate_types_message_is_left_alone_and_a_non_event_refused(
    world: TicketWorld, subscriber: tuple[InMemoryStore, Handle]
) -> None:
    store, handle = subscriber
    [opened] = history(world, retitles=0)
    order = delivered(opened, aggregateType="order", orderId=opened.session_id)
    assert handle(order) is None
    with pytest.raises(UnreadableEventError):
        handle(service_bus_message(b"not json", message_id="x", session_id="x"))
    assert store.documents == {}
