"""The Orders API: three routes on cosmos-outbox's route helper.

- `POST /api/orders` `{customerName, totalCents}`: 201, `Location`, `ETag`, the order;
- `GET /api/orders/{id}`: 200 and `ETag` (304 with a matching `If-None-Match`);
- `POST /api/orders/{id}/cancel`: 200 and `ETag`; 409 when already cancelled; 412 when
  `If-Match` no longer matches (the order changed since it was read).
"""

from __future__ import annotations

from cosmos_outbox import Outbox
from cosmos_outbox.http import AggregateRoutes, RequestModel
from orders.domain import Cents, CustomerName, Order


class PlaceOrder(RequestModel):
    """Body of POST /orders."""

    customer_name: CustomerName
    total_cents: Cents


def order_routes(outbox: Outbox) -> AggregateRoutes[Order]:
    orders = outbox.routes(Order)  # answers show every field of the order
    orders.create(
        route="orders",
        request=PlaceOrder,
        summary="Place an order (OrderPlaced)",
        build=lambda body: Order.place(**body.fields()),
        name="place_order",
    )
    orders.read(route="orders/{id}", summary="Read an order")
    orders.update(
        route="orders/{id}/cancel",
        method="POST",
        apply=Order.cancel,
        summary="Cancel an order (OrderCancelled); 409 when already cancelled",
        name="cancel_order",
    )
    return orders
