"""Scheduled events on the local Azure stack (funcstack): the scheduled events' contract suite
(`ScheduledEventsContract`, held by the fakes in write_path/test_contracts.py) through the
unmodified SDKs, sync and `aio`: the event documents in Cosmos DB, the releases scheduled on a
Service Bus queue (`outbox-releases`, the message's scheduled enqueue time: Service Bus keeps it
until then), the messages on the topic read back from its session subscription. The relay is the
outbox's own, run here as the Functions host runs it (the change feed's documents at their latest
version, and each release the queue hands back), so that it can be killed and started anew: its
clients closed, what it held in memory gone, the releases it scheduled left on the broker. Due
times of a second or so: the suite waits for them."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusReceiver
from azure_stack import DATABASE, SUBSCRIPTION, TOPIC, CosmosWorld, cosmos_world
from deadlines import scaled

from cosmos_outbox._mapper import release_of
from cosmos_outbox._relay.scheduled import waiting
from cosmos_outbox.servicebus import ServiceBusPublisher, ServiceBusScheduleQueue
from cosmos_outbox.servicebus.aio import ServiceBusPublisher as AsyncServiceBusPublisher
from cosmos_outbox.servicebus.aio import ServiceBusScheduleQueue as AsyncServiceBusScheduleQueue
from cosmos_outbox.subscriber import from_message
from cosmos_outbox_testing.contracts import (
    Delivery,
    EventLoop,
    RelayingWorld,
    ScheduledEventsContract,
    ScheduleWorld,
)

if TYPE_CHECKING:
    from funcstack import LocalStack

pytestmark = pytest.mark.integration

#: fixtures/funcstack.json: the queue the relay schedules releases on.
RELEASES = "outbox-releases"


class Bus:
    """What the module's tests share, as a running relay keeps it between invocations: each
    flavour's publisher and schedule queue (the SDK's sync clients, or its `aio` ones on the
    loop), the release trigger's receiver, and the subscriber's client. A test that kills the
    relay closes the relay's (`drop`): the next relay opens new ones."""

    def __init__(self, connection: str, loop: EventLoop) -> None:
        self.connection = connection
        self.loop = loop
        self.subscriber = ServiceBusClient.from_connection_string(connection)
        self._relays: dict[bool, tuple[Any, Any]] = {}
        self._trigger: tuple[ServiceBusClient, ServiceBusReceiver] | None = None

    def adapters(self, asynchronous: bool) -> tuple[Any, Any]:
        found = self._relays.get(asynchronous)
        if found is None:
            if asynchronous:

                async def make() -> tuple[Any, Any]:
                    return (
                        AsyncServiceBusPublisher.from_connection_string(self.connection, TOPIC),
                        AsyncServiceBusScheduleQueue.from_connection_string(
                            self.connection, RELEASES
                        ),
                    )

                found = self.loop.run(make())
            else:
                found = (
                    ServiceBusPublisher.from_connection_string(self.connection, TOPIC),
                    ServiceBusScheduleQueue.from_connection_string(self.connection, RELEASES),
                )
            self._relays[asynchronous] = found
        return found

    def releases(self) -> ServiceBusReceiver:
        """The release trigger's receiver (what the Functions host holds for it), open."""
        if self._trigger is None:
            client = ServiceBusClient.from_connection_string(self.connection)
            # opened now (`with`'s entry): a first receive's short wait would not open a link
            self._trigger = client, client.get_queue_receiver(RELEASES).__enter__()
        return self._trigger[1]

    def drop(self) -> None:
        """The relay killed: its clients closed, the release trigger's receiver too."""
        for asynchronous, adapters in self._relays.items():
            for adapter in adapters:
                closed = adapter.close()
                if asynchronous:
                    self.loop.run(closed)
        self._relays.clear()
        if self._trigger is not None:
            client, receiver = self._trigger
            receiver.close()
            client.close()
            self._trigger = None

    def close(self) -> None:
        self.drop()
        self.subscriber.close()


@pytest.fixture(scope="module")
def bus(funcstack_services: LocalStack, loop: EventLoop) -> Iterator[Bus]:
    shared = Bus(funcstack_services.servicebus_connection_string, loop)
    try:
        yield shared
    finally:
        shared.close()


class ServiceBusScheduleWorld(RelayingWorld):
    """The outbox's container on funcstack's Cosmos DB endpoint, the relay's publisher and
    schedule queue on its Service Bus endpoint (`bus`'s, sync or `aio`), and the wall clock."""

    #: The contract cancels a third of this after the publish, before the due time. At 1 s a
    #: loaded `make test` once took longer than that to reach the cancel (the relay's receive
    #: waits and the sync bridge's thread), and the release was due before the cancel came; at
    #: 2 s the 3.11 job did once too, at load 14 (the relay's start and kill between). Scaled
    #: with the deadlines (TEST_DEADLINE_SCALE) for a slower machine.
    delay = timedelta(seconds=scaled(3.0))

    def __init__(self, store: CosmosWorld, bus: Bus) -> None:
        super().__init__()
        self.store = store
        self._bus = bus
        #: the subscription's session receivers (the subscriber's: open across the test)
        self._sessions: dict[str, ServiceBusReceiver] = {}

    def __enter__(self) -> ServiceBusScheduleWorld:
        self.store.run(self.relay().check())  # started and ready, as a relay that ran before
        self._bus.releases()
        return self

    def __exit__(self, *exc: object) -> None:
        self._relay = self._releases = None  # the module's relay goes on with the next test
        for receiver in self._sessions.values():
            receiver.close()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def documents(self) -> list[dict[str, Any]]:
        assert isinstance(self.store, CosmosWorld)
        return list(
            self.store.container.query_items(
                "SELECT * FROM c WHERE c.type = 'domainEvent'", enable_cross_partition_query=True
            )
        )

    def adapters(self) -> tuple[Any, Any]:
        return self._bus.adapters(self.store.asynchronous)

    def run_relay(self, until: datetime) -> None:
        self.relay_changes()
        receiver = self._bus.releases()
        while True:
            left = (until - self.now()).total_seconds()
            for message in receiver.receive_messages(
                max_message_count=50, max_wait_time=max(0.1, min(left, 0.25))
            ):
                self.release(release_of(b"".join(message.body)))
                receiver.complete_message(message)
            self.relay_changes()
            if left <= 0:
                return

    def kill_relay(self) -> None:
        super().kill_relay()
        self._bus.drop()

    def wait(self, until: datetime) -> None:
        time.sleep(max(0.0, (until - self.now()).total_seconds()))

    def delivered(self, sessions: Iterable[str]) -> list[Delivery]:
        found = []
        for session in sessions:
            receiver = self._sessions.get(session)
            if receiver is None:
                receiver = self._sessions[session] = self._bus.subscriber.get_subscription_receiver(
                    TOPIC, SUBSCRIPTION, session_id=session
                ).__enter__()
            while batch := receiver.receive_messages(max_message_count=50, max_wait_time=0.3):
                for message in batch:
                    receiver.complete_message(message)
                    event = from_message(
                        b"".join(message.body),
                        content_type=message.content_type,
                        application_properties=message.application_properties,
                    )
                    at = message.enqueued_time_utc
                    assert at is not None
                    found.append(Delivery(event, str(message.message_id), at.astimezone(UTC)))
        return found


class TestServiceBusScheduledEvents(ScheduledEventsContract):
    @pytest.fixture(params=["sync", "aio"])
    def world(
        self,
        request: pytest.FixtureRequest,
        fresh: str,
        funcstack_services: LocalStack,
        loop: EventLoop,
        bus: Bus,
    ) -> ScheduleWorld:
        store = cosmos_world(
            request.param,
            funcstack_services.container_client(DATABASE, fresh),
            funcstack_services,
            loop,
        )
        return ServiceBusScheduleWorld(store, bus)


def test_the_scheduled_events_waiting_are_counted_on_cosmos_db(
    fresh: str, funcstack_services: LocalStack, loop: EventLoop
) -> None:
    """The operators' status reads the waiting scheduled events with one query across
    partitions (`IS_DEFINED` of their due time, release and cancel): Cosmos DB's answer."""
    store = cosmos_world(
        "sync", funcstack_services.container_client(DATABASE, fresh), funcstack_services, loop
    )
    due = datetime.now(UTC) + timedelta(hours=1)
    for session in ("w1", "w2"):
        with store.transaction(session, entity="reservation") as tx:
            tx.publish("Held", {})
            expiry = tx.publish("HoldExpired", {}, deliver_at=due)
            tx.commit()
    with store.transaction("w2", entity="reservation") as tx:
        tx.cancel(expiry)
        tx.commit()
    found = store.run(waiting(store.async_store))
    assert (found.waiting, found.overdue, found.next_due_at) == (1, 0, due)
