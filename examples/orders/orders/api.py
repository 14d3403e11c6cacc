"""The Orders API: three routes on cosmos-outbox's route helper.

- `POST /api/orders` `{customerName, totalCents}`: 201, `Location`, `ETag`, the order;
- `GET /api/orders/{id}`: 200 and `ETag` (304 with a matching `If-None-Match`);
- `POST /api/orders/{id}/cancel`: 200 and `ETag`; 409 when already cancelled; `If-Match`
  (or `ETag`) honoured: 412 when the order changed since it was read.
"""

from __future__ import annotations

import azure.functions as func

from cosmos_outbox._outbox import Outbox
from cosmos_outbox.http import HttpApi, PathParameter
from cosmos_outbox.http._models import RequestModel, view_of
from cosmos_outbox.http._routes import AggregateRoutes
from orders.domain import Cents, CustomerName, Order


class PlaceOrder(RequestModel):
    """Body of POST /orders."""

    customer_name: CustomerName
    total_cents: Cents


OrderView = view_of(Order, name="OrderView", hidden=set())
"""An order as answered: every field of the order."""


def orders_blueprint(outbox: Outbox) -> func.Blueprint:
    bp = func.Blueprint()  # type: ignore[no-untyped-call]  # untyped in azure-functions
    api = HttpApi(bp, parameters={"id": PathParameter("id", "the order id")})
    orders = AggregateRoutes(api, Order, lambda: outbox.service(Order), view=OrderView)
    orders.create(route="orders", request=PlaceOrder, summary="Place an order (OrderPlaced)",
                  build=lambda body: Order.place(customer_name=body.customer_name,
                                                 total_cents=body.total_cents),
                  name="place_order")
    orders.read(route="orders/{id}", summary="Read an order")
    orders.update(route="orders/{id}/cancel", method="POST", apply=Order.cancel,
                  summary="Cancel an order (OrderCancelled); 409 when already cancelled",
                  name="cancel_order")
    return bp
