"""The app of `bench/peers.py` (copied into a folder of its own as its `function_app.py`): the
three ways a team writes a change and tells the others of it, as a team would write each, in
one app, so one host and one worker serve them all:

- `POST /plain`: the document alone, `create_item` on the `aio` SDK (nobody is told);
- `POST /dual`: the dual write: the document, then a message sent in the request with the `aio`
  Service Bus sender (one sender per worker, guarded by a lock: one `aio` sender used by
  concurrent requests hangs, azure-sdk-for-python #36334);
- `POST /outbox`: the outbox's transactional session: the same document and its event, one
  transactional batch (relayed later by the change feed, outside the request).

And three rows that tell where the outbox's time goes, on a client with the options the
outbox's own has (its transport does not look up proxy settings in the environment on every
request, as the SDK's default aiohttp transport does when none are set):

- `POST /tuned`: the plain write on that client (what the client's options are worth);
- `POST /batch1`: the document alone, as a transactional batch of one operation (what the
  endpoint's batch costs beside a create);
- `POST /batch3`: the three documents the session writes (the document, an event document, the
  session's sequence document), as one transactional batch written by hand (what the extra
  documents cost; the outbox beside it is what the library costs).

Each request writes a new document on a partition of its own (a new customer, as a create is).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import UTC, datetime
from typing import Any

import azure.functions as func
from azure.core.pipeline.transport import AioHttpTransport
from azure.cosmos.aio import ContainerProxy, CosmosClient
from azure.servicebus import ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient, ServiceBusSender

from cosmos_outbox.aio import Outbox

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
outbox = Outbox()


class _Clients:
    """The team's own `aio` clients, made on first use in the worker's event loop."""

    container: ContainerProxy | None = None
    tuned: ContainerProxy | None = None
    sender: ServiceBusSender | None = None
    lock: asyncio.Lock | None = None


def _container() -> ContainerProxy:
    if _Clients.container is None:
        client = CosmosClient.from_connection_string(os.environ["CosmosDBConnection"])  # noqa: SIM112
        _Clients.container = client.get_database_client(
            os.environ["COSMOS_DATABASE"]
        ).get_container_client(os.environ["COSMOS_CONTAINER"])
    return _Clients.container


def _tuned() -> ContainerProxy:
    """The same container on a client with the outbox's transport options."""
    if _Clients.tuned is None:
        client = CosmosClient.from_connection_string(
            os.environ["CosmosDBConnection"],  # noqa: SIM112
            transport=AioHttpTransport(use_env_settings=False),
        )
        _Clients.tuned = client.get_database_client(
            os.environ["COSMOS_DATABASE"]
        ).get_container_client(os.environ["COSMOS_CONTAINER"])
    return _Clients.tuned


def _sender() -> tuple[ServiceBusSender, asyncio.Lock]:
    if _Clients.sender is None or _Clients.lock is None:
        client = ServiceBusClient.from_connection_string(os.environ["ServiceBusConnection"])  # noqa: SIM112
        _Clients.sender = client.get_topic_sender(os.environ["SERVICEBUS_TOPIC"])
        _Clients.lock = asyncio.Lock()
    return _Clients.sender, _Clients.lock


def _booking(customer: str) -> dict[str, Any]:
    return {
        "id": f"booking-{uuid.uuid4()}",
        "partitionKey": customer,
        "type": "booking",
        "seats": 2,
        "show": "Hamlet",
        "customer": customer,
    }


def _created(document: dict[str, Any]) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps({"id": document["id"]}), status_code=201, mimetype="application/json"
    )


@app.route(route="plain", methods=["POST"])
async def plain(req: func.HttpRequest) -> func.HttpResponse:
    booking = _booking(str(uuid.uuid4()))
    await _container().create_item(booking)
    return _created(booking)


@app.route(route="dual", methods=["POST"])
async def dual(req: func.HttpRequest) -> func.HttpResponse:
    customer = str(uuid.uuid4())
    booking = _booking(customer)
    await _container().create_item(booking)
    sender, lock = _sender()
    message = ServiceBusMessage(
        json.dumps({"bookingId": booking["id"], "seats": 2}),
        message_id=str(uuid.uuid4()),
        session_id=customer,
        subject="SeatsBooked",
        content_type="application/json",
    )
    async with lock:
        await sender.send_messages(message)
    return _created(booking)


@app.route(route="outbox", methods=["POST"])
async def with_outbox(req: func.HttpRequest) -> func.HttpResponse:
    customer = str(uuid.uuid4())
    booking = _booking(customer)
    async with outbox.transaction(customer, entity="customer") as tx:
        tx.create(booking)
        tx.publish("SeatsBooked", {"bookingId": booking["id"], "seats": 2})
        await tx.commit()
    return _created(booking)


@app.route(route="tuned", methods=["POST"])
async def tuned(req: func.HttpRequest) -> func.HttpResponse:
    booking = _booking(str(uuid.uuid4()))
    await _tuned().create_item(booking)
    return _created(booking)


@app.route(route="batch1", methods=["POST"])
async def batch1(req: func.HttpRequest) -> func.HttpResponse:
    customer = str(uuid.uuid4())
    booking = _booking(customer)
    await _tuned().execute_item_batch(
        batch_operations=[("create", (booking,))], partition_key=customer
    )
    return _created(booking)


@app.route(route="batch3", methods=["POST"])
async def batch3(req: func.HttpRequest) -> func.HttpResponse:
    customer = str(uuid.uuid4())
    booking = _booking(customer)
    event_id = str(uuid.uuid4())
    event = {
        "id": event_id,
        "partitionKey": customer,
        "type": "domainEvent",
        "aggregateType": "customer",
        "source": "/customers",
        "data": {
            "id": event_id,
            "customerId": customer,
            "version": 1,
            "createdAt": datetime.now(UTC).isoformat(),
            "action": "SeatsBooked",
            "bookingId": booking["id"],
            "seats": 2,
        },
        "ttl": 864000,
    }
    sequence = {
        "id": f"outbox-sequence-customer-{customer}",
        "partitionKey": customer,
        "type": "outboxSequence",
        "entity": "customer",
        "sessionId": customer,
        "next": 2,
        "ttl": -1,
    }
    await _tuned().execute_item_batch(
        batch_operations=[("create", (booking,)), ("create", (event,)), ("create", (sequence,))],
        partition_key=customer,
    )
    return _created(booking)
