"""An order and what happens to it. Imports only the standard library, pydantic and
cosmos-outbox's domain core."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt

from cosmos_outbox.aggregates import Aggregate, DomainError, Event, Text

CustomerName = Annotated[str, Text(max_length=100)]
#: Cents, a JSON integer (not a string of digits, not a boolean): 0 up to 10 billion.
Cents = Annotated[StrictInt, Field(ge=0, le=10_000_000_000)]


class Order(Aggregate):
    customer_name: CustomerName
    total_cents: Cents
    status: Literal["placed", "cancelled"] = "placed"

    @classmethod
    def place(cls, *, customer_name: str, total_cents: int) -> Order:
        order = cls(customer_name=customer_name, total_cents=total_cents)
        order.record(OrderPlaced)  # with the order's customer_name and total_cents
        return order

    def cancel(self) -> None:
        if self.status == "cancelled":
            raise DomainError(f"order {self.id} is already cancelled")  # 409
        self.status = "cancelled"
        self.record(OrderCancelled)  # version + 1


@Order.event
class OrderPlaced(Event):
    customer_name: str
    total_cents: int


@Order.event
class OrderCancelled(Event):
    pass
