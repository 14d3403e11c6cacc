"""A queue-triggered function on the outbox's transaction, as an app writes one (the
README's "From queue, Service Bus and timer triggers"), sync (`cosmos_outbox.Outbox`) and async
(`cosmos_outbox.aio.Outbox`), called in-process with the test kit's `queue_message` through
`FunctionClient.invoke`: the message's document and its event are committed together; a commit
that fails, or a command that is not valid, raises out of the function (the host retries the
message, then moves it to `<queue>-poison`) and writes nothing. testing/test_queue_trigger_hosted.py
holds the same to the real host, queue and topic."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import azure.functions as func
import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cosmos_outbox import Outbox
from cosmos_outbox.aio import Outbox as AsyncOutbox
from cosmos_outbox.errors import AlreadyExistsError
from cosmos_outbox_testing import FunctionClient, InMemory, in_memory, queue_message


class ImportBooking(BaseModel):
    """The command a queue message carries."""

    model_config = ConfigDict(populate_by_name=True)

    customer_id: str = Field(alias="customerId", min_length=1)
    booking_id: str = Field(alias="bookingId", min_length=1)
    seats: int = Field(gt=0, le=10)


def booking(command: ImportBooking, msg: func.QueueMessage) -> dict[str, Any]:
    return {
        "id": command.booking_id,
        "partitionKey": command.customer_id,
        "type": "booking",
        "seats": command.seats,
        "messageId": msg.id,
        "dequeueCount": msg.dequeue_count,
    }


sync_outbox = Outbox()
sync_app = func.FunctionApp()


@sync_app.queue_trigger(
    arg_name="msg", queue_name="bookings-imported", connection="AzureWebJobsStorage"
)
def import_booking(msg: func.QueueMessage) -> None:
    command = ImportBooking.model_validate_json(msg.get_body())
    with sync_outbox.transaction(command.customer_id, entity="customer") as tx:
        tx.create(booking(command, msg))
        tx.publish("BookingImported", {"bookingId": command.booking_id, "seats": command.seats})
        tx.commit()  # raises: the host retries the message, then poisons it


async_outbox = AsyncOutbox()
async_app = func.FunctionApp()


@async_app.queue_trigger(
    arg_name="msg", queue_name="bookings-imported", connection="AzureWebJobsStorage"
)
async def import_booking_async(msg: func.QueueMessage) -> None:
    command = ImportBooking.model_validate_json(msg.get_body())
    async with async_outbox.transaction(command.customer_id, entity="customer") as tx:
        tx.create(booking(command, msg))
        tx.publish("BookingImported", {"bookingId": command.booking_id, "seats": command.seats})
        await tx.commit()


class World:
    def __init__(self, memory: InMemory, client: FunctionClient, function: str) -> None:
        self.memory, self.client, self.function = memory, client, function

    def handle(self, message: func.QueueMessage) -> Any:
        return self.client.invoke(self.function, message)


@pytest.fixture(params=["sync", "aio"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    outbox, app, function = (
        (sync_outbox, sync_app, "import_booking")
        if request.param == "sync"
        else (async_outbox, async_app, "import_booking_async")
    )
    with in_memory(outbox) as memory, FunctionClient(app) as client:
        yield World(memory, client, function)


COMMAND = {"customerId": "c-1", "bookingId": "b-1", "seats": 2}


def test_a_queue_message_commits_its_document_and_its_event_together(world: World) -> None:
    world.handle(queue_message(COMMAND, id="m-1", dequeue_count=2))

    document = world.memory.store.read("c-1", "b-1")
    assert document is not None
    assert (document["seats"], document["messageId"], document["dequeueCount"]) == (2, "m-1", 2)
    [event] = world.memory.of_type("domainEvent")
    assert event["partitionKey"] == "c-1"
    assert (event["action"], event["version"]) == ("BookingImported", 1)
    assert (event["aggregateType"], event["aggregateId"]) == ("customer", "c-1")
    assert json.loads(event["body"]) == {"bookingId": "b-1", "seats": 2}


def test_a_failing_commit_raises_out_of_the_function_and_writes_nothing(world: World) -> None:
    taken = {"id": "b-1", "partitionKey": "c-1", "type": "booking", "seats": 9}
    world.memory.store.put(taken)

    for attempt in (1, 2):  # each delivery fails the same way, until the host poisons it
        with pytest.raises(AlreadyExistsError):
            world.handle(queue_message(COMMAND, dequeue_count=attempt))

    [kept] = world.memory.store.in_partition("c-1")  # no event, no sequence, nothing else
    assert {k: kept[k] for k in taken} == taken
    assert world.memory.of_type("domainEvent") == []


def test_a_command_that_is_not_valid_raises_and_writes_nothing(world: World) -> None:
    with pytest.raises(ValidationError):
        world.handle(queue_message({**COMMAND, "seats": 0}))
    with pytest.raises(ValidationError):
        world.handle(queue_message(b"not json"))
    assert world.memory.store.in_partition("c-1") == []
