"""The dead-letter queues' contract (`DeadLetterContract`) held by the test kit's fake (sync and
through the async API) and by the Service Bus adapters (sync and `aio`) on funcstack's Service
Bus endpoint, whose subscriptions' rules filter on `outboxTarget` (fixtures/funcstack.json): a
resubmission targeted at one subscription reaches it, and not the other."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure_stack import NOTHING_MORE, TOPIC, properties
from deadlines import LOOPBACK, SHORT

from cosmos_outbox._sync_over_async import as_async, run_sync
from cosmos_outbox.ports import DeadLetterEntity, Outgoing
from cosmos_outbox.servicebus import ServiceBusDeadLetters
from cosmos_outbox.servicebus.aio import ServiceBusDeadLetters as AsyncServiceBusDeadLetters
from cosmos_outbox_testing.contracts import (
    DeadLetterContract,
    DeadLetterWorld,
    EventLoop,
    InMemoryDeadLetterWorld,
    Received,
)

if TYPE_CHECKING:
    from funcstack import LocalStack

DEAD_LETTERS = "dead-letters"


class TestInMemoryDeadLetters(DeadLetterContract):
    @pytest.fixture(params=["sync", "async"])
    def world(self, request: pytest.FixtureRequest) -> DeadLetterWorld:
        world = InMemoryDeadLetterWorld()
        if request.param == "async":
            world.queues = as_async(world.fake)
        return world


class ServiceBusDeadLetterWorld(DeadLetterWorld):
    """The `dead-letters` subscription of the test topic (not session-enabled: one receiver
    serves every test; what other tests send there is completed and passed over): messages
    sent to the topic, received there and dead-lettered with a reason; what a move sends read
    back from it."""

    def __init__(self, flavour: str, stack: LocalStack, loop: EventLoop) -> None:
        self.connection = stack.servicebus_connection_string
        self.entity = DeadLetterEntity(DEAD_LETTERS)
        self.loop = loop if flavour == "aio" else None
        self.client = ServiceBusClient.from_connection_string(self.connection)
        self.sender = self.client.get_topic_sender(TOPIC)
        self.receiver = self.client.get_subscription_receiver(TOPIC, DEAD_LETTERS)
        self.sender.__enter__()
        self.receiver.__enter__()
        if self.loop is None:
            self.queues = ServiceBusDeadLetters.from_connection_string(self.connection, TOPIC)
        else:

            async def connect() -> AsyncServiceBusDeadLetters:
                return AsyncServiceBusDeadLetters.from_connection_string(self.connection, TOPIC)

            self.queues = self.loop.run(connect())

    def run(self, coroutine: Any) -> Any:
        return self.loop.run(coroutine) if self.loop is not None else run_sync(coroutine)

    def _of(self, session: str, count: int, settle: Any) -> list[Any]:
        """`count` messages of `session` from the subscription, each settled by `settle`;
        the others completed."""
        found: list[Any] = []
        deadline = time.monotonic() + SHORT
        while len(found) < count and time.monotonic() < deadline:
            for message in self.receiver.receive_messages(max_message_count=50, max_wait_time=0.5):
                if message.session_id == session:
                    settle(message)
                    found.append(message)
                else:
                    self.receiver.complete_message(message)
        assert len(found) >= count, f"{len(found)} of {count} messages within {SHORT:g} s"
        return found

    def dead_letter(
        self, session: str, bodies: list[bytes], *, reason: str, description: str
    ) -> None:
        self.sender.send_messages(
            [
                ServiceBusMessage(
                    body,
                    message_id=str(uuid.uuid4()),
                    session_id=session,
                    subject="TicketRetitled",
                    application_properties={"n": n, "aggregateType": "ticket"},
                )
                for n, body in enumerate(bodies)
            ]
        )
        self._of(
            session,
            len(bodies),
            lambda m: self.receiver.dead_letter_message(
                m, reason=reason, error_description=description
            ),
        )

    def received(self, session: str, count: int) -> list[Received]:
        return [
            Received(str(m.message_id), m.session_id, m.subject, b"".join(m.body), properties(m))
            for m in self._of(session, count, self.receiver.complete_message)
        ]

    def close(self) -> None:
        queues = self.queues
        if isinstance(queues, ServiceBusDeadLetters):
            queues.close()
        elif isinstance(queues, AsyncServiceBusDeadLetters):
            self.run(queues.close())
        self.receiver.__exit__(None, None, None)
        self.sender.__exit__(None, None, None)
        self.client.close()


@pytest.fixture(scope="module", params=["sync", "aio"])
def service_bus_world(
    request: pytest.FixtureRequest, funcstack_services: LocalStack, loop: EventLoop
) -> Iterator[ServiceBusDeadLetterWorld]:
    """One world per flavour for the module: its links opened once."""
    world = ServiceBusDeadLetterWorld(request.param, funcstack_services, loop)
    try:
        yield world
    finally:
        world.close()


@pytest.mark.integration
class TestServiceBusDeadLetters(DeadLetterContract):
    @pytest.fixture
    def world(self, service_bus_world: ServiceBusDeadLetterWorld) -> DeadLetterWorld:
        return service_bus_world


@pytest.mark.integration
def test_a_targeted_resubmission_reaches_its_subscription_and_not_another(
    funcstack_services: LocalStack, loop: EventLoop
) -> None:
    """The subscriptions' rules (`NOT EXISTS(outboxTarget) OR outboxTarget = '<name>'`) on the
    broker: a dead letter moved to `dead-letters` arrives there, and never on `all`."""
    world = ServiceBusDeadLetterWorld("sync", funcstack_services, loop)
    try:
        session = f"s-{uuid.uuid4().hex[:8]}"
        world.dead_letter(session, [b'{"n":0}'], reason="HandlerFailed", description="boom")
        [letter] = [
            m
            for m in world.queues.peek(world.entity, from_sequence=0, max_count=100)  # type: ignore[union-attr]
            if m.session_id == session
        ]
        moved = Outgoing(
            body=letter.body,
            message_id=str(uuid.uuid4()),
            session_id=session,
            subject=letter.subject,
            content_type=letter.content_type,
            application_properties={**letter.application_properties, "outboxTarget": DEAD_LETTERS},
        )
        assert world.queues.move(world.entity, {letter.sequence_number: moved}) == {
            letter.sequence_number: None
        }
        [arrived] = world.received(session, 1)
        assert arrived.message_id == moved.message_id
        with (
            ServiceBusClient.from_connection_string(world.connection) as client,
            client.get_subscription_receiver(
                TOPIC, "all", session_id=session, max_wait_time=LOOPBACK
            ) as elsewhere,
        ):
            there = elsewhere.receive_messages(max_message_count=10, max_wait_time=SHORT)
            there += elsewhere.receive_messages(max_message_count=10, max_wait_time=NOTHING_MORE)
            # the message first sent (no target) is there; its resubmission is not
            assert [m.message_id for m in there] == [letter.message_id]
    finally:
        world.close()
