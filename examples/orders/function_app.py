"""The Orders app (Azure Functions, Python v2 programming model): its routes, and cosmos-outbox's
relay, backlog timer, operators' routes, health and OpenAPI document. No I/O at import."""

from __future__ import annotations

from collections.abc import Callable

import azure.functions as func

from cosmos_outbox._outbox import Outbox, Services, cosmos_services
from orders.api import orders_blueprint
from orders.domain import Order


def create_app(services: Callable[[], Services] = cosmos_services) -> func.FunctionApp:
    """The app on `services` (Cosmos DB and Service Bus from the app settings by default)."""
    outbox = Outbox([Order], services=services)
    return outbox.function_app(
        orders_blueprint(outbox), title="Orders API",
        description="Orders saved with their events in one Cosmos DB transactional batch; "
                    "events relayed to Service Bus.")


app = create_app()
