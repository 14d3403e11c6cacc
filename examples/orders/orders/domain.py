"""An order and what happens to it. Imports only the standard library, pydantic and the domain
core of cosmos-outbox."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field, StrictInt

from cosmos_outbox._domain import Aggregate, DomainError, DomainEvent, event_aliases
from cosmos_outbox._text import Text

CustomerName = Annotated[str, Text(max_length=100)]
#: Cents, a JSON integer (not a string of digits, not a boolean): 0 up to 10 billion.
Cents = Annotated[StrictInt, Field(ge=0, le=10_000_000_000)]
Status = Literal["placed", "cancelled"]


class OrderAlreadyCancelledError(DomainError):
    def __init__(self, order_id: str) -> None:
        super().__init__(f"order {order_id} is already cancelled")


class OrderEvent(DomainEvent):
    """Something that happened to one order; `orderId` on the wire."""

    model_config = ConfigDict(alias_generator=event_aliases("order"))
    aggregate_type: ClassVar[str] = "order"


class OrderPlaced(OrderEvent):
    action: Literal["OrderPlaced"] = "OrderPlaced"
    customer_name: str
    total_cents: int


class OrderCancelled(OrderEvent):
    action: Literal["OrderCancelled"] = "OrderCancelled"


class Order(Aggregate):
    aggregate_type: ClassVar[str] = "order"
    collection: ClassVar[str] = "orders"

    customer_name: CustomerName
    total_cents: Cents
    status: Status = "placed"

    @classmethod
    def place(cls, *, customer_name: str, total_cents: int) -> Order:
        order = cls(customer_name=customer_name, total_cents=total_cents)
        order._record(OrderPlaced, customer_name=order.customer_name,
                      total_cents=order.total_cents)
        return order

    def cancel(self) -> None:
        if self.status == "cancelled":
            raise OrderAlreadyCancelledError(self.id)
        self.status = "cancelled"
        self._change(OrderCancelled)
