"""An order is placed with its customer and total, and cancelled once."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cosmos_outbox.aggregates import DomainError
from orders.domain import Order, OrderCancelled, OrderPlaced


def test_a_placed_order_records_what_was_ordered() -> None:
    order = Order.place(customer_name=" Ada ", total_cents=1250)
    assert (order.customer_name, order.total_cents, order.status, order.version) == (
        "Ada",
        1250,
        "placed",
        1,
    )
    [event] = order.collect_events()
    assert isinstance(event, OrderPlaced)
    assert (event.customer_name, event.total_cents, event.aggregate_id) == ("Ada", 1250, order.id)


def test_a_cancelled_order_refuses_to_be_cancelled_again() -> None:
    order = Order.place(customer_name="Ada", total_cents=0)
    order.collect_events()
    order.cancel()
    [event] = order.collect_events()
    assert isinstance(event, OrderCancelled) and event.version == 2
    assert order.status == "cancelled"
    with pytest.raises(DomainError, match="already cancelled"):
        order.cancel()


@pytest.mark.parametrize(("name", "cents"), [("", 1), ("Ada", -1), ("\u200b", 1), ("x" * 101, 1)])
def test_an_order_needs_a_customer_and_a_total_of_zero_or_more(name: str, cents: int) -> None:
    with pytest.raises(ValidationError):
        Order.place(customer_name=name, total_cents=cents)
