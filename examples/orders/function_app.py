"""The Orders app (Azure Functions, Python v2 programming model): its routes, and cosmos-outbox's
relay, backlog timer, health and OpenAPI document, on cosmos-outbox alone (the operators' routes
and console are one more part, `cosmos_outbox_operators.Operators()`, from
cosmos-outbox-operators: README, "Operating it"). No I/O at import: the
outbox builds its services (Cosmos DB, Service Bus, Blob Storage, from the app settings) on
first use; the tests run it on in-memory ones (`cosmos_outbox_testing.in_memory(outbox)`)."""

from __future__ import annotations

from cosmos_outbox import Outbox
from orders.api import order_routes
from orders.domain import Order

outbox = Outbox([Order])
app = outbox.function_app(
    order_routes(outbox),
    operators=False,  # cosmos-outbox 0.5 only: the operators' routes are not this app's
    title="Orders API",
    description="Orders saved with their events in one Cosmos DB transactional batch; events "
    "relayed to Service Bus.",
)
