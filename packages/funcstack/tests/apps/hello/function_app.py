"""A minimal Functions app for funcstack's own tests, and the shape of any app it runs.

``POST /api/greetings {"name": "..."}`` writes a greeting to Cosmos DB (the SDK) and sends it
to a Service Bus topic (the SDK); ``GET /api/greetings/{id}`` reads it back. Its resources are
declared in funcstack.json beside it; its settings are in local.settings.sample.json.
"""

from __future__ import annotations

import json
import os
import uuid
from functools import cache
from typing import Any

import azure.functions as func
from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.exceptions import CosmosResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@cache
def greetings() -> ContainerProxy:
    # as in Azure: the certificate is verified (funcstack's, through the trust store it gives
    # its hosts), nothing here knows the endpoint is local
    client = CosmosClient.from_connection_string(os.environ["CosmosConnection"])  # noqa: SIM112
    database = client.get_database_client(os.environ["GREETINGS_DATABASE"])
    return database.get_container_client(os.environ["GREETINGS_CONTAINER"])


@cache
def servicebus() -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(os.environ["ServiceBusConnection"])  # noqa: SIM112


def _json(status: int, body: Any) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(body), status_code=status, mimetype="application/json")


@app.route(route="greetings", methods=["POST"])
def create_greeting(req: func.HttpRequest) -> func.HttpResponse:
    try:
        name = str(req.get_json()["name"])
    except (ValueError, KeyError, TypeError):
        return _json(400, {"error": 'send {"name": "..."}'})
    greeting = {"id": str(uuid.uuid4()), "name": name, "text": f"Hello, {name}!"}
    greetings().create_item(greeting)
    with servicebus().get_topic_sender(os.environ["GREETINGS_TOPIC"]) as sender:
        sender.send_messages(
            ServiceBusMessage(
                json.dumps(greeting),
                message_id=greeting["id"],
                subject="GreetingCreated",
                content_type="application/json",
            )
        )
    return _json(201, greeting)


@app.route(route="greetings/{id}", methods=["GET"])
def read_greeting(req: func.HttpRequest) -> func.HttpResponse:
    greeting_id = req.route_params["id"]
    try:
        item = greetings().read_item(greeting_id, partition_key=greeting_id)
    except CosmosResourceNotFoundError:
        return _json(404, {"error": "no such greeting"})
    return _json(200, {k: v for k, v in item.items() if not k.startswith("_")})
