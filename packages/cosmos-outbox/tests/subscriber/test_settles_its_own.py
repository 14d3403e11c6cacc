"""The dispatcher settles its own messages when given the means (issue 92 item 5, M2;
cosmos_outbox.subscriber._settlement): completed when handled; abandoned, and the error raised,
while a later delivery may succeed; dead-lettered with the exception's type and message on the
last delivery (the subscription's MaxDeliveryCount), or at once for a message that is not an
outbox event. Either shape of the means: a Functions app's message actions (`deadletter`), an
azure-servicebus receiver (`dead_letter_message`). Without them, nothing changes: the error
propagates. funcstack's Service Bus holds the same with the SDK's receiver
(packages/cosmos-outbox-operators/tests/operators/test_dead_letters_by_cause.py)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import TicketWorld

from cosmos_outbox.subscriber import Dispatcher, IncomingEvent, Projector
from cosmos_outbox_testing import InMemoryPayloadStore, InMemoryStore, service_bus_message
from subscriber.test_projector import INBOX_TTL, Titles, delivered, history


class Raising:
    core: Any = None

    def __init__(self, error: Exception | None) -> None:
        self.error, self.core = error, self

    async def handle(self, event: IncomingEvent) -> Any:
        if self.error is not None:
            raise self.error
        return "applied"


class FunctionActions:
    """What a Functions app's message actions are asked (their methods' shape)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def complete(self, message: Any) -> None:
        self.calls.append(("complete",))

    def abandon(self, message: Any) -> None:
        self.calls.append(("abandon",))

    def deadletter(
        self, message: Any, deadletter_reason: str = "", deadletter_error_description: str = ""
    ) -> None:
        self.calls.append(("deadletter", deadletter_reason, deadletter_error_description))


class Receiver:
    """What an azure-servicebus receiver is asked (its methods' shape)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def complete_message(self, message: Any) -> None:
        self.calls.append(("complete",))

    def abandon_message(self, message: Any) -> None:
        self.calls.append(("abandon",))

    def dead_letter_message(
        self, message: Any, reason: str = "", error_description: str = ""
    ) -> None:
        self.calls.append(("deadletter", reason, error_description))


def message(delivery: int, *, poison: bool = False) -> Any:
    """A relayed ticket event as the trigger hands it over, on its `delivery`; `poison`: not an
    outbox event at all."""
    sent = delivered(history(TicketWorld(), 0)[0], delivery=delivery)
    if poison:
        return service_bus_message(b"not json at all", delivery_count=delivery)
    return sent


@pytest.mark.parametrize("means", [FunctionActions, Receiver])
def test_a_failure_is_abandoned_until_its_last_delivery_then_dead_lettered_with_its_cause(
    means: type[Any],
) -> None:
    settle = means()
    dispatcher = Dispatcher("ticket", lambda: Raising(KeyError("customerId")), max_delivery_count=3)  # type: ignore[arg-type,return-value]
    for delivery in (1, 2):
        with pytest.raises(KeyError):
            dispatcher.handle(message(delivery), settle=settle)
    assert dispatcher.handle(message(3), settle=settle) is None
    assert settle.calls == [("abandon",), ("abandon",), ("deadletter", "KeyError", "'customerId'")]


def test_poison_is_dead_lettered_at_once_and_success_completed() -> None:
    settle = FunctionActions()
    dispatcher = Dispatcher("ticket", lambda: Raising(None))  # type: ignore[arg-type,return-value]
    assert dispatcher.handle(message(1, poison=True), settle=settle) is None
    assert settle.calls[0][:2] == ("deadletter", "UnreadableEventError"), settle.calls
    settle.calls.clear()
    projector = Projector(InMemoryStore(), Titles(), inbox_ttl_seconds=INBOX_TTL)
    applying = Dispatcher("ticket", lambda: projector, payloads=InMemoryPayloadStore)
    assert applying.handle(message(1), settle=settle) is not None
    assert settle.calls == [("complete",)]


def test_without_the_means_to_settle_the_error_propagates_as_before() -> None:
    dispatcher = Dispatcher("ticket", lambda: Raising(KeyError("x")), max_delivery_count=1)  # type: ignore[arg-type,return-value]
    with pytest.raises(KeyError):
        dispatcher.handle(message(1))
