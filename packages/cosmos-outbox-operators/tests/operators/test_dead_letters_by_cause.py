"""The real cause in the dead letter (issue 92 item 5, M2): a subscriber's handler that raises
two different exceptions makes two failure groups. The library's dispatcher, given the means to
settle (`Dispatcher.handle(message, settle=...)`: here the azure-servicebus receiver a
subscriber of its own reads with; in a Functions app its message actions), dead-letters a
message itself on its last delivery, with the exception's type and message as the dead-letter
reason and description. Left to the broker (no `settle`: the function's error abandons the
message, as the Functions host does), every such message is "MaxDeliveryCountExceeded" and the
exceptions become one group -- what the walk of issue 92 found (5 "data is not JSON" and 6 "no
integer version", one group); the console then says where the exception is.

On funcstack's Service Bus (fixtures/funcstack.json's `cause-events` topic, its `by-cause`
subscription's MaxDeliveryCount 3), with the real publisher, dead-letter queues and rule check;
the outbox's store is the test kit's. Seen failing before the change: `handle` took no `settle`
(TypeError), and the broker's dead letters made one group."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("funcstack")

from azure.servicebus import ServiceBusClient, ServiceBusReceiver

from cosmos_outbox import Outbox
from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.servicebus import (
    ServiceBusDeadLetters,
    ServiceBusPublisher,
    ServiceBusTargetRules,
)
from cosmos_outbox.subscriber import Dispatcher, IncomingEvent
from cosmos_outbox_testing import in_memory, run_sync
from funcstack import LocalStack, deadlines

pytestmark = pytest.mark.integration

TOPIC, SUBSCRIPTION = "cause-events", "by-cause"
#: The subscription's MaxDeliveryCount (fixtures/funcstack.json).
MAX_DELIVERIES = 3
#: What the subscriber's handler raises, by the ticket (the events all of one type, as in the
#: issue's walk: the cause alone tells them apart).
FAILURES: dict[str, Exception] = {
    **dict.fromkeys(("t-0", "t-1"), ValueError("data is not JSON")),
    **dict.fromkeys(("t-2", "t-3", "t-4"), TypeError("no integer version")),
}


class FailingProjector:
    """A projector whose handler raises, by the event's ticket (`Dispatcher` calls `core`)."""

    @property
    def core(self) -> FailingProjector:
        return self

    async def handle(self, event: IncomingEvent) -> Any:
        raise FAILURES[event.aggregate_id]


class CauseWorld:
    def __init__(self, connection: str) -> None:
        self.memory = in_memory(topic=TOPIC, subscriptions={SUBSCRIPTION: None})
        services = dataclasses.replace(
            self.memory.services,
            publisher=lambda: ServiceBusPublisher(
                lambda: ServiceBusClient.from_connection_string(connection), TOPIC
            ),
            dead_letters=lambda: ServiceBusDeadLetters.from_connection_string(connection, TOPIC),
            target_rules=lambda: ServiceBusTargetRules(TOPIC, connection_string=connection),
        )
        self.outbox = Outbox(services=lambda: services)
        self.client = ServiceBusClient.from_connection_string(connection)
        self.dispatcher = Dispatcher(
            "ticket",
            FailingProjector,  # type: ignore[arg-type]
            max_delivery_count=MAX_DELIVERIES,
        )

    def publish_and_relay(self) -> None:
        """Five tickets' TicketChanged events, relayed to the topic."""
        for n in range(5):
            with self.outbox.transaction(f"t-{n}", entity="ticket") as tx:
                tx.publish("TicketChanged", {"n": n})
                tx.commit()
        documents = self.memory.store.of_type(EVENT_TYPE)
        run_sync(self.outbox.wiring().relay().relay(read_feed(documents)))

    def subscribe(self, *, settle: bool) -> None:
        """The subscriber's loop until the subscription holds nothing: each message to the
        dispatcher (with the receiver to settle, or abandoned on an error as the Functions
        host does)."""
        with self.client.get_subscription_receiver(TOPIC, SUBSCRIPTION) as receiver:
            deadlines.wait_for(
                lambda: not self._round(receiver, settle=settle) or None,
                "the subscription emptied by its subscriber",
                deadlines.SHORT,
            )

    def _round(self, receiver: ServiceBusReceiver, *, settle: bool) -> int:
        batch = receiver.receive_messages(max_message_count=20, max_wait_time=1)
        for message in batch:
            try:
                if settle:
                    self.dispatcher.handle(message, settle=receiver)
                else:
                    self.dispatcher.handle(message)
            except Exception:
                if not settle:
                    receiver.abandon_message(message)
        return len(batch)

    def dead_letters(self) -> list[tuple[str | None, str | None]]:
        with self.client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, sub_queue="deadletter"
        ) as receiver:
            found = receiver.peek_messages(max_message_count=50)
        return [(m.dead_letter_reason, m.dead_letter_error_description) for m in found]

    def empty(self) -> None:
        """What an earlier test left, dead letters too, taken."""
        for sub_queue in (None, "deadletter"):
            with self.client.get_subscription_receiver(
                TOPIC, SUBSCRIPTION, sub_queue=sub_queue
            ) as receiver:
                while batch := receiver.receive_messages(max_message_count=50, max_wait_time=1):
                    for message in batch:
                        receiver.complete_message(message)


@pytest.fixture
def world(funcstack_services: LocalStack) -> Iterator[CauseWorld]:
    world = CauseWorld(funcstack_services.servicebus_connection_string)
    try:
        world.empty()
        yield world
    finally:
        world.empty()
        world.client.close()


def groups(world: CauseWorld) -> list[dict[str, Any]]:
    found = run_sync(world.outbox.operations().groups.groups())
    assert found.unanswered == [], found.unanswered
    return [g.model_dump() for g in found.groups]


def test_two_exceptions_of_a_subscriber_are_two_groups(world: CauseWorld) -> None:
    world.publish_and_relay()
    world.subscribe(settle=True)
    letters = world.dead_letters()
    assert (
        sorted(letters)
        == [("TypeError", "no integer version")] * 3 + [("ValueError", "data is not JSON")] * 2
    ), letters
    found = sorted((g["count"], g["error_type"], g["cause"]) for g in groups(world))
    assert found == [
        (2, "ValueError", "ValueError: data is not JSON"),
        (3, "TypeError", "TypeError: no integer version"),
    ], found


def test_left_to_the_broker_they_are_one_group_and_the_console_says_where_the_cause_is(
    world: CauseWorld,
) -> None:
    """The fallback (a dispatcher not given the means to settle): the broker's reason is all
    there is; the group's row says where the exception is."""
    world.publish_and_relay()
    world.subscribe(settle=False)
    assert {reason for reason, _ in world.dead_letters()} == {"MaxDeliveryCountExceeded"}
    found = groups(world)
    assert len(found) == 1, [(g["count"], g["cause"], g["action"]) for g in found]
    [group] = found
    assert group["count"] == 5 and group["cause"].startswith("MaxDeliveryCountExceeded"), group
    from cosmos_outbox_operators._console.render import fragment

    class Request:  # what `fragment` reads of a request
        route_params: dict[str, str] = {}
        params: dict[str, str] = {}

        def get_body(self) -> bytes:
            return b""

    answer = run_sync(world.outbox.operations().groups.groups()).model_dump(
        mode="json", by_alias=True
    )
    html = fragment(
        "list_groups",
        answer=answer,
        status=200,
        request=Request(),  # type: ignore[arg-type]
        base="/api/outbox/console",
    )
    assert "data-cause-elsewhere" in html and "the exception is in the subscriber's log" in html
